package cli

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// gatedWriter records each Write and holds the first one until released.
type gatedWriter struct {
	entered chan struct{} // closed when the first Write begins
	release chan struct{}
	mu      sync.Mutex
	writes  []string
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	first := len(g.writes) == 0
	g.writes = append(g.writes, string(p))
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return len(p), nil
}

// Lines logged while stderr is slow wait in order and go out together,
// and a Write does not wait for stderr.
func TestLogLinesQueueBehindASlowWriteAndLeaveTogether(t *testing.T) {
	g := &gatedWriter{entered: make(chan struct{}), release: make(chan struct{})}
	b := newBehindWriter(g, 1<<20)
	b.Write([]byte("a\n"))
	<-g.entered // "a" is being written, and stays so
	line := []byte("b\n")
	b.Write(line)
	line[0] = 'x' // the caller may reuse its buffer (slog does)
	b.Write([]byte("c\n"))
	close(g.release)
	b.Flush()
	if want := []string{"a\n", "b\nc\n"}; !slices.Equal(g.writes, want) {
		t.Fatalf("writes %q, want %q", g.writes, want)
	}
	b.Write([]byte("d\n"))
	b.Flush()
	if g.writes[len(g.writes)-1] != "d\n" {
		t.Fatalf("after Flush: %q", g.writes)
	}
}

// Past max queued bytes, Write waits for the writer instead of holding
// ever more.
func TestALogWriteWaitsWhenTheQueueIsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedWriter{entered: make(chan struct{}), release: make(chan struct{})}
		b := newBehindWriter(g, 4)
		b.Write([]byte("a\n"))
		<-g.entered
		b.Write([]byte("bb\n")) // 3 of 4 bytes queued
		done := make(chan struct{})
		go func() {
			b.Write([]byte("cc\n"))
			close(done)
		}()
		synctest.Wait() // every goroutine but this one is blocked
		select {
		case <-done:
			t.Fatalf("Write returned with %q queued, over 4 bytes", b.buf)
		default:
		}
		close(g.release)
		<-done
		b.Flush()
		if want := []string{"a\n", "bb\n", "cc\n"}; !slices.Equal(g.writes, want) {
			t.Fatalf("writes %q, want %q", g.writes, want)
		}
	})
}
