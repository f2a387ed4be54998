package node

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// A VM's serial console comes a few bytes per read. A client that is a
// few hundred reads behind (its socket full for a moment) is far from too
// slow: it gets every byte, as the QEMU e2e test's console once did not
// (the bound counted reads, 256, and dropped it mid-boot).
func TestAConsoleClientBehindByManySmallReadsGetsEveryByte(t *testing.T) {
	pr, pw := io.Pipe()
	term := struct {
		io.Reader
		io.Writer
	}{pr, io.Discard}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := ServeConsole(ln, term, ConsoleOptions{})
	defer s.Close()
	defer pw.Close() // first: Close waits for the terminal's reader
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096) // falls behind at once
	one := make([]byte, 1)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(conn, one); err != nil { // the greeting: registered
		t.Fatal(err)
	}
	const size = 200 << 10
	want := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	go func() {
		for i := range want { // one read each
			if _, err := pw.Write(want[i : i+1]); err != nil {
				return
			}
		}
	}()
	var got []byte
	buf := make([]byte, 64<<10)
	for !bytes.HasSuffix(got, want[len(want)-64:]) || len(got) < size {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if i := bytes.Index(got, want[:64]); i < 0 || !bytes.Equal(got[i:], want) {
		t.Fatalf("the client got %d bytes, not the %d the console printed", len(got), size)
	}
}

// BenchmarkConsoleOutput measures the node's output reaching two telnet
// clients over loopback: one op is a 1 KiB chunk the node prints, read
// by the console and written to both clients (allocations per chunk).
func BenchmarkConsoleOutput(b *testing.B) {
	pr, pw := io.Pipe()
	term := struct {
		io.Reader
		io.Writer
	}{pr, io.Discard}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := ServeConsole(ln, term, ConsoleOptions{})
	defer s.Close()
	defer pw.Close() // first: Close waits for the terminal's reader
	counts := make([]atomic.Int64, 2)
	for i := range counts {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		hello := make([]byte, len(greeting))
		if _, err := io.ReadFull(conn, hello); err != nil { // registered
			b.Fatal(err)
		}
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := conn.Read(buf)
				counts[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	chunk := bytes.Repeat([]byte("x"), 1024)
	sent := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		// At most 64 KiB in flight: far from the backlog that drops a
		// client.
		for i := range counts {
			for counts[i].Load() < sent-64<<10 {
				runtime.Gosched()
			}
		}
		if _, err := pw.Write(chunk); err != nil {
			b.Fatal(err)
		}
		sent += int64(len(chunk))
	}
	for i := range counts {
		for counts[i].Load() < sent {
			time.Sleep(time.Millisecond)
		}
	}
}
