package web

import (
	"bytes"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// BenchmarkFeedDecode100k times the view's decode of a capture of 100,000
// records (ARP, ICMP echo and BGP KEEPALIVE in turn) into rows, with
// gopacket alone and with tshark (its columns over gopacket's tree and
// bytes), to the feed's end. records/s is the rate.
func BenchmarkFeedDecode100k(b *testing.B) {
	const records = 100_000
	fs := append(frames(b), bgpKeepalive(b))
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	t0 := time.Unix(1700000000, 0)
	for i := range records {
		f := fs[i%len(fs)]
		w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(f), Length: len(f)}, f)
	}
	for _, decoder := range []string{"gopacket", "tshark"} {
		b.Run(decoder, func(b *testing.B) {
			cfg := Config{}
			if decoder == "tshark" {
				p, err := exec.LookPath("tshark")
				if err != nil {
					b.Skip("no tshark")
				}
				cfg.Tshark = p
			}
			v := New(cfg)
			rows := 0
			for b.Loop() {
				rows = 0
				counter := &rowCounter{}
				if err := v.Feed(b.Context(), io.NopCloser(bytes.NewReader(capture.Bytes())), "", counter, func() error { return nil }); err != nil {
					b.Fatal(err)
				}
				rows = counter.rows
			}
			if rows != records {
				b.Fatalf("%d rows of %d records", rows, records)
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// rowCounter counts the rows of the events written to it.
type rowCounter struct{ rows int }

func (c *rowCounter) Write(p []byte) (int, error) {
	c.rows += bytes.Count(p, []byte(`"no":`))
	return len(p), nil
}
