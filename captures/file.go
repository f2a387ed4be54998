package captures

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// File is a capture being written to a file on disk. Frames go in through
// WritePacket, from any number of goroutines; readers follow the file as it
// grows with Follow. The file is a valid capture at every moment: its header
// is on disk when Create returns, and it only ever holds whole records.
//
// A File ends when Close is called or when a write fails (for example, the
// disk is full). A failed write never leaves half a record behind: the file
// is cut back to its last whole record, and Err says why it ended.
type File struct {
	path string
	f    fileHandle
	w    *Writer

	updated signal        // notified after each record
	done    chan struct{} // closed when the capture has ended
	endOnce sync.Once
	endErr  error // set before done is closed; read after
	dropped atomic.Uint64
}

// fileHandle is what a File needs of its *os.File; tests swap in one that
// fails like a full disk.
type fileHandle interface {
	io.Writer
	Truncate(size int64) error
	Close() error
}

// Create creates (or truncates) the capture file name in dir and writes its
// header. Only plain names pass ValidFileName, and the file is opened through
// dir, so it can never be outside the directory, whatever name holds.
func Create(dir *os.Root, name string, opts Options) (*File, error) {
	if !ValidFileName(name) {
		return nil, fmt.Errorf("captures: invalid file name %q", name)
	}
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("captures: create %s: %w", name, err)
	}
	path := filepath.Join(dir.Name(), name)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return newFile(path, f, opts)
}

func newFile(path string, f fileHandle, opts Options) (*File, error) {
	w, err := NewWriter(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{path: path, f: f, w: w, done: make(chan struct{})}, nil
}

// Path returns the file's absolute path.
func (c *File) Path() string { return c.path }

// WritePacket appends frame as one record. It does not keep frame. It reports
// nothing: when a write fails the capture ends by itself (Done is closed, Err
// says why) and later frames are counted as dropped.
func (c *File) WritePacket(dir Direction, frame []byte) {
	err := c.w.WritePacket(dir, frame)
	if err == nil {
		c.updated.notify()
		return
	}
	if errors.Is(err, ErrClosed) {
		return // the capture was stopped; the frame simply arrived too late
	}
	c.dropped.Add(1)
	c.end(err)
}

// Stats returns what the capture holds: records written, file size in bytes,
// and frames dropped because a write failed.
func (c *File) Stats() (frames uint64, size int64, dropped uint64) {
	frames, size = c.w.Stats()
	return frames, size, c.dropped.Load()
}

// Done is closed when the capture has ended, by Close or by a failed write.
func (c *File) Done() <-chan struct{} { return c.done }

// Err returns why the capture ended by itself, nil while it runs or when it
// was closed.
func (c *File) Err() error {
	select {
	case <-c.done:
		return c.endErr
	default:
		return nil
	}
}

// Close ends the capture and closes the file, which keeps every record
// written. It is safe to call more than once and concurrently with
// WritePacket.
func (c *File) Close() error {
	c.end(nil)
	return nil
}

// end stops the writer, cuts the file back to its last whole record, closes
// it and wakes the readers. Only the first call has an effect.
func (c *File) end(cause error) {
	c.endOnce.Do(func() {
		c.w.Close()
		_, size := c.w.Stats()
		if cause != nil {
			// A failed write may have left part of a record: drop it so the
			// file stays valid.
			if err := c.f.Truncate(size); err != nil {
				cause = errors.Join(cause, fmt.Errorf("captures: truncate %s: %w", c.path, err))
			}
		}
		if err := c.f.Close(); err != nil && cause == nil {
			cause = fmt.Errorf("captures: close %s: %w", c.path, err)
		}
		c.endErr = cause
		close(c.done)
		c.updated.notify()
	})
}

// pollInterval bounds how long a follower can miss a wake-up: it re-reads
// the file at least this often even without a notification.
const pollInterval = 100 * time.Millisecond

// Follow writes the capture file to w from its first byte, then every record
// appended to it, calling flush after each write, until the capture ends
// (then it writes what is left and returns nil) or ctx is done (it returns
// ctx's error). w only ever receives whole records. Each call reads through
// its own file handle, so followers never wait for one another, and a slow
// follower never slows the writer.
func (c *File) Follow(ctx context.Context, w io.Writer, flush func() error) error {
	rf, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("captures: follow %s: %w", c.path, err)
	}
	defer rf.Close()
	buf := make([]byte, 64<<10)
	var off int64
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		wake := c.updated.wait() // taken before reading, so no record can slip between
		ended := false
		select {
		case <-c.done:
			ended = true
		default:
		}
		// Read only up to the last whole record the writer has committed.
		_, limit := c.w.Stats()
		for off < limit {
			n, err := rf.ReadAt(buf[:min(int64(len(buf)), limit-off)], off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				if flush != nil {
					if ferr := flush(); ferr != nil {
						return ferr
					}
				}
				off += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("captures: follow %s: %w", c.path, err)
			}
			if errors.Is(err, io.EOF) {
				break // truncated under us; the limit will catch up
			}
		}
		if ended {
			return nil
		}
		select {
		case <-wake:
		case <-c.done:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal broadcasts "something changed" to whoever waits at that moment.
// It costs one uncontended lock when nobody waits.
type signal struct {
	mu sync.Mutex
	ch chan struct{} // nil when nobody waits
}

// wait returns a channel closed by the next notify.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
