package node

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gatedEcho serves a console stand-in behind gate: each client let in is
// greeted with "hello\n" and then echoed.
func gatedEcho(t *testing.T, gate *ConsoleGate, key string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := gate.Listener(ln, key)
	t.Cleanup(func() { gl.Close() })
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("hello\n"))
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialFrom connects to addr from the loopback address from (Linux routes
// all of 127/8 locally).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil && line == "" {
		return "EOF: " + err.Error()
	}
	return strings.TrimRight(line, "\r\n")
}

func TestConsoleGateLetsInOnlyGrantedAddressesAndCutsOffRevokedOnes(t *testing.T) {
	gate := NewConsoleGate(true)
	key := ConsoleKey("P1", "N1")
	addr := gatedEcho(t, gate, key)
	granted := netip.MustParseAddr("127.0.0.2")
	gate.Grant(key, granted, time.Minute)

	refused := bufio.NewReader(dialFrom(t, "127.0.0.3", addr))
	if line := readLine(t, refused); !strings.Contains(line, "not open to 127.0.0.3") {
		t.Fatalf("a client not granted read %q, want the refusal", line)
	}
	if _, err := refused.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want EOF", err)
	}

	c := dialFrom(t, "127.0.0.2", addr)
	r := bufio.NewReader(c)
	if line := readLine(t, r); line != "hello" {
		t.Fatalf("the granted client read %q, want hello", line)
	}
	c.Write([]byte("ping\n"))
	if line := readLine(t, r); line != "ping" {
		t.Fatalf("echo: %q", line)
	}

	// Another node's grant lets nobody in here.
	gate.Grant(ConsoleKey("p1", "n2"), netip.MustParseAddr("127.0.0.4"), time.Minute)
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.4", addr))); !strings.Contains(line, "not open") {
		t.Fatalf("a client granted another node read %q", line)
	}

	gate.Revoke(key, granted)
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("the open connection after its revocation: %v, want EOF", err)
	}
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.2", addr))); !strings.Contains(line, "not open") {
		t.Fatalf("a revoked client reconnecting read %q", line)
	}
}

func TestConsoleGateGrantsExpire(t *testing.T) {
	gate := NewConsoleGate(true)
	var now atomic.Int64 // nanoseconds on the gate's clock
	now.Store(time.Now().UnixNano())
	gate.now = func() time.Time { return time.Unix(0, now.Load()) }
	key := ConsoleKey("p", "n")
	addr := gatedEcho(t, gate, key)
	gate.Grant(key, netip.MustParseAddr("127.0.0.2"), time.Minute)
	oc := dialFrom(t, "127.0.0.2", addr)
	open := bufio.NewReader(oc)
	if line := readLine(t, open); line != "hello" {
		t.Fatalf("granted: %q", line)
	}
	now.Add(int64(time.Minute))
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.2", addr))); !strings.Contains(line, "not open") {
		t.Fatalf("after expiry: %q, want the refusal", line)
	}
	// Expiry stops new connections only: the open one goes on.
	oc.Write([]byte("still\n"))
	if line := readLine(t, open); line != "still" {
		t.Fatalf("the open connection after expiry read %q", line)
	}
}

func TestConsoleGateOpenLetsEveryoneIn(t *testing.T) {
	gate := NewConsoleGate(false)
	addr := gatedEcho(t, gate, ConsoleKey("p", "n"))
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.5", addr))); line != "hello" {
		t.Fatalf("open gate: %q", line)
	}
	gate.SetGated(true)
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.5", addr))); !strings.Contains(line, "not open") {
		t.Fatalf("closed gate: %q", line)
	}
}

// The agent's own dial (the console WebSocket) passes a closed gate by
// its bound source port, and only that connection: another client from
// the same loopback address is still refused.
func TestConsoleGateLetsTheAgentsOwnDialThrough(t *testing.T) {
	gate := NewConsoleGate(true)
	addr := gatedEcho(t, gate, ConsoleKey("p", "n"))
	c, err := gate.Dial(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if line := readLine(t, bufio.NewReader(c)); line != "hello" {
		t.Fatalf("the agent's dial read %q", line)
	}
	if line := readLine(t, bufio.NewReader(dialFrom(t, "127.0.0.1", addr))); !strings.Contains(line, "not open") {
		t.Fatalf("another loopback client read %q", line)
	}
}
