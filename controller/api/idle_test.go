package api

import (
	"net"
	"testing"

	"github.com/labtap/labtap/internal/netguard"
)

// The quiet-idle wrapper must leave the socket within reach: a /pcap stream
// notices its client's departure by watching it, and a wrapper that hid it
// kept every abandoned stream's descriptors until the next frame.
func TestAQuietConnectionStillLetsAStreamWatchItsClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ql := QuietIdle(ln)
	defer ql.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ql.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	gone := make(chan struct{})
	if _, ok := netguard.WatchGone(server, func() { close(gone) }); !ok {
		t.Fatal("WatchGone cannot watch a connection QuietIdle accepted")
	}
	client.Close()
	<-gone
}
