package host

import (
	"fmt"
	"testing"

	"github.com/labtap/labtap/proto"
)

// BenchmarkCaptureStart times the agent's start of a link's capture, its
// file made durable (the header and the directory entry synced) before
// Start returns, in a captures folder that fills with the captures of
// earlier iterations as a lab's does. The stop is not timed.
func BenchmarkCaptureStart(b *testing.B) {
	for _, format := range []string{"pcap", "pcapng"} {
		b.Run(format, func(b *testing.B) {
			h := linkedHost(b)
			i := 0
			for b.Loop() {
				i++
				if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: fmt.Sprintf("b%d.%s", i, format), Format: format}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := h.Captures.Stop(testProject, testLink); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCaptureRestart times the start of a link's capture started and
// stopped again and again under one name, as GNS3's client does (it sends
// no name: the link's default one): each start is given the next free
// name-N, its folder holding every earlier file. The stop is not timed.
func BenchmarkCaptureRestart(b *testing.B) {
	h := linkedHost(b)
	for b.Loop() {
		if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "again.pcap"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := h.Captures.Stop(testProject, testLink); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
