package compute

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/labtap/labtap/proto"
)

// recordErrors makes rc note the error each attempt ended with, before its
// retry policy decides, so a test can tell which failure it exercised.
func recordErrors(rc *retryablehttp.Client) func() []error {
	var mu sync.Mutex
	var errs []error
	check := rc.CheckRetry
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return check(ctx, resp, err)
	}
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

// fullListener is a TCP listener on 127.0.0.1 whose accept queue is full
// (listen backlog 0, one connection queued and never accepted): the kernel
// drops every further SYN, so a dial to it times out without its
// connection ever being made. Serving on it (accept) frees the queue.
func fullListener(t *testing.T) net.Listener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "backlog-0")
	defer f.Close() // FileListener dups it
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// Queue connections until one cannot be made: then the queue is full.
	for range 16 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("filling the accept queue: %v", err)
			}
			return ln
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("this kernel never fills a backlog-0 accept queue: no dial to time out")
	return nil
}

// refusingPort is a TCP port of 127.0.0.1 that refuses connections (its
// socket is bound, not listening) and stays this test's: a listener closed
// to free its port could see the port given to another socket of the
// machine before the test listens on it again. listen makes it accept.
func refusingPort(t *testing.T) (addr string, listen func() net.Listener) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "refusing")
	t.Cleanup(func() { f.Close() })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return addr, func() net.Listener {
		if err := syscall.Listen(fd, 128); err != nil {
			t.Error(err)
			return nil
		}
		ln, err := net.FileListener(f)
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
}

// A POST whose dial timed out (the agent's host dropped its SYN: no
// connection, so not a byte of it left) is sent again, and done once by
// the agent that answers the retry.
func TestAPOSTWhoseDialTimedOutIsSentAgain(t *testing.T) {
	t.Parallel() // it waits out a dial or call timeout
	ln := fullListener(t)
	var calls atomic.Int32
	agent := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(204)
	})}
	t.Cleanup(func() { agent.Close() })
	c := NewClient(ClientConfig{Retries: 1, RetryWait: time.Millisecond, Timeout: time.Minute})
	// A dial that cannot connect fails after 300 ms rather than the
	// pooled transport's 30 s; nothing but a dropped SYN can end it.
	c.post.HTTPClient.Transport.(*http.Transport).DialContext = (&net.Dialer{Timeout: 300 * time.Millisecond}).DialContext
	errs := recordErrors(c.post)
	c.post.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
		if attempt == 1 {
			// Before the retry the agent comes up: the connection queued
			// is taken off the queue here, not in Serve's goroutine, so
			// the retry's SYN finds room whenever that goroutine runs.
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
			go agent.Serve(ln)
		}
	}
	err := c.call(t.Context(), target{id: "c1", url: "http://" + ln.Addr().String()}, "POST", proto.ConsoleResetPath("p", "n"), nil, nil)
	got := errs()
	var op *net.OpError
	if len(got) == 0 || !errors.As(got[0], &op) || op.Op != "dial" || !op.Timeout() {
		t.Fatalf("the first attempt ended with %v, want a dial timeout", got)
	}
	if err != nil || calls.Load() != 1 {
		t.Fatalf("POST after a dial timeout: %v, %d calls, want done once", err, calls.Load())
	}
}

// A call whose connection was made may have reached the agent, whatever
// then went wrong: a POST is never sent again (it may have been done),
// an idempotent call is. Each agent here breaks the connection its own
// way and counts the connections it accepted.
func TestAPOSTWhoseConnectionWasMadeIsNotSentAgain(t *testing.T) {
	t.Parallel()
	const retries = 2
	breaks := []struct {
		what string
		// serve handles one accepted connection and closes it.
		serve func(c net.Conn)
	}{
		// Closed at once, before reading: the request may be in the
		// agent's socket, or may not; from here the two look alike.
		{"closed before reading", func(c net.Conn) { c.Close() }},
		// The whole request read, then a reset (SO_LINGER 0).
		{"reset after the request", func(c net.Conn) {
			readRequest(c)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}},
		// The whole request read, then closed without a reply.
		{"closed after the request", func(c net.Conn) {
			readRequest(c)
			c.Close()
		}},
	}
	for _, b := range breaks {
		for _, method := range []string{"POST", "PUT"} {
			t.Run(b.what+"/"+method, func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
				var accepted atomic.Int32
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						accepted.Add(1)
						go b.serve(c)
					}
				}()
				c := NewClient(ClientConfig{Retries: retries, RetryWait: time.Millisecond, Timeout: time.Minute})
				rc := c.post
				if isIdempotent(method) {
					rc = c.idempotent
				}
				errs := recordErrors(rc)
				err = c.call(t.Context(), target{id: "c1", url: "http://" + ln.Addr().String()}, method,
					proto.ResizeDiskPath("p", "n"), proto.ResizeDisk{DriveName: "hda", Extend: 10}, nil)
				if err == nil {
					t.Fatal("a call the agent hung up on was taken for success")
				}
				for _, e := range errs() {
					var op *net.OpError
					if errors.As(e, &op) && op.Op == "dial" {
						t.Fatalf("an attempt could not connect (%v): the test exercised nothing", e)
					}
				}
				want := int32(1)
				if isIdempotent(method) {
					want = 1 + retries
				}
				if n := accepted.Load(); n != want {
					t.Fatalf("%s sent on %d connections, want %d (errors %v)", method, n, want, errs())
				}
			})
		}
	}
}

// readRequest reads an HTTP request from c, body included.
func readRequest(c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err == nil {
		io.Copy(io.Discard, req.Body)
	}
}

// A dial that timed out is a compute that cannot be reached, not a call
// that ran out of its time: net's timeout errors match
// context.DeadlineExceeded, which once read as "Timeout error ... after
// 1m0s" for a call that had waited 300 ms.
func TestADialTimeoutIsACannotConnectError(t *testing.T) {
	t.Parallel() // it waits out a dial or call timeout
	ln := fullListener(t)
	c := NewClient(ClientConfig{Retries: 0, Timeout: time.Minute})
	c.post.HTTPClient.Transport.(*http.Transport).DialContext = (&net.Dialer{Timeout: 300 * time.Millisecond}).DialContext
	err := c.call(t.Context(), target{id: "c1", url: "http://" + ln.Addr().String()}, "POST", proto.ConsoleResetPath("p", "n"), nil, nil)
	want := "Cannot connect to compute 'c1' with request POST " + proto.ConsoleResetPath("p", "n")
	if err == nil || err.Error() != want {
		t.Fatalf("a POST whose dial timed out: %v, want %q", err, want)
	}
}

// A call the agent does not answer within the client's Timeout says so.
func TestACallPastItsTimeoutIsATimeoutError(t *testing.T) {
	t.Parallel() // it waits out a dial or call timeout
	release := make(chan struct{})
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select { // never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(agent.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handler
	c := NewClient(ClientConfig{Retries: 0, Timeout: 200 * time.Millisecond})
	err := c.call(t.Context(), target{id: "c1", url: agent.URL}, "POST", proto.ConsoleResetPath("p", "n"), nil, nil)
	want := "Timeout error for POST call to " + agent.URL + proto.ConsoleResetPath("p", "n") + " after 200ms"
	if err == nil || err.Error() != want {
		t.Fatalf("a POST past its timeout: %v, want %q", err, want)
	}
}
