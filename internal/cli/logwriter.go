package cli

import (
	"io"
	"os"
	"runtime"
	"sync"
)

// logOut is where every Logger writes: stderr, behind the callers.
var logOut = newBehindWriter(os.Stderr, 1<<20)

// behindWriter writes log lines to w behind their callers: Write copies
// the line into a buffer and returns, and a goroutine writes whatever has
// gathered with one Write of w. Under load (the API's access log: a line
// per request, thousands a second) the lines of requests answered
// together share one write(2) instead of costing one each, and no request
// waits for stderr while it holds the logger's lock. A line is written one
// goroutine hand-off after its Write, in the order of the Writes; Flush
// waits until every line so far is out (Exit calls it). When max bytes
// wait, Write waits for w, as it would on a full pipe. A crash can lose the
// lines not yet written: a few microseconds' worth.
type behindWriter struct {
	w   io.Writer
	max int

	mu    sync.Mutex
	cond  *sync.Cond // broadcast after each write of w
	buf   []byte     // lines waiting
	spare []byte     // the buffer being written, given back
	busy  bool       // a goroutine writes buf; set whenever buf is not empty
}

func newBehindWriter(w io.Writer, max int) *behindWriter {
	b := &behindWriter{w: w, max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Write queues p (whole log lines) and returns; it never fails.
func (b *behindWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.buf) > 0 && len(b.buf)+len(p) > b.max {
		b.cond.Wait()
	}
	b.buf = append(b.buf, p...)
	if !b.busy {
		b.busy = true
		go b.drain()
	}
	b.mu.Unlock()
	return len(p), nil
}

// drain writes the lines that gather until none is left.
func (b *behindWriter) drain() {
	// Let the goroutines that run now log first: under load, their lines
	// join this write (with nothing else to run, this returns at once).
	runtime.Gosched()
	b.mu.Lock()
	for len(b.buf) > 0 {
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		b.w.Write(out) // a log line that cannot be written has nowhere else to go
		b.mu.Lock()
		b.spare = out
		b.cond.Broadcast()
	}
	b.busy = false
	b.cond.Broadcast()
	b.mu.Unlock()
}

// Flush returns once every line written before it is out.
func (b *behindWriter) Flush() {
	b.mu.Lock()
	for b.busy {
		b.cond.Wait()
	}
	b.mu.Unlock()
}
