package api

import (
	"context"
	"sync"
	"time"
)

// requestContext is a handler's context (c.UserContext()): it ends at its
// deadline (RequestTimeout after the request began), when the server's
// context ends, or when the request is answered, as a
// context.WithDeadline(server, deadline) cancelled at the answer would.
// It makes that context only when something asks whether it is done (Done,
// Err, Value): most requests (a GET link) never ask, and making one costs a
// timer and a child registered in the server's context, under its lock,
// shared by every request in flight: ~15% of a GET link's handler.
//
// Value makes it too (context.Cause asks Value for the context's cause);
// Deadline does not need it. A context made after the request was answered
// is already done (context.Canceled), as the eager one was by then.
type requestContext struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	ctx    context.Context // nil until Done, Err or Value asks; then the real one
	cancel context.CancelFunc
	ended  bool // the request was answered
}

func newRequestContext(parent context.Context, start time.Time, timeout time.Duration) *requestContext {
	return &requestContext{parent: parent, deadline: start.Add(timeout)}
}

// real returns the real context, made on first use.
func (r *requestContext) real() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithDeadline(r.parent, r.deadline)
		if r.ended {
			r.cancel()
		}
	}
	return r.ctx
}

// end is the request's answer: the context is done from now on.
func (r *requestContext) end() {
	r.mu.Lock()
	r.ended = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (r *requestContext) Deadline() (time.Time, bool) {
	if d, ok := r.parent.Deadline(); ok && d.Before(r.deadline) {
		return d, true
	}
	return r.deadline, true
}

func (r *requestContext) Done() <-chan struct{} { return r.real().Done() }
func (r *requestContext) Err() error            { return r.real().Err() }

func (r *requestContext) Value(key any) any { return r.real().Value(key) }
