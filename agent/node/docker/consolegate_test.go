package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
)

// TestContainerConsolesPassTheGate: a docker node's console and aux
// console let in only the addresses granted for the node, and a revoked
// address's open connection is cut off.
func TestContainerConsolesPassTheGate(t *testing.T) {
	e := testEngine(t)
	var stopped atomic.Int32
	c, cfg := newTestContainer(t, e, 1, &stopped)
	gate := node.NewConsoleGate(true)
	key := node.ConsoleKey(cfg.ProjectID, cfg.NodeID)
	c.cfg.ConsoleGate = gate.Wrap(key)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	console, _ := c.Console()
	c.mu.Lock()
	aux := c.aux
	c.mu.Unlock()
	dial := func(from string, port int) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		return conn
	}
	refusal := []byte("labtap: this console is not open to 127.0.0.3")
	for _, port := range []int{console, aux} {
		got, _ := io.ReadAll(dial("127.0.0.3", port))
		if !bytes.HasPrefix(got, refusal) {
			t.Fatalf("port %d from an address not granted: %q", port, got)
		}
	}
	gate.Grant(key, netip.MustParseAddr("127.0.0.3"), time.Minute)
	conn := dial("127.0.0.3", console)
	buf := make([]byte, 4096)
	var got []byte
	for !bytes.Contains(got, []byte("console is now available")) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("the granted address's console: %v after %q", err, got)
		}
	}
	gate.Revoke(key, netip.MustParseAddr("127.0.0.3"))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the revoked connection was not closed: %v", err)
	}
}
