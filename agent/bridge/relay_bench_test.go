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

// BenchmarkSwitchPath pushes frames as BenchmarkRelay does, through a chain
// of switches: generator → port A → link (captured) → switch → link → ... →
// switch → link → port B → sink. hops=0 is BenchmarkRelay's path, measured
// in the same run as the chains to compare them.
func BenchmarkSwitchPath(b *testing.B) {
	for _, hops := range []int{0, 1, 4} {
		for _, capture := range []bool{false, true} {
			b.Run(fmt.Sprintf("switches=%d/size=64/capture=%v", hops, capture), func(b *testing.B) {
				benchmarkPath(b, 64, capture, hops)
			})
		}
	}
}

func benchmarkRelay(b *testing.B, size int, capture bool) { benchmarkPath(b, size, capture, 0) }

// benchmarkPath measures frames/s from a generator to a sink over loopback
// UDP through hops switches; the first link captures when capture is set.
func benchmarkPath(b *testing.B, size int, capture bool, hops int) {
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
	// pa - sw[0] - sw[1] - ... - pb, each switch using its ports 0 and 1.
	left := bridge.Port(pa)
	var l *bridge.Link
	var switches []*bridge.Switch
	for range hops {
		sw, err := bridge.NewSwitch([]bridge.SwitchPort{{VLAN: 1}, {VLAN: 1}})
		must(err)
		defer sw.Close()
		switches = append(switches, sw)
		li := bridge.NewLink(left, sw.Port(0), nil)
		defer li.Close()
		if l == nil {
			l = li
		}
		left = sw.Port(1)
	}
	last := bridge.NewLink(left, pb, nil)
	defer last.Close()
	if l == nil {
		l = last
	}
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
	var givenUp int64
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		// Wait for room in the window; frames lost on the way would
		// keep it full for ever, so after 2 s they are given up on.
		stuck := time.Now().Add(2 * time.Second)
		for int64(i)-got.Load()-givenUp >= window && time.Now().Before(stuck) {
			time.Sleep(10 * time.Microsecond)
		}
		if inFlight := int64(i) - got.Load() - givenUp; inFlight >= window {
			givenUp += inFlight
		}
		n := min(batch, b.N-i)
		for j := range n {
			// Fixed unicast MACs (the switches learn them once), then a
			// sequence number.
			f := ms[j].Buffers[0]
			copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
			binary.BigEndian.PutUint64(f[14:], uint64(i+j))
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
	var drops uint64
	for _, sw := range switches {
		for _, st := range sw.Stats() {
			drops += st.Drops
		}
	}
	b.ReportMetric(float64(drops), "switch-drops")
}
