package bridge_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/captures"
	"golang.org/x/net/ipv4"
)

type fileTap struct{ f *captures.File }

func (t fileTap) WritePackets(dir bridge.Direction, frames [][]byte) {
	t.f.WritePackets(captures.Direction(dir), frames)
}

// BenchmarkRelay pushes frames through a real relay over loopback UDP
// (generator → port A → link → port B → sink, all in this process, at most
// 1024 frames in flight) and reports the frames/s it sustains, with and
// without a capture to disk. scripts/bench measures the same path with the
// agent in its own process, pinned, against the machine's ceiling.
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{64, 1500} {
		for _, capture := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/capture=%v", size, capture), func(b *testing.B) {
				benchmarkRelay(b, size, capture)
			})
		}
	}
}

func benchmarkRelay(b *testing.B, size int, capture bool) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	sink, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(lo))
	must(err)
	defer sink.Close()
	must(sink.SetReadBuffer(4 << 20))
	pa, err := bridge.ListenUDP(bridge.UDPConfig{Local: lo})
	must(err)
	gen, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(lo), net.UDPAddrFromAddrPort(pa.LocalAddr()))
	must(err)
	defer gen.Close()
	pa.SetPeer(gen.LocalAddr().(*net.UDPAddr).AddrPort())
	pb, err := bridge.ListenUDP(bridge.UDPConfig{Local: lo, Peer: sink.LocalAddr().(*net.UDPAddr).AddrPort(), Connect: true})
	must(err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // closes the ports
	go pa.Serve(ctx)
	go pb.Serve(ctx)
	l := bridge.NewLink(pa, pb, nil)
	defer l.Close()
	if capture {
		root, err := os.OpenRoot(b.TempDir())
		must(err)
		defer root.Close()
		f, err := captures.Create(root, "b.pcap", captures.Options{})
		must(err)
		defer f.Close()
		l.SetTap(fileTap{f})
	}
	var got atomic.Int64
	go func() {
		pc := ipv4.NewPacketConn(sink)
		ms := make([]ipv4.Message, 64)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, 65536)}
		}
		for {
			n, err := pc.ReadBatch(ms, 0)
			if err != nil {
				return
			}
			got.Add(int64(n))
		}
	}()
	const batch, window = 32, 1024
	pc := ipv4.NewPacketConn(gen)
	ms := make([]ipv4.Message, batch)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size)}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		for int64(i)-got.Load() >= window {
			time.Sleep(10 * time.Microsecond)
		}
		n := min(batch, b.N-i)
		for j := range n {
			binary.BigEndian.PutUint64(ms[j].Buffers[0], uint64(i+j))
		}
		sent, err := pc.WriteBatch(ms[:n], 0)
		must(err)
		i += sent
	}
	deadline := time.Now().Add(5 * time.Second)
	for got.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(got.Load())/el.Seconds(), "frames/s")
	b.ReportMetric(float64(int64(b.N)-got.Load()), "lost")
}
