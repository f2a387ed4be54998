package node

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A VM's serial console comes a few bytes per read. A client that is a
// few hundred reads behind (its socket full for a moment) is far from too
// slow: it gets every byte, as the QEMU e2e test's console once did not
// (the bound counted reads, 256, and dropped it mid-boot).
func TestAConsoleClientBehindByManySmallReadsGetsEveryByte(t *testing.T) {
	pw, term, ln := pipedConsole(t, io.Discard)
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
	pw, term, ln := pipedConsole(b, io.Discard)
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

// lockedBuffer is what a node is typed, safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A telnet client over loopback that stops reading holds nobody up: the
// node prints on, another client gets all of it and types to the node
// meanwhile. Once it reads again, the stalled client gets every byte
// printed, in order; pushed far behind, it gets what was printed in
// order, up to where it was cut off, never a gap or a reordering.
func TestAStalledConsoleClientBlocksNobodyAndLosesNothingSilently(t *testing.T) {
	typed := &lockedBuffer{}
	pw, term, ln := pipedConsole(t, typed)
	s := ServeConsole(ln, term, ConsoleOptions{})
	defer s.Close()
	defer pw.Close() // first: Close waits for the terminal's reader
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// A small receive buffer, so that the stalled client falls
		// behind soon (not so small that the kernel's window updates
		// wait for its persist timer).
		conn.(*net.TCPConn).SetReadBuffer(64 << 10)
		hello := make([]byte, len(greeting))
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(conn, hello); err != nil { // registered
			t.Fatal(err)
		}
		return conn
	}
	stalled := dial()
	// The console's end of the stalled client's connection gets a small
	// send buffer too: the kernel's buffers would otherwise hold all of
	// what it falls behind by here, and it would never be cut off.
	s.s.mu.Lock()
	for c := range s.s.clients { // the only one yet
		c.conn.(*net.TCPConn).SetWriteBuffer(64 << 10)
	}
	s.s.mu.Unlock()
	live := dial()
	// live reads all the time, into got.
	var gotMu sync.Mutex
	var got []byte
	liveDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			live.SetReadDeadline(time.Now().Add(60 * time.Second))
			n, err := live.Read(buf)
			gotMu.Lock()
			got = append(got, buf[:n]...)
			gotMu.Unlock()
			if err != nil {
				liveDone <- err
				return
			}
		}
	}()
	liveGot := func() []byte {
		gotMu.Lock()
		defer gotMu.Unlock()
		return bytes.Clone(got)
	}
	// write writes output in reads of varying sizes, numbered so that a
	// gap or a reordering shows; it fails if the node is held up.
	var printed []byte
	write := func(size int) {
		var out []byte
		for i := len(printed); len(out) < size; i++ {
			out = fmt.Appendf(out, "%08d ", i)
		}
		printed = append(printed, out...)
		done := make(chan error, 1)
		go func() {
			for i, n := 0, 1; len(out) > 0; i, n = i+1, n*3%4093+1 {
				n = min(n, len(out))
				if _, err := pw.Write(out[:n]); err != nil {
					done <- err
					return
				}
				out = out[n:]
			}
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the node was held up printing: a stalled client blocked it")
		}
	}
	waitLive := func() {
		deadline := time.Now().Add(60 * time.Second)
		for !bytes.Equal(liveGot(), printed) {
			if time.Now().After(deadline) {
				t.Fatalf("the live client got %d bytes, not the %d printed in order", len(liveGot()), len(printed))
			}
			time.Sleep(time.Millisecond)
		}
	}
	// print prints size bytes no faster than the live client reads (a
	// client further behind than the backlog is dropped, and this one
	// must not be), pausing between pieces of 128 KiB.
	print := func(size int, pause time.Duration) {
		for ; size > 0; size -= 128 << 10 {
			write(min(size, 128<<10))
			waitLive()
			time.Sleep(pause)
		}
	}

	print(512<<10, 0) // half the backlog a client may have
	if _, err := live.Write([]byte("typed\r")); err != nil {
		t.Fatal(err)
	}
	waitLive()
	for deadline := time.Now().Add(30 * time.Second); !bytes.Contains([]byte(typed.String()), []byte("typed\r")); {
		if time.Now().After(deadline) {
			t.Fatalf("the node got %q, not what the live client typed", typed.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stalled client reads again: every byte, in order.
	first := make([]byte, len(printed))
	stalled.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(stalled, first); err != nil {
		t.Fatalf("the stalled client: %v", err)
	}
	if !bytes.Equal(first, printed) {
		t.Fatal("the stalled client got other bytes than the node printed")
	}
	// Stalled again, for four times the backlog, and given up on after
	// 10 ms without reading: it is cut off, by the write that times out
	// or by the backlog (which fills in 160 ms at this pace), whichever
	// comes first: TestAConsoleClientThatReadsNothingIsCutOffWhenItsWriteTimesOut
	// shows the timeout alone. What it gets is what was printed, in
	// order, with no gap.
	s.s.mu.Lock()
	for c := range s.s.clients {
		if c.conn.RemoteAddr().String() == stalled.LocalAddr().String() {
			c.stall = 10 * time.Millisecond
		}
	}
	s.s.mu.Unlock()
	from := len(printed)
	print(4<<20, 20*time.Millisecond)
	waitLive()
	var rest []byte
	buf := make([]byte, 64<<10)
	for len(rest) < len(printed)-from {
		stalled.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := stalled.Read(buf)
		rest = append(rest, buf[:n]...)
		if err != nil {
			if err == io.EOF {
				break // cut off
			}
			t.Fatalf("the stalled client, after %d bytes: %v", len(rest), err)
		}
	}
	if len(rest) == len(printed)-from {
		t.Fatal("the stalled client was never cut off")
	}
	if !bytes.HasPrefix(printed[from:], rest) {
		t.Fatalf("the stalled client's %d bytes are not the start of what was printed", len(rest))
	}
	t.Logf("the stalled client got %d of %d bytes", len(rest), len(printed)-from)
	select {
	case err := <-liveDone:
		t.Fatalf("the live client was disconnected: %v", err)
	default:
	}
}

// A client that reads nothing is cut off once a write to it has waited
// its stall for it to read, though it is far from the backlog: the node
// prints less than clientBacklog in all, so only the write's timeout can
// cut it off. Its stall is 10 ms, and it is cut off before clientStall:
// by its own stall, not the console's default. What it got is the start of
// what was printed.
func TestAConsoleClientThatReadsNothingIsCutOffWhenItsWriteTimesOut(t *testing.T) {
	pw, term, ln := pipedConsole(t, io.Discard)
	s := ServeConsole(ln, term, ConsoleOptions{})
	defer s.Close()
	defer pw.Close() // first: Close waits for the terminal's reader
	// A small receive buffer, set before connecting so that the window the
	// client offers is small from the start: the kernel holds little of
	// the output (not so small that the kernel's window updates wait for
	// its persist timer when the client reads at last).
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := dialer.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hello := make([]byte, len(greeting))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(conn, hello); err != nil { // registered
		t.Fatal(err)
	}
	// The console's end of the connection gets a small send buffer too,
	// and the client its stall.
	const stall = 10 * time.Millisecond
	var client *consoleClient
	s.s.mu.Lock()
	for c := range s.s.clients { // the only one
		c.conn.(*net.TCPConn).SetWriteBuffer(64 << 10)
		c.stall, client = stall, c
	}
	s.s.mu.Unlock()

	// The node prints 960 KiB, numbered, far more than the kernel's
	// buffers hold and less than the backlog.
	var printed []byte
	for i := 0; len(printed) < clientBacklog-64<<10; i++ {
		printed = fmt.Appendf(printed, "%08d ", i)
	}
	start := time.Now()
	wrote := make(chan error, 1)
	go func() {
		_, err := pw.Write(printed) // read by the console before it returns
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the node was held up printing: the client that reads nothing blocked it")
	}
	for {
		s.s.mu.Lock()
		_, in := s.s.clients[client]
		s.s.mu.Unlock()
		if !in {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("the client that reads nothing was not cut off within 60 s")
		}
		time.Sleep(time.Millisecond)
	}
	// The default's write waits clientStall from its start, after start:
	// only a machine stalled for seconds delays the right cut this long.
	if took := time.Since(start); took >= clientStall {
		t.Fatalf("cut off %v after the output: by the console's default stall (%v), not the client's (%v)", took, clientStall, stall)
	}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the client cut off, after %d bytes: %v", len(got), err)
	}
	if len(got) >= len(printed) || !bytes.HasPrefix(printed, got) {
		t.Fatalf("the client cut off got %d bytes, want fewer than the %d printed and the start of them", len(got), len(printed))
	}
	t.Logf("the client got %d of %d bytes", len(got), len(printed))
}

// A new client is replayed the console's last output, exactly: the
// window of recent output moves through its buffer as the node prints.
func TestANewConsoleClientIsReplayedTheLastOutput(t *testing.T) {
	pw, term, ln := pipedConsole(t, io.Discard)
	const replay = 100
	s := serveConsoleWith(ln, term, nil, ConsoleOptions{Replay: replay})
	defer s.Close()
	defer pw.Close()
	var printed []byte
	for i, n := 0, 1; len(printed) < 20*replay; i, n = i+1, n*7%(2*replay)+1 {
		out := []byte(strings.Repeat(string(rune('a'+i%26)), n))
		if _, err := pw.Write(out); err != nil { // read by the console before it returns
			t.Fatal(err)
		}
		printed = append(printed, out...)
		if i%5 != 0 {
			continue
		}
		want := printed[max(0, len(printed)-replay):]
		s.mu.Lock() // the pipe's write returns before the reader holds the lock
		got := bytes.Clone(s.recent)
		s.mu.Unlock()
		if !bytes.Equal(got, want) && len(got) != len(printed) {
			// the last read may not be in yet: wait for it
			for deadline := time.Now().Add(10 * time.Second); !bytes.Equal(got, want); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("after %d bytes, the replay is %q, want %q", len(printed), got, want)
				}
				s.mu.Lock()
				got = bytes.Clone(s.recent)
				s.mu.Unlock()
			}
		}
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		hello := make([]byte, len(greeting)+len(want))
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadFull(conn, hello)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hello[:len(greeting)], greeting) || !bytes.Equal(hello[len(greeting):], want) {
			t.Fatalf("after %d bytes, a new client got %q, want the greeting and %q", len(printed), hello, want)
		}
	}
}

// pipedConsole is a console's terminal, read from a pipe the test writes
// as the node would print (pw) and writing what clients type to typed,
// and a loopback listener for its clients.
func pipedConsole(tb testing.TB, typed io.Writer) (*io.PipeWriter, io.ReadWriter, net.Listener) {
	tb.Helper()
	pr, pw := io.Pipe()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return pw, struct {
		io.Reader
		io.Writer
	}{pr, typed}, ln
}
