package compute

import (
	"context"
	"io"
	"sync"
)

// openStreams counts the capture streams open from each compute, so that
// shutdown can wait for those of an agent that is ending its captures.
type openStreams struct {
	mu    sync.Mutex // guards n and idle
	n     map[string]int
	idle  map[string]chan struct{} // closed when n[id] falls to 0
	ready sync.Once
}

func (o *openStreams) init() {
	o.ready.Do(func() {
		o.n = map[string]int{}
		o.idle = map[string]chan struct{}{}
	})
}

// track counts body as open until it is closed.
func (o *openStreams) track(id string, body io.ReadCloser) io.ReadCloser {
	o.init()
	o.mu.Lock()
	o.n[id]++
	o.mu.Unlock()
	return &trackedBody{ReadCloser: body, done: func() { o.closed(id) }}
}

func (o *openStreams) closed(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[id]--
	if o.n[id] == 0 {
		if ch, ok := o.idle[id]; ok {
			close(ch)
			delete(o.idle, id)
		}
	}
}

// wait returns when no stream from id is open, or ctx is done.
func (o *openStreams) wait(ctx context.Context, id string) error {
	o.init()
	o.mu.Lock()
	if o.n[id] == 0 {
		o.mu.Unlock()
		return nil
	}
	ch, ok := o.idle[id]
	if !ok {
		ch = make(chan struct{})
		o.idle[id] = ch
	}
	o.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// trackedBody reports its Close once.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// StreamsEnded returns once every capture stream opened from computeID
// has been closed (read to its end, or given up), or when ctx is done. At
// shutdown, the streams of the local agent, which closes its captures,
// end by themselves; this tells when they have.
func (a *Agents) StreamsEnded(ctx context.Context, computeID string) error {
	return a.streams.wait(ctx, computeID)
}
