package netguard

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// flaky fails its first accepts with EMFILE, as a process out of
// descriptors does.
type flaky struct {
	net.Listener
	fails int
}

func (f *flaky) Accept() (net.Conn, error) {
	if f.fails > 0 {
		f.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

func TestAcceptWaitsOutEMFILEInsteadOfFailing(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(&flaky{Listener: tcp, fails: 3}, Config{})
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", tcp.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE = %v, want the next connection", err)
	}
	c.Close()
	l.Close()
	if _, err := l.Accept(); err == nil {
		t.Fatal("Accept on a closed listener succeeded")
	}
}

func TestConnectionsOverTheCapsAreRefusedWithJSONAndSlotsComeBack(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(tcp, Config{MaxConns: 10, MaxPerIP: 2})
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	first, second := <-accepted, <-accepted
	third := dial()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, _ := io.ReadAll(third)
	head, body, _ := strings.Cut(string(reply), "\r\n\r\n")
	var e struct {
		Message string `json:"message"`
		Status  int    `json:"status"`
	}
	if !strings.HasPrefix(head, "HTTP/1.1 503") || json.Unmarshal([]byte(body), &e) != nil || e.Status != 503 || !strings.Contains(e.Message, "127.0.0.1") {
		t.Fatalf("a third connection from one address got %q", reply)
	}
	if l.Open() != 2 {
		t.Fatalf("Open() = %d, want 2", l.Open())
	}
	first.Close()
	first.Close() // a second close gives nothing back twice
	a.Close()
	if l.Open() != 1 {
		t.Fatalf("Open() after a close = %d, want 1", l.Open())
	}
	d := dial()
	defer d.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not given to the next connection")
	}
	second.Close()
	b.Close()
}

func TestWatchGoneHearsAClientLeaveWithNothingWritten(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(tcp, Config{})
	defer l.Close()
	client, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	gone := make(chan struct{})
	stop, ok := WatchGone(server, func() { close(gone) })
	if !ok {
		t.Fatal("WatchGone cannot watch a TCP connection")
	}
	client.Write([]byte("bytes after the request are not a departure"))
	select {
	case <-gone:
		t.Fatal("gone before the client left")
	case <-time.After(200 * time.Millisecond):
	}
	client.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's departure was not noticed")
	}
	stop() // the watch has ended: returns at once
}

// The caller owns the watch: stop ends it while the client stays, without
// a call to gone, and returns once its goroutine has ended.
func TestWatchGoneStopEndsTheWatch(t *testing.T) {
	before := goleak.IgnoreCurrent()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	client, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := tcp.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	var called atomic.Bool
	stop, ok := WatchGone(server, func() { called.Store(true) })
	if !ok {
		t.Fatal("WatchGone cannot watch a TCP connection")
	}
	stop()
	stop()
	if called.Load() {
		t.Fatal("gone called for a watch that was stopped")
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("the watch outlived stop: %v", err)
	}
}
