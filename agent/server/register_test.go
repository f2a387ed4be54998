package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeController records registration calls and answers them from a script.
type fakeController struct {
	mu     sync.Mutex
	calls  []string
	bodies []map[string]any
	answer func(n int, r *http.Request) (int, string)
}

func (f *fakeController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	user, pw, _ := r.BasicAuth()
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+user+":"+pw)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	status, reply := f.answer(n, r)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(reply))
}

func TestRegisterRetriesUntilTheControllerAnswersAndSendsCredentials(t *testing.T) {
	f := &fakeController{answer: func(n int, r *http.Request) (int, string) {
		if n < 2 {
			return 503, `{"message":"starting","status":503}`
		}
		return 201, `{"compute_id":"a1","host":"10.0.0.2","port":3081}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://admin:pw@", 1)
	err := Register(t.Context(), Registration{Controller: u, ComputeID: "a1", Name: "a1", Host: "10.0.0.2", Port: 3081})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 || f.calls[2] != "POST /v2/computes admin:pw" {
		t.Fatalf("calls %q", f.calls)
	}
	b := f.bodies[2]
	if b["compute_id"] != "a1" || b["host"] != "10.0.0.2" || b["port"] != float64(3081) || b["protocol"] != "http" {
		t.Fatalf("body %v", b)
	}
}

// inMemory carries requests straight to a handler, so that a synctest
// bubble, whose clock stands still while anything waits on a network,
// can hold the whole exchange.
type inMemory struct{ h http.Handler }

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// Retries double from 250 ms up to 10 s apart, each jittered by up to
// half its length (agents restarted together do not call together).
func TestRegisterBacksOffDoublingUpTo10sWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		f := &fakeController{answer: func(n int, r *http.Request) (int, string) {
			at = append(at, time.Since(start))
			if n < 8 {
				return 503, `{"message":"starting","status":503}`
			}
			return 201, `{"compute_id":"a1","host":"h","port":1}`
		}}
		err := Register(t.Context(), Registration{Controller: "http://ctl:3080", ComputeID: "a1", Host: "h", Port: 1, Transport: inMemory{f}})
		if err != nil {
			t.Fatal(err)
		}
		ms := time.Millisecond
		nominal := []time.Duration{250 * ms, 500 * ms, 1000 * ms, 2000 * ms, 4000 * ms, 8000 * ms, 10000 * ms, 10000 * ms}
		if len(at) != len(nominal)+1 || at[0] != 0 {
			t.Fatalf("attempts at %v, want %d starting at 0", at, len(nominal)+1)
		}
		for i, n := range nominal {
			if gap := at[i+1] - at[i]; gap < n/2 || gap > n*3/2 {
				t.Errorf("gap %d is %v, want %v ± 50%% (attempts at %v)", i+1, gap, n, at)
			}
		}
	})
}

func TestRegisterUpdatesTheAddressOfAnAgentThatMoved(t *testing.T) {
	f := &fakeController{answer: func(n int, r *http.Request) (int, string) {
		if r.Method == "POST" { // known from before, elsewhere: returned unchanged
			return 201, `{"compute_id":"a1","host":"10.0.0.9","port":4000}`
		}
		return 200, `{"compute_id":"a1","host":"10.0.0.2","port":3081}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if err := Register(t.Context(), Registration{Controller: srv.URL, ComputeID: "a1", Host: "10.0.0.2", Port: 3081}); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || f.calls[1] != "PUT /v2/computes/a1 :" || f.bodies[1]["host"] != "10.0.0.2" || f.bodies[1]["port"] != float64(3081) {
		t.Fatalf("calls %q, bodies %v", f.calls, f.bodies)
	}
}

func TestRegisterGivesUpAtOnceWhenRefused(t *testing.T) {
	f := &fakeController{answer: func(int, *http.Request) (int, string) {
		return 401, `{"message":"Unauthorized","status":401}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	err := Register(t.Context(), Registration{Controller: srv.URL, ComputeID: "a1", Host: "h", Port: 1})
	if err == nil || !strings.Contains(err.Error(), "401") || len(f.calls) != 1 {
		t.Fatalf("err %v after %d calls", err, len(f.calls))
	}
	if err := Register(t.Context(), Registration{Controller: "ftp://x", ComputeID: "a1"}); err == nil {
		t.Fatal("a controller URL that is not http was accepted")
	}
}

func TestRegisterStopsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		ctl := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(502)
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		// A controller that answers 502 may come back: Register retries
		// until its context ends (the first retry comes within 375 ms,
		// jitter included), and says so.
		err := Register(ctx, Registration{Controller: "http://ctl:3080", ComputeID: "a1", Host: "h", Port: 1, Transport: inMemory{ctl}})
		if !errors.Is(err, context.DeadlineExceeded) || calls.Load() < 2 {
			t.Fatalf("Register returned %v after %d calls, want the context's end after 2 or more", err, calls.Load())
		}
	})
}
