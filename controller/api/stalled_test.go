package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/labtap/labtap/controller/api"
)

// smallBuffers dials with a 4 KiB receive buffer, so a client that reads
// nothing stalls its stream after little data.
var smallBuffers = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	if err != nil {
		return err
	}
	return serr
}}

// Not parallel, unlike the package's other tests: it sets the stream
// write grace and cut hook, package globals every stream reads.
func TestAStalledListenerIsDroppedWhileHealthyOnesGetEveryMessage(t *testing.T) {
	defer api.SetWriteGrace(2 * time.Second)()
	cut := make(chan struct{}, 16)
	defer api.OnStreamCut(func() { cut <- struct{}{} })()
	l := newLive(t, time.Minute)
	p := l.call("POST", "/v2/projects", map[string]any{"name": "stalled"}, 201)["project_id"].(string)
	path := "/v2/projects/" + p + "/notifications"
	healthy := []*listener{l.listenHTTP(path), l.listenWS(path + "/ws")}

	// Two listeners that read nothing after connecting: one over HTTP, one
	// over WebSocket.
	raw, err := smallBuffers.Dial("tcp", strings.TrimPrefix(l.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET %s HTTP/1.1\r\nHost: labtap\r\n\r\n", path)
	dialer := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return smallBuffers.DialContext(ctx, network, addr)
	}}
	ws, _, err := dialer.Dial("ws"+strings.TrimPrefix(l.url, "http")+path+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	waitCount := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for l.hub.Count(p) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d listeners, want %d", l.hub.Count(p), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCount(4)

	// 4 KiB messages, far more than the stalled clients' queues and socket
	// buffers hold, published in rounds the healthy listeners keep up with.
	const rounds, perRound = 40, 200
	pad := strings.Repeat("x", 4096)
	seq := 0
	for range rounds {
		for range perRound {
			l.hub.Publish(p, fmt.Appendf(nil, `{"action":"log.info","event":{"message":"%d %s"}}`, seq, pad))
			seq++
		}
		for i, h := range healthy {
			for want := seq - perRound; want < seq; want++ {
				e := h.next(t)
				var got int
				fmt.Sscan(e.Event["message"].(string), &got)
				if e.Action != "log.info" || got != want {
					t.Fatalf("healthy listener %d got message %d (%s), want %d", i, got, e.Action, want)
				}
			}
		}
	}
	// The stalled ones were dropped, and the server gives up on their
	// connections once they have taken nothing for the grace: the HTTP
	// stream is cut short (it would end cleanly, and the connection stay
	// open for the next request, if the server were still waiting to
	// write when the client reads again).
	waitCount(2)
	// Reading before the server gave up would let its write finish: wait
	// until it has given up on both stalled streams.
	for range 2 {
		select {
		case <-cut:
		case <-time.After(30 * time.Second):
			t.Fatal("the server did not give up on the stalled streams")
		}
	}
	raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(raw), nil)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not give up on the stalled HTTP stream: %v", err)
	}
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the stalled WebSocket stream did not end")
			}
			break
		}
	}
	// The healthy ones go on.
	l.call("POST", "/v2/projects/"+p+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	for _, h := range healthy {
		h.expect(t, "node.created")
	}
}
