package compute

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/labtap/labtap/proto"
)

// callErrors are real errors of calls that got no reply: one whose
// connection was refused (it never reached the agent), one whose
// connection the agent dropped after reading the request (it may have
// been done), and one no retry mends.
func callErrors(t *testing.T) (refused, dropped, badScheme error) {
	t.Helper()
	addr, _ := refusingPort(t)
	closed := "http://" + addr
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hangUp.Close)
	post := func(url string) error {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url, nil)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("POST %s answered %s", url, resp.Status)
		}
		return err
	}
	return post(closed + "/x"), post(hangUp.URL + "/x"), post("ftp://127.0.0.1/x")
}

// The retry policy: an idempotent call is retried when it could not
// connect, lost its connection or was told to come back (502, 503, 504,
// 429); a POST only when its connection was never made.
func TestOnlyCallsSafeToSendAgainAreRetried(t *testing.T) {
	refused, dropped, badScheme := callErrors(t)
	var op *net.OpError
	if !errors.As(refused, &op) || op.Op != "dial" {
		t.Fatalf("a refused connection is %#v, not a dial error", refused)
	}
	tests := []struct {
		what               string
		status             int // 0: err, no reply
		err                error
		idempotent, others bool // retried when the method is GET/PUT/DELETE/HEAD, or POST
	}{
		{"connection refused", 0, refused, true, true},
		{"connection dropped after the request", 0, dropped, true, false},
		{"unsupported scheme", 0, badScheme, false, false},
		{"200", 200, nil, false, false},
		{"204", 204, nil, false, false},
		{"400", 400, nil, false, false},
		{"404", 404, nil, false, false},
		{"409", 409, nil, false, false},
		{"429", 429, nil, true, false},
		{"500", 500, nil, false, false},
		{"501", 501, nil, false, false},
		{"502", 502, nil, true, false},
		{"503", 503, nil, true, false},
		{"504", 504, nil, true, false},
	}
	for _, tt := range tests {
		var resp *http.Response
		if tt.err == nil {
			resp = &http.Response{StatusCode: tt.status}
		}
		for _, method := range []string{"GET", "HEAD", "PUT", "DELETE", "POST", "PATCH"} {
			want := tt.others
			if isIdempotent(method) {
				want = tt.idempotent
			}
			if got := retryable(isIdempotent(method), resp, tt.err); got != want {
				t.Errorf("%s, %s: retried %v, want %v", method, tt.what, got, want)
			}
		}
	}
}

// A POST the agent answered is never sent again, whatever the answer: it
// may have been done (a resize_disk retried 4 times grew the disk 4 times).
func TestAPOSTThatReachedTheAgentIsSentOnce(t *testing.T) {
	for _, status := range []int{500, 502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var calls atomic.Int32
			agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 { // the first time only; a retry would succeed
					w.WriteHeader(status)
					io.WriteString(w, `{"code":"internal","message":"resize failed"}`)
					return
				}
				w.WriteHeader(204)
			}))
			t.Cleanup(agent.Close)
			c := NewClient(ClientConfig{Retries: 3, RetryWait: time.Millisecond, Timeout: 5 * time.Second})
			err := c.call(t.Context(), target{id: "c1", url: agent.URL}, "POST",
				proto.ResizeDiskPath("p", "n"), proto.ResizeDisk{DriveName: "hda", Extend: 10}, nil)
			if err == nil {
				t.Fatal("a failed POST was taken for success")
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("the POST was sent %d times, want 1", n)
			}
		})
	}
}

// A POST whose connection was refused never reached the agent: it is sent
// again, and an agent that has come up meanwhile does it once.
func TestAPOSTThatNeverConnectedIsSentAgain(t *testing.T) {
	addr, listen := refusingPort(t) // refused until the agent comes up, at the first retry
	var calls atomic.Int32
	agent := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(204)
	})}
	t.Cleanup(func() { agent.Close() })
	c := NewClient(ClientConfig{Retries: 1, RetryWait: time.Millisecond, Timeout: 5 * time.Second})
	errs := recordErrors(c.post)
	c.post.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
		if attempt == 1 { // before the retry: the agent comes up
			if ln := listen(); ln != nil {
				go agent.Serve(ln)
			}
		}
	}
	err := c.call(t.Context(), target{id: "c1", url: "http://" + addr}, "POST", proto.ConsoleResetPath("p", "n"), nil, nil)
	if got := errs(); len(got) == 0 || !errors.Is(got[0], syscall.ECONNREFUSED) {
		t.Fatalf("the first attempt ended with %v, want a refused connection", got)
	}
	if err != nil || calls.Load() != 1 {
		t.Fatalf("POST after a refused connection: %v, %d calls, want done once", err, calls.Load())
	}
}
