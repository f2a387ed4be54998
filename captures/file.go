package captures

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a File's queue.
const (
	// DefaultQueueBytes bounds the records a File holds in memory while the
	// disk catches up: 64 MiB is 0.15 s of full-size frames at the fastest
	// rate a relay reaches here, and several seconds of usual lab traffic.
	DefaultQueueBytes = 64 << 20
	// DefaultFlushInterval is how long a record may wait before it is
	// written out for live readers: short enough to look instant in
	// Wireshark, long enough to write tens of kilobytes per system call.
	DefaultFlushInterval = 10 * time.Millisecond
)

// chunkSize is the unit of a File's queue; it holds the largest record.
const chunkSize = 1 << 20

// File is a capture being written to a file on disk. Frames go in through
// WritePackets, from any number of goroutines; readers follow the file as it
// grows with Follow. The file is a valid capture at every moment: its header
// is on disk when Create returns, and it only ever holds whole records.
//
// WritePackets never touches the disk and never waits for it: it stamps the
// frames, formats their records into an in-memory queue and returns, so a
// capture costs the forwarding path one copy of each frame. A writer
// goroutine writes the queue out in large writes, at most FlushInterval
// after a record was queued, and then tells followers. When the disk cannot
// keep up and the queue (QueueBytes) is full, frames are dropped, never
// waited for: a capture never slows the lab. Every dropped frame is counted
// (Stats, and in a pcapng file the interface statistics written at the end),
// so a capture may miss frames under overload but never hides that it did.
//
// A File ends when Close is called, after writing every frame accepted
// before it, or when a write fails (for example, the disk is full). A failed
// write never leaves half a record behind: the file is cut back to its last
// whole record, and Err says why it ended.
type File struct {
	path     string
	f        fileHandle
	enc      *encoder // guarded by mu
	now      func() time.Time
	interval time.Duration
	started  time.Time

	mu      sync.Mutex // guards the queue and the fields below
	cur     *chunk     // being filled
	full    []*chunk   // waiting for the writer, oldest first
	free    []*chunk   // written, for reuse
	nchunks int        // allocated, bounded by maxChunks
	max     int
	state   int // running, closing or failed
	last    time.Time
	spare   []*chunk // the writer's batch slice, reused

	written [2]atomic.Uint64 // records on disk, per direction
	dropped [2]atomic.Uint64 // frames not written, per direction
	size    atomic.Int64     // bytes on disk, all whole records

	kick    chan struct{} // capacity 1: the queue stopped being empty
	urgent  chan struct{} // capacity 1: the queue is filling up
	stop    chan struct{} // closed by Close
	stopped chan struct{} // closed when the writer goroutine has returned

	updated signal        // notified after each write to disk
	done    chan struct{} // closed when the capture has ended
	endErr  error         // set before done is closed; read after
	once    sync.Once
}

const (
	running = iota
	closing
	failed
)

// chunk is a run of whole records, and how many there are per direction.
type chunk struct {
	b       []byte
	records [2]int
}

// fileHandle is what a File needs of its *os.File; tests swap in one that
// fails like a full disk, or is slow.
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
	opts.defaults()
	enc, err := newEncoder(opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Write(enc.header); err != nil {
		f.Close()
		return nil, fmt.Errorf("captures: write file header: %w", err)
	}
	c := &File{
		path:     path,
		f:        f,
		enc:      enc,
		now:      opts.Now,
		interval: opts.FlushInterval,
		max:      max(2, opts.QueueBytes/chunkSize),
		kick:     make(chan struct{}, 1),
		urgent:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.started = c.now()
	c.size.Store(int64(len(enc.header)))
	c.cur = c.newChunkLocked()
	go c.writeLoop() // ended by Close or a failed write
	return c, nil
}

// Path returns the file's absolute path.
func (c *File) Path() string { return c.path }

// newChunkLocked returns a free chunk, or a new one if the queue may grow,
// or nil. c.mu must be held (or c not shared yet).
func (c *File) newChunkLocked() *chunk {
	if k := len(c.free); k > 0 {
		ch := c.free[k-1]
		c.free = c.free[:k-1]
		return ch
	}
	if c.nchunks >= c.max {
		return nil
	}
	c.nchunks++
	return &chunk{b: make([]byte, 0, chunkSize)}
}

// WritePacket appends frame as one record. See WritePackets.
func (c *File) WritePacket(dir Direction, frame []byte) {
	c.WritePackets(dir, [][]byte{frame})
}

// WritePackets queues frames, sent in direction dir, as records stamped
// with the current time (one stamp for the batch, never earlier than the
// previous batch's). It does not keep frames. It reports nothing: frames
// that find the queue full, or come after the capture failed, are counted as
// dropped; frames that come after Close are ignored (they were forwarded
// after the capture stopped).
func (c *File) WritePackets(dir Direction, frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	dir &= 1
	c.mu.Lock()
	if c.state != running {
		if c.state == failed {
			c.dropped[dir].Add(uint64(len(frames)))
		}
		c.mu.Unlock()
		return
	}
	ts := c.now()
	if ts.Before(c.last) {
		ts = c.last // both directions stamp under this lock: time never goes back
	}
	c.last = ts
	wasEmpty := len(c.cur.b) == 0 && len(c.full) == 0
	var dropped uint64
	for _, f := range frames {
		if len(c.cur.b)+maxRecord(len(f)) > chunkSize {
			next := c.newChunkLocked()
			if next == nil {
				dropped++ // the disk is behind and the queue is full
				continue
			}
			c.full = append(c.full, c.cur)
			c.cur = next
		}
		c.cur.b = c.enc.appendRecord(c.cur.b, dir, ts, f)
		c.cur.records[dir]++
	}
	filling := len(c.full) >= c.max/4
	c.mu.Unlock()
	if dropped > 0 {
		c.dropped[dir].Add(dropped)
	}
	if wasEmpty {
		notify(c.kick)
	}
	if filling {
		notify(c.urgent)
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// writeLoop writes the queue to the file: FlushInterval after the queue
// stops being empty (at once when it fills up), until Close, and then once
// more to empty it.
func (c *File) writeLoop() {
	defer close(c.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if c.pendingEmpty() {
			select {
			case <-c.kick:
			case <-c.stop:
				c.finish(nil)
				return
			}
		}
		timer.Reset(c.interval)
		select {
		case <-timer.C:
		case <-c.urgent:
			timer.Stop()
		case <-c.stop:
			timer.Stop()
			c.finish(nil)
			return
		}
		if err := c.writeOut(); err != nil {
			c.finish(err)
			return
		}
	}
}

func (c *File) pendingEmpty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur.b) == 0 && len(c.full) == 0
}

// writeOut writes every queued record to the file, then wakes followers.
func (c *File) writeOut() error {
	c.mu.Lock()
	batch := append(c.spare[:0], c.full...)
	c.full = c.full[:0]
	if len(c.cur.b) > 0 {
		if next := c.newChunkLocked(); next != nil {
			batch = append(batch, c.cur)
			c.cur = next
		}
	}
	c.mu.Unlock()
	var err error
	for i, ch := range batch {
		if err = c.writeChunk(ch); err != nil {
			for _, rest := range batch[i+1:] {
				c.dropChunk(rest)
			}
			break
		}
	}
	c.mu.Lock()
	for _, ch := range batch {
		ch.b, ch.records = ch.b[:0], [2]int{}
		c.free = append(c.free, ch)
	}
	clear(batch)
	c.spare = batch[:0]
	c.mu.Unlock()
	if len(batch) > 0 {
		c.updated.notify()
	}
	return err
}

// writeChunk writes one chunk. When the write fails part way, the whole
// records that made it stay, the rest is cut off the file and counted as
// dropped, and the error is returned.
func (c *File) writeChunk(ch *chunk) error {
	n, err := c.f.Write(ch.b)
	if err == nil && n < len(ch.b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		c.size.Add(int64(len(ch.b)))
		c.written[AtoB].Add(uint64(ch.records[AtoB]))
		c.written[BtoA].Add(uint64(ch.records[BtoA]))
		return nil
	}
	// Keep the whole records that reached the file; the rest is dropped.
	records, size := c.enc.wholeRecords(ch.b[:n])
	c.size.Add(int64(size))
	if c.enc.pcapng {
		kept := [2]int{}
		for off := 0; off < size; off += c.enc.recordLen(ch.b[off:]) {
			kept[recordDir(ch.b[off:])]++
		}
		for d := range 2 {
			c.written[d].Add(uint64(kept[d]))
			c.dropped[d].Add(uint64(ch.records[d] - kept[d]))
		}
	} else { // classic pcap records carry no direction: count them under A to B
		c.written[AtoB].Add(uint64(records))
		c.dropped[AtoB].Add(uint64(ch.records[AtoB] + ch.records[BtoA] - records))
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is said once, below
	}
	end := c.size.Load()
	if terr := c.f.Truncate(end); terr != nil {
		err = errors.Join(err, fmt.Errorf("captures: truncate %s: %w", c.path, terr))
	}
	return fmt.Errorf("captures: write %s: %w", c.path, err)
}

// recordDir returns the direction of the pcapng enhanced packet block at
// the start of b: its interface id.
func recordDir(b []byte) int {
	if len(b) >= 12 && b[8] == 1 {
		return 1
	}
	return 0
}

func (c *File) dropChunk(ch *chunk) {
	c.dropped[AtoB].Add(uint64(ch.records[AtoB]))
	c.dropped[BtoA].Add(uint64(ch.records[BtoA]))
}

// finish ends the capture: after Close (cause nil) it writes what is still
// queued and, for pcapng, the statistics; after a failed write it counts
// what is queued as dropped. Then it closes the file and wakes everyone.
func (c *File) finish(cause error) {
	// Close set the state: nothing more can be queued. A pass may leave the
	// chunk being filled behind when every chunk is in use; the next takes it.
	for cause == nil && !c.pendingEmpty() {
		cause = c.writeOut()
	}
	if cause == nil {
		cause = c.writeStats()
	}
	if cause != nil {
		c.mu.Lock()
		c.state = failed
		for _, ch := range append(c.full, c.cur) {
			c.dropChunk(ch)
			ch.b, ch.records = ch.b[:0], [2]int{}
		}
		c.full = c.full[:0]
		c.mu.Unlock()
	}
	if err := c.f.Close(); err != nil && cause == nil {
		cause = fmt.Errorf("captures: close %s: %w", c.path, err)
	}
	c.endErr = cause
	close(c.done)
	c.updated.notify()
}

// writeStats appends the pcapng interface statistics blocks.
func (c *File) writeStats() error {
	var written, dropped [2]uint64
	for d := range 2 {
		written[d], dropped[d] = c.written[d].Load(), c.dropped[d].Load()
	}
	c.mu.Lock()
	b, err := c.enc.appendStats(nil, c.started, c.now(), written, dropped)
	c.mu.Unlock()
	if err != nil || len(b) == 0 {
		return err
	}
	if _, err := c.f.Write(b); err != nil {
		if terr := c.f.Truncate(c.size.Load()); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("captures: write %s: %w", c.path, err)
	}
	c.size.Add(int64(len(b)))
	return nil
}

// Stats returns what the capture holds: records written, file size in bytes
// (whole records only), and frames dropped because the queue was full or a
// write failed.
func (c *File) Stats() (frames uint64, size int64, dropped uint64) {
	frames = c.written[0].Load() + c.written[1].Load()
	dropped = c.dropped[0].Load() + c.dropped[1].Load()
	return frames, c.size.Load(), dropped
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

// Close ends the capture: it waits until every frame accepted before it is
// in the file, then closes the file, which keeps every record written. It is
// safe to call more than once and concurrently with WritePackets.
func (c *File) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		if c.state == running {
			c.state = closing
		}
		c.mu.Unlock()
		close(c.stop)
	})
	<-c.stopped
	return nil
}

// pollInterval bounds how long a follower can miss a wake-up: it re-reads
// the file at least this often even without a notification.
const pollInterval = 100 * time.Millisecond

// Follow writes the capture file to w from its first byte, then every record
// appended to it, calling flush after each write, until the capture ends
// (then it writes what is left and returns nil) or ctx is done (it returns
// ctx's error). It never reads past the last whole record written, so what
// w has received is whole records each time Follow waits for more (a single
// Write may end inside a record; the next one completes it). Each call reads through
// its own file handle, so followers never wait for one another, and a slow
// follower never slows the writer.
func (c *File) Follow(ctx context.Context, w io.Writer, flush func() error) error {
	rf, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("captures: follow %s: %w", c.path, err)
	}
	defer rf.Close()
	buf := make([]byte, 256<<10)
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
		limit := c.size.Load()
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
