package docker

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A relay's Close ends its accept loop and the copiers of connections
// still open on both sides, and returns only once they have ended.
func TestRelayCloseEndsItsConnectionsAndGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := startRelay(ln, func() (net.Conn, error) { return net.Dial("tcp", echo.Addr().String()) })
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "hello\n" {
			t.Fatalf("relayed %q, %v; want the echo", line, err)
		}
		clients = append(clients, c)
	}
	r.Close()
	for i, c := range clients {
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("client %d: read %d bytes after Close; want its connection closed", i, n)
		}
	}
	echo.Close()
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}
