package captures

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Defaults of a File's queue.
const (
	// DefaultQueueBytes bounds the records a File holds in memory while the
	// disk catches up: 64 MiB is about 0.1 s of full-size frames at the
	// fastest rate a relay reaches here (720 MB/s of records), and several
	// seconds of usual lab traffic.
	DefaultQueueBytes = 64 << 20
	// DefaultFlushInterval is how often records queued are written out
	// for live readers (a record waits twice that at most): short enough
	// to look instant in Wireshark, long enough that a busy link writes
	// megabytes per system call.
	DefaultFlushInterval = 10 * time.Millisecond
)

// blockSize is the size of a big block, the unit of a busy File's queue and
// of its writes. Records are laid end to end across blocks, the way they
// lie in the file (one may straddle two blocks), and a block of size s
// holds bytes [k·s, (k+1)·s) of the file, so a full block is written in one
// piece at its place. Blocks come from a Pool: a File takes a small one
// (smallBlock) when records come after a quiet spell, and big ones from
// the next 2-MiB boundary of its file on while records keep coming.
//
// 2 MiB: one huge page (see allocBlock), and about 3 ms of full-size frames
// at the fastest rate a relay reaches here, so a busy link writes a few
// hundred times a second.
const blockSize = 2 << 20

// directAlign is what direct writes are aligned to: file offset, length and
// memory. 4 KiB suits disks with 512-byte and with 4-KiB sectors.
const directAlign = 4096

// trimInterval is how long a Pool keeps the memory Files gave back before
// it returns it to the kernel, once no File needs it.
const trimInterval = time.Second

// maxRun bounds the full blocks written with one system call: 16 MiB, as
// many big blocks (or as many small ones as make 16 MiB, at the start of a
// burst). A direct write's CPU time hardly depends on its size (measured
// here, 3 GiB written from a huge page: 0.07–0.08 s of CPU per GiB in 2-MiB
// writes, 0.03–0.05 in 8-MiB ones, 0.02 in 16-MiB ones).
const maxRun = 8

// maxInflight bounds the runs of blocks being written at once. Writes of a
// block took 1.5–2 ms on average here, but one in thousands took up to 260
// ms: the others go on meanwhile, and are taken in file order once it
// completes.
const maxInflight = 8

// File is a capture being written to a file on disk. Frames go in through
// WritePackets, from any number of goroutines; readers follow the file as it
// grows with Follow. The file is a valid capture whenever the File is not
// writing: its header is on disk when Create returns, and Close and a failed
// write leave it ending with a whole record. While records are being
// written, the file's last record may be cut short for a moment (a full
// block is written whole, and a record may straddle two blocks); Follow
// never shows that, and Repair mends a file whose writer was killed.
//
// WritePackets never touches the disk and never waits for it: it stamps the
// frames, formats their records into an in-memory queue and returns, so a
// capture costs the forwarding path one copy of each frame. A writer
// goroutine writes the queue out every FlushInterval (full blocks in as few
// system calls as it can, see writeLoop), so a record is in the file twice
// FlushInterval after it was queued, plus the time the disk takes, and then
// the writer tells followers. When the disk cannot keep up and the queue
// (QueueBytes) is full, frames are dropped, never waited for: a capture
// never slows the lab. Every dropped frame is counted (Stats, and in a
// pcapng file the interface statistics written at the end), so a capture
// may miss frames under overload but never hides that it did.
//
// The queue's memory is lent by a Pool shared by the agent's Files
// (Options.Pool): blocks are taken when records come and given back once
// written, the last one when a flush finds nothing more to write, so a
// capture with no traffic holds no block, only the end of its last page
// (under 4 KiB, to write that page whole again with direct I/O). Frames
// that find the pool exhausted are dropped and counted like those that find
// the queue full.
//
// Full blocks are written with direct I/O (O_DIRECT) where the file system
// allows it: the disk takes the bytes straight from the queue. Written
// through the page cache, the kernel copies every byte once more and keeps
// the copy, which cost the agent's CPU up to 2.5 s per GiB captured on this
// class of machine (measured: 1.1–2.5 s/GiB buffered, 0.1–0.2 s/GiB direct),
// as much as the relay itself spends forwarding full-size frames. The
// pieces that are not whole aligned blocks (the part of a block filled so
// far that a flush makes visible, the pcapng statistics) go through the page
// cache; the kernel keeps the two coherent, and a File never writes the
// same block both ways at once.
//
// A File ends when Close is called, after writing every frame accepted
// before it, or when a write fails (for example, the disk is full). A failed
// write never leaves half a record behind: the file is cut back to its last
// whole record on disk, and Err says why it ended.
type File struct {
	path     string
	f        fileHandle // through the page cache: tails, statistics, truncation
	direct   fileHandle // O_DIRECT, for full blocks; nil when the file system has none. Set by the writer (writeLoop) as it starts: read only by it and the writes it starts
	openDir  func() fileHandle
	gate     *gate    // nil, or the writer waits for it before its first write
	enc      *encoder // guarded by mu
	now      func() time.Time
	interval time.Duration
	hooks    hooks
	started  time.Time
	pool     *Pool

	mu        sync.Mutex          // guards the queue and the fields below
	cur       *block              // being filled: its records are whole; nil when the file has every record queued
	spareRuns [][]uint32          // direction runs of blocks given back, for the next ones (newBlockLocked)
	full      []*block            // full, waiting to be written, oldest first
	fullBytes int                 // their size
	held      map[*block]struct{} // every block taken from the pool and not given back
	heldBytes int                 // their size (cur, full, being written), bounded by max
	pos       int64               // with cur nil: where the next record goes in the file
	tail      []byte              // with cur nil: the file's bytes from its last page boundary to pos
	max       int                 // bytes of blocks the File may hold
	runAt     int                 // bytes of full blocks that are written before they are due: a run, or half a small queue
	state     int                 // running, closing or failed
	limit     int64               // the file takes no record that would end past this offset; 0: none
	maxRecs   uint64              // the file takes no more records than this; 0: none
	sealed    bool                // the file takes no more records (a limit was reached, or Seal)
	last      time.Time
	queued    [2]uint64 // records ever queued, per direction
	scratch   []byte    // a record that straddles two blocks is encoded here

	written [2]atomic.Uint64 // records on disk, per direction
	dropped [2]atomic.Uint64 // frames not written, per direction
	size    atomic.Int64     // bytes on disk, all whole records

	noDirect atomic.Bool // a direct write was refused (EINVAL): write everything through the page cache

	kick    chan struct{} // capacity 1: the queue got its first unwritten records, or a run is ready
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

// block is one blockSize piece of the file, as the queue holds it.
type block struct {
	b   []byte // aligned to directAlign, capacity blockSize; the bytes queued so far
	off int64  // where b[0] is in the file: a multiple of cap(b)
	// flushed bytes of b are on disk already (a flush wrote them before the
	// block was full). Guarded by File.mu.
	flushed int
	// For a full block: b[:whole] ends with a whole record, and count is
	// how many records, per direction, the file holds up to there.
	whole int
	count [2]uint64
	// b[first] is where a record starts (the first one wholly in b, the
	// end of its last flush, or b's end), and before is how many records, per direction, the file
	// holds before it: where a write that failed after writing part of
	// the block can walk its records from (see salvage). Guarded by
	// File.mu.
	first  int
	before [2]uint64
	// runs says which direction each record of a pcap file, whose records
	// do not say, was sent in: one entry, offset<<1 | direction, where
	// each run of records of one direction begins in b. Empty for pcapng,
	// whose records name their interface. 4 bytes per record when every
	// record changes direction (a 2-MiB block of 80-byte records: 100 KiB,
	// up to twice that in capacity), one per change of direction; kept
	// across blocks (File.spareRuns). Guarded by File.mu.
	runs  []uint32
	reg   *region // the pool's memory it is in
	chunk int     // its small block in reg, -1 for a big block
}

// heapBlock allocates the memory of a block, aligned for direct writes, on
// the Go heap. Go never moves heap memory, so the alignment holds.
func heapBlock() []byte {
	b := make([]byte, blockSize+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign)) % directAlign
	return b[skip:skip:min(len(b), skip+blockSize)]
}

// fileHandle is what a File needs of an *os.File; tests swap in ones that
// fail like a full disk, are slow, or check what direct writes need.
type fileHandle interface {
	io.WriterAt
	Truncate(size int64) error
	Close() error
}

// Create creates the capture file name in dir, which must not exist
// (O_EXCL: a capture never overwrites a file, whoever made it after the
// caller chose the name; the error is then fs.ErrExist), writes its header
// and makes both durable before it returns. The file is opened through
// dir, so it can never be outside the directory, whatever name holds (the
// agent checks names before, with capspec.ValidFileName: its trust
// boundary). When Create fails after it made the file, it removes it: a
// failed start leaves no file behind.
func Create(dir *os.Root, name string, opts Options) (*File, error) {
	// Read and write: followers read the file through a duplicate of this
	// handle (Reader), so a capture opens its file once before it answers.
	f, err := dir.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("captures: create %s: %w", name, err)
	}
	if !opts.BufferedIO && oDirect != 0 {
		// A second handle on the same file, for full blocks, opened by the
		// writer when it starts: not on the way to the capture's start. A
		// file system that refuses O_DIRECT (tmpfs, some network ones)
		// gets none.
		opts.openDirect = func() fileHandle {
			if d, err := dir.OpenFile(name, os.O_WRONLY|oDirect, 0); err == nil {
				return directHandle(d)
			}
			return nil
		}
	}
	path := filepath.Join(dir.Name(), name)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	// The header is on disk, and the file's name in its directory, before
	// anyone is told the capture started: a crash right after leaves a
	// valid capture, not an empty file or none. The directory's sync
	// starts now, while the header is written and synced (see syncDir).
	sync := opts.Sync
	if sync == nil {
		sync = (*os.File).Sync
	}
	dirSynced := syncDir(dir, opts.Dir, sync)
	c, err := newFile(path, f, nil, opts)
	if err != nil {
		<-dirSynced
		_ = dir.Remove(name)
		return nil, err
	}
	ferr := sync(f)
	derr := <-dirSynced
	if derr != nil {
		derr = fmt.Errorf("directory: %w", derr)
	}
	if err := errors.Join(ferr, derr); err != nil {
		opts.gate.open() // nobody else will: the file is removed, unmarked
		c.Close()
		_ = dir.Remove(name)
		return nil, fmt.Errorf("captures: create %s: make it durable: %w", name, err)
	}
	return c, nil
}

// Reader returns a handle of its own that reads the file, even once the
// File is closed or the file removed: a duplicate of the File's handle,
// which costs no lookup of the file's name. The caller closes it.
func (c *File) Reader() (*os.File, error) {
	f, ok := c.f.(*os.File)
	if !ok {
		return nil, errors.New("captures: the file has no handle to read through")
	}
	return dupFile(f, c.path)
}

// syncDir syncs dir (opened, or opened now) with sync in a goroutine of
// its own, and sends its error. Create starts it as soon as the file
// exists, before it writes and syncs the header: a sync covers what was
// done before it was called (here the directory's entries, the new file's
// among them), and on ext4 and XFS both syncs wait for the same journal
// commit, so together they cost about one (BenchmarkCreate: "serial", one
// sync after the other, took 1.1-2.9x the time of "parallel" in six
// back-to-back pairs on a loaded host). Started after the header's write,
// the goroutine often found no processor before the file's sync had
// returned.
func syncDir(dir *os.Root, opened *os.File, sync func(*os.File) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		if opened != nil {
			done <- sync(opened)
			return
		}
		d, err := dir.Open(".")
		if err != nil {
			done <- err
			return
		}
		err = sync(d)
		d.Close()
		done <- err
	}()
	return done
}

func newFile(path string, f, direct fileHandle, opts Options) (*File, error) {
	opts.defaults()
	c := &File{
		path:     path,
		f:        f,
		direct:   direct,
		now:      opts.Now,
		interval: opts.FlushInterval,
		pool:     opts.Pool,
		max:      max(2*blockSize, opts.QueueBytes),
		limit:    opts.MaxBytes,
		maxRecs:  opts.MaxRecords,
		hooks:    opts.hooks,
		openDir:  opts.openDirect,
		gate:     opts.gate,
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	enc, err := newEncoder(opts)
	if err != nil {
		c.closeFiles()
		return nil, err
	}
	c.enc = enc
	c.runAt = min(maxRun*blockSize, max(blockSize, c.max/2)) // a queue of few blocks must not wait for a whole run
	c.started = c.now()
	// The header goes straight to the file: a File holds no block before
	// records come.
	if err := writeAt(c.f, enc.header, 0); err != nil {
		c.closeFiles()
		return nil, fmt.Errorf("captures: write file header: %w", err)
	}
	c.pos = int64(len(enc.header))
	c.tail = append([]byte(nil), enc.header[len(enc.header)&^(directAlign-1):]...)
	c.commit(c.pos, [2]uint64{})
	go c.writeLoop() // ended by Close or a failed write
	return c, nil
}

// Path returns the file's absolute path.
func (c *File) Path() string { return c.path }

// newBlockLocked takes a block from the pool for the bytes of the file
// from off on (a multiple of its size): a big one if big and the pool has
// one, else a small one. It returns nil when the queue is full or the pool
// exhausted. c.mu must be held.
func (c *File) newBlockLocked(off int64, big bool) *block {
	size := smallBlock
	if big {
		size = blockSize
	}
	if c.heldBytes+size > c.max {
		if !big || c.heldBytes+smallBlock > c.max {
			return nil
		}
		big = false
	}
	blk := c.pool.get(big)
	if blk == nil {
		return nil
	}
	blk.off = off
	if n := len(c.spareRuns); n > 0 && !c.enc.pcapng {
		// The pool makes a new block struct per lend: the direction runs
		// of blocks given back are kept here, so a pcap capture grows
		// them once, not per block, under c.mu.
		blk.runs, c.spareRuns = c.spareRuns[n-1], c.spareRuns[:n-1]
	}
	if c.held == nil {
		c.held = make(map[*block]struct{})
	}
	c.held[blk] = struct{}{}
	c.heldBytes += cap(blk.b)
	return blk
}

// takeCurLocked makes a block from the pool the one being filled, when the
// File holds none: a small block holding c.pos, with the end of the file's
// last page put back in place (the bytes before that page are on disk and
// never written again, so they are left as they are). It returns nil when
// the pool is exhausted. c.mu must be held.
func (c *File) takeCurLocked() *block {
	off := c.pos &^ (smallBlock - 1)
	blk := c.newBlockLocked(off, false)
	if blk == nil {
		return nil
	}
	page := int(c.pos&^(directAlign-1) - off)
	blk.b = append(blk.b[:page], c.tail...)
	blk.flushed = len(blk.b)
	blk.first, blk.before = len(blk.b), c.queued
	c.cur = blk
	return blk
}

// giveBackCurLocked gives the block being filled back to the pool when the
// file has all its records and nothing else waits: the File is idle. It
// keeps the end of the file's last page (c.tail) for takeCurLocked. c.mu
// must be held.
func (c *File) giveBackCurLocked(blk *block) {
	if c.cur != blk || len(blk.b) != blk.flushed || len(c.full) > 0 {
		return
	}
	end := len(blk.b)
	c.tail = append(c.tail[:0], blk.b[end&^(directAlign-1):end]...)
	c.pos = blk.off + int64(end)
	c.cur = nil
	c.giveBackLocked(blk)
}

// giveBackLocked gives a block back to the pool, its bytes written or no
// longer wanted. c.mu must be held.
func (c *File) giveBackLocked(blk *block) {
	delete(c.held, blk)
	c.heldBytes -= cap(blk.b)
	blk.flushed, blk.whole, blk.count = 0, 0, [2]uint64{}
	if cap(blk.runs) > 0 && len(c.spareRuns) < 4 {
		c.spareRuns = append(c.spareRuns, blk.runs[:0])
	}
	blk.first, blk.before, blk.runs = 0, [2]uint64{}, nil
	c.pool.put(blk)
}

// mark notes, for a pcap file, that the record about to be appended to b
// was sent in direction dir. File.mu must be held.
func (b *block) mark(dir Direction) {
	if n := len(b.runs); n == 0 || Direction(b.runs[n-1]&1) != dir {
		b.runs = append(b.runs, uint32(len(b.b))<<1|uint32(dir))
	}
}

// WritePacket appends frame as one record. See WritePackets.
func (c *File) WritePacket(dir Direction, frame []byte) {
	c.WritePackets(dir, [][]byte{frame})
}

// WritePackets queues frames, sent in direction dir, as records stamped
// with the current time (one stamp for the batch, never earlier than the
// previous batch's). It does not keep frames. Frames that find the queue
// full, or come after the capture failed, are counted as dropped; frames
// that come after Close are ignored (they were forwarded after the capture
// stopped). It returns how many frames it took, dropped ones included: all
// of them, but for a File that is sealed or reached Options.MaxBytes
// (frames[n:] are not its to take; see Ring).
func (c *File) WritePackets(dir Direction, frames [][]byte) (n int) {
	if len(frames) == 0 {
		return 0
	}
	dir &= 1
	c.mu.Lock()
	if c.sealed {
		c.mu.Unlock()
		return 0
	}
	if c.state != running {
		if c.state == failed {
			c.dropped[dir].Add(uint64(len(frames)))
		}
		c.mu.Unlock()
		return len(frames)
	}
	ts := c.now()
	if ts.Before(c.last) {
		ts = c.last // both directions stamp under this lock: time never goes back
	}
	c.last = ts
	cur := c.cur
	// Wake the writer when the queue had nothing for the file (it arms its
	// timer), and below when a run of full blocks is ready.
	wake := len(c.full) == 0 && (cur == nil || len(cur.b) == cur.flushed)
	var dropped uint64
	exhausted := false // no block to be had for this batch
	for i, f := range frames {
		end := c.pos
		if cur != nil {
			end = cur.off + int64(len(cur.b))
		}
		if c.limit > 0 && end+int64(c.enc.recordSize(len(f))) > c.limit ||
			c.maxRecs > 0 && c.queued[0]+c.queued[1] >= c.maxRecs {
			c.sealed = true // this record and every later one belong to the next file
			n = i
			break
		}
		n = i + 1
		if cur == nil {
			if !exhausted {
				cur = c.takeCurLocked()
			}
			if cur == nil {
				exhausted = true
				dropped++ // the pool is exhausted
				continue
			}
		}
		if !c.enc.pcapng {
			cur.mark(dir)
		}
		if len(cur.b)+maxRecord(len(f)) <= cap(cur.b) {
			cur.b = c.enc.appendRecord(cur.b, dir, ts, f)
			c.queued[dir]++
			continue
		}
		rec := c.enc.appendRecord(c.scratch[:0], dir, ts, f)
		c.scratch = rec
		room := cap(cur.b) - len(cur.b)
		if len(rec) <= room {
			cur.b = append(cur.b, rec...)
			c.queued[dir]++
			continue
		}
		// The record straddles this block and the next: a big one from a
		// 2-MiB boundary on.
		nextOff := cur.off + int64(cap(cur.b))
		var next *block
		if !exhausted {
			next = c.newBlockLocked(nextOff, nextOff%blockSize == 0)
		}
		if next == nil {
			exhausted = true
			dropped++ // the disk is behind and the queue is full, or the pool is exhausted
			continue
		}
		cur.whole, cur.count = len(cur.b), c.queued
		if room == 0 { // the record starts in next
			next.before = c.queued
			if !c.enc.pcapng {
				next.mark(dir)
			}
		}
		cur.b = append(cur.b, rec[:room]...)
		c.queued[dir]++
		if room > 0 {
			next.first, next.before = len(rec)-room, c.queued
		}
		next.b = append(next.b, rec[room:]...)
		c.full = append(c.full, cur)
		c.fullBytes += cap(cur.b)
		c.cur, cur = next, next
		wake = wake || c.fullBytes >= c.runAt
	}
	c.mu.Unlock()
	if dropped > 0 {
		c.dropped[dir].Add(dropped)
	}
	if wake {
		notify(c.kick)
	}
	return n
}

// Seal makes the File take no more records: WritePackets returns 0 from
// now on. Every record it took before is written as usual. A Ring seals a
// file before the next one takes over, so that every record of a file is
// older than every record of the next.
func (c *File) Seal() {
	c.mu.Lock()
	c.sealed = true
	c.mu.Unlock()
}

// atMaxRecords reports whether the File took its Options.MaxRecords.
func (c *File) atMaxRecords() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxRecs > 0 && c.queued[0]+c.queued[1] >= c.maxRecs
}

// Sealed reports whether the File takes no more records: it was sealed, or
// a record found it at its Options.MaxBytes.
func (c *File) Sealed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sealed
}

// HeaderLen returns the length of the file's header: the bytes every file
// of the same options begins with.
func (c *File) HeaderLen() int { return len(c.enc.header) }

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// blockWrite is a run of full blocks, consecutive in the file, being
// written by a goroutine of its own.
type blockWrite struct {
	blks    []*block
	data    [][]byte      // the blocks' bytes, laid end to end in the file from blks[0].off
	err     error         // set before done is closed
	reached int           // with err: the file holds data's bytes up to there (set before done is closed)
	done    chan struct{} // closed when the write has returned
}

// writeLoop writes the queue to the file. Every FlushInterval after records
// were queued that the file does not have (the writes are "due"), it writes
// the full blocks in runs of up to maxRun, several runs at once, and then,
// if there was no full block to write, what there is of the block being
// filled (a flush must never write a block that a block write is writing).
// Between two due times it writes only whole runs of runAt blocks (maxRun,
// or half a queue of fewer blocks). After Close, it writes everything
// queued and returns.
//
// A direct write costs about the same CPU time whatever its size, up to
// megabytes: writing full blocks as soon as each filled, and flushing the
// block being filled on top, cost a busy link three system calls per 2-MiB
// block, and the page cache's piece of the block had to be dropped again
// when the direct write covered it. Now a busy link writes every
// FlushInterval whatever filled meanwhile, in one call, and a record waits
// twice FlushInterval at most, plus the disk's time: a due time that writes
// full blocks leaves the block being filled to the next one, by which time
// that block has filled and is written whole, or no block filled and it is
// flushed.
func (c *File) writeLoop() {
	defer close(c.stopped)
	if c.openDir != nil {
		c.direct = c.openDir()
	}
	if c.gate != nil {
		<-c.gate.ch // records queue until then (Options.gate)
	}
	var pending []*blockWrite // oldest first: they are committed in file order
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// due: FlushInterval passed since records were queued; wroteBlocks: this
	// due time found full blocks to write.
	armed, due, wroteBlocks := false, false, false
	for {
		before := len(pending)
		pending = c.startBlockWrites(pending, due)
		wroteBlocks = wroteBlocks || (due && len(pending) > before)
		if due && c.hooks.due != nil {
			c.hooks.due()
		}
		if due && len(pending) == 0 {
			// Every full block is on disk, unless one filled just now:
			// WritePackets does not wake the writer for a single block, so
			// go round and write it first.
			if c.hasFull() {
				continue
			}
			if !wroteBlocks {
				flushed, err := c.flushTail()
				if err != nil {
					c.finish(nil, err)
					return
				}
				if !flushed {
					continue // the same, found by flushTail
				}
			}
			due, wroteBlocks = false, false
		}
		if !armed && !due && c.hasUnwritten() {
			timer.Reset(c.interval)
			armed = true
		}
		var oldest chan struct{}
		if len(pending) > 0 {
			oldest = pending[0].done
		}
		select {
		case <-oldest:
			var err error
			if pending, err = c.commitOldest(pending); err != nil {
				c.finish(pending, err)
				return
			}
		case <-c.kick:
		case <-timer.C:
			armed, due = false, true
			if c.hooks.tick != nil {
				c.hooks.tick()
			}
		case <-c.stop:
			timer.Stop()
			err := c.drain(pending) // waits for every write it started
			c.finish(nil, err)
			return
		}
	}
}

// hasFull tells whether full blocks wait to be written.
func (c *File) hasFull() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.full) > 0
}

// hasUnwritten tells whether the queue holds records the file does not
// have yet.
func (c *File) hasUnwritten() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.full) > 0 || (c.cur != nil && len(c.cur.b) > c.cur.flushed)
}

// startBlockWrites starts writing full blocks, oldest first, in runs of up
// to maxRun big blocks' bytes, while fewer than maxInflight writes are
// under way: every full block when all is true, else only whole runs of
// runAt bytes. It returns pending with the writes it started added.
func (c *File) startBlockWrites(pending []*blockWrite, all bool) []*blockWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(pending) < maxInflight && len(c.full) > 0 && (all || c.fullBytes >= c.runAt) {
		n, size := 0, 0
		for n < len(c.full) && (n == 0 || size+cap(c.full[n].b) <= maxRun*blockSize) {
			size += cap(c.full[n].b)
			n++
		}
		c.fullBytes -= size
		blks := slices.Clone(c.full[:n])
		c.full = c.full[:copy(c.full, c.full[n:])]
		w := &blockWrite{blks: blks, done: make(chan struct{})}
		data := make([][]byte, n)
		for i, blk := range blks {
			data[i] = blk.b[:cap(blk.b)]
		}
		w.data = data
		off, from := blks[0].off, blks[0].flushed
		go func() {
			defer close(w.done)
			w.reached, w.err = c.writeRange(data, off, from)
		}()
		pending = append(pending, w)
	}
	return pending
}

// commitOldest takes the result of the oldest block write, which has
// returned, and removes it from pending: the file now holds every record up
// to the last whole one of its last block.
func (c *File) commitOldest(pending []*blockWrite) ([]*blockWrite, error) {
	w := pending[0]
	pending = pending[:copy(pending, pending[1:])]
	if w.err != nil {
		c.salvage(w.blks, w.data, w.reached)
		return pending, w.err
	}
	last := w.blks[len(w.blks)-1]
	c.commit(last.off+int64(last.whole), last.count)
	c.mu.Lock()
	for _, blk := range w.blks {
		c.giveBackLocked(blk)
	}
	c.mu.Unlock()
	return pending, nil
}

// commit publishes what the file holds and wakes followers.
func (c *File) commit(size int64, count [2]uint64) {
	c.size.Store(size)
	c.written[AtoB].Store(count[AtoB])
	c.written[BtoA].Store(count[BtoA])
	c.updated.notify()
}

// flushTail writes the records of the block being filled that the file
// does not have yet, and reports whether it could: not while a full block
// waits to be written before it. Then, if no record came meanwhile, it
// gives the block back to the pool. Only the writer goroutine calls it.
func (c *File) flushTail() (bool, error) {
	c.mu.Lock()
	if len(c.full) > 0 {
		c.mu.Unlock()
		return false, nil
	}
	blk := c.cur
	if blk == nil {
		c.mu.Unlock()
		return true, nil
	}
	data, from, count := blk.b, blk.flushed, c.queued
	if len(data) == from {
		c.giveBackCurLocked(blk)
		c.mu.Unlock()
		return true, nil
	}
	c.mu.Unlock()
	// The block may fill and join c.full meanwhile; it is written only
	// from this goroutine, after this returns.
	if reached, err := c.writeRange([][]byte{data}, blk.off, from); err != nil {
		c.salvage([]*block{blk}, [][]byte{data}, reached)
		return false, err
	}
	c.mu.Lock()
	blk.flushed = len(data)
	blk.first, blk.before = len(data), count
	c.giveBackCurLocked(blk)
	c.mu.Unlock()
	c.commit(blk.off+int64(len(data)), count)
	return true, nil
}

// writeRange writes the bytes of data, laid end to end at off, from byte
// from on: the aligned part with one direct write when the file has a
// direct handle, the rest through the page cache. Every piece of data but
// the last is a whole number of aligned pages. When a write fails, reached
// says how far the file holds data's bytes: from on, up to there, as the
// system calls reported they wrote them (a full disk takes the bytes that
// fit, then fails). A direct write of a full disk may write fewer bytes
// than asked too, counted the same way: it reports whole aligned pages,
// and the pages it did not write are past reached.
func (c *File) writeRange(data [][]byte, off int64, from int) (reached int, err error) {
	end := 0
	for _, d := range data {
		end += len(d)
	}
	if c.direct != nil && !c.noDirect.Load() {
		lo, hi := from/directAlign*directAlign, end/directAlign*directAlign
		if hi > lo {
			n, err := writeVec(c.direct, span(data, lo, hi), off+int64(lo))
			switch {
			case errors.Is(err, syscall.EINVAL):
				// The file system takes no direct writes of this shape
				// after all: from now on everything takes the page cache.
				c.noDirect.Store(true)
			case err != nil:
				return max(from, lo+n), err
			default:
				from = max(from, hi)
			}
		}
	}
	if from == end {
		return end, nil
	}
	n, err := writeVec(c.f, span(data, from, end), off+int64(from))
	return from + n, err
}

// span returns the buffers that hold bytes [lo, hi) of data laid end to
// end.
func span(data [][]byte, lo, hi int) [][]byte {
	var out [][]byte
	at := 0
	for _, d := range data {
		a, b := max(lo-at, 0), min(hi-at, len(d))
		if a < b {
			out = append(out, d[a:b])
		}
		at += len(d)
	}
	return out
}

// vecWriter is a fileHandle that writes several buffers, laid end to end
// at off, with one system call (pwritev). The n bytes it wrote are a
// prefix.
type vecWriter interface {
	WriteVecAt(bufs [][]byte, off int64) (n int, err error)
}

// writeVec writes bufs laid end to end at off: with one call when h can,
// else one per buffer. It returns how many bytes it wrote, a prefix of
// bufs': all of them unless it fails.
func writeVec(h fileHandle, bufs [][]byte, off int64) (written int, err error) {
	v, ok := h.(vecWriter)
	if !ok || len(bufs) == 1 {
		for _, b := range bufs {
			n, err := h.WriteAt(b, off)
			written += max(n, 0)
			if err == nil && n < len(b) {
				err = io.ErrShortWrite
			}
			if err != nil {
				return written, err
			}
			off += int64(len(b))
		}
		return written, nil
	}
	for len(bufs) > 0 {
		n, err := v.WriteVecAt(bufs, off)
		written += max(n, 0)
		if err != nil {
			return written, err
		}
		if n == 0 {
			return written, io.ErrShortWrite
		}
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if n > 0 {
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
		}
	}
	return written, nil
}

func writeAt(h fileHandle, p []byte, off int64) error {
	n, err := h.WriteAt(p, off)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// salvage commits, after a write of the blocks blks (their bytes laid end
// to end in data) failed having written data's bytes up to reached, the
// records that lie wholly below reached: a full disk takes the part of a
// write that fits, often many records, and the file keeps them. It walks
// the records from blks[0].first, a record's start that the write reached
// or began after (every byte of data before the write's start is on disk
// already), with the counts the block holds for there, and reads each
// record's direction from the record (pcapng) or the block's runs (pcap).
// Only the writer goroutine calls it, with every earlier write committed.
func (c *File) salvage(blks []*block, data [][]byte, reached int) {
	c.mu.Lock()
	at, count := blks[0].first, blks[0].before
	if at > reached {
		c.mu.Unlock()
		return // the write ended inside the record that straddles into it
	}
	le := binary.LittleEndian
	var hdr [16]byte
	bi, bstart, run := 0, 0, 0 // the block at holds, where it starts in data, its run of at
	for at+len(hdr) <= reached {
		for bi < len(blks) && at >= bstart+len(data[bi]) {
			bstart += len(data[bi])
			bi, run = bi+1, 0
		}
		if bi == len(blks) {
			break
		}
		gather(hdr[:], data, at)
		var n int
		var dir Direction
		if c.enc.pcapng {
			n, dir = int(le.Uint32(hdr[4:])), Direction(le.Uint32(hdr[8:])&1)
		} else {
			n = 16 + int(le.Uint32(hdr[8:]))
			runs, local := blks[bi].runs, uint32(at-bstart)
			for run+1 < len(runs) && runs[run+1]>>1 <= local {
				run++
			}
			if run >= len(runs) || runs[run]>>1 > local {
				break // cannot happen: every record's direction is noted
			}
			dir = Direction(runs[run] & 1)
		}
		if n < len(hdr) || at+n > reached {
			break
		}
		at += n
		count[dir]++
	}
	size := blks[0].off + int64(at)
	c.mu.Unlock()
	if size > c.size.Load() {
		c.commit(size, count)
	}
}

// gather copies into dst the bytes of data, laid end to end, from at on.
func gather(dst []byte, data [][]byte, at int) {
	for _, d := range data {
		if len(dst) == 0 {
			return
		}
		if at >= len(d) {
			at -= len(d)
			continue
		}
		n := copy(dst, d[at:])
		dst, at = dst[n:], 0
	}
}

// drain writes everything queued, after Close: no record can be queued any
// more. It returns the first error.
func (c *File) drain(pending []*blockWrite) error {
	for {
		pending = c.startBlockWrites(pending, true)
		if len(pending) > 0 {
			<-pending[0].done
			var err error
			if pending, err = c.commitOldest(pending); err != nil {
				c.wait(pending)
				return err
			}
			continue
		}
		flushed, err := c.flushTail()
		if err != nil || flushed {
			return err
		}
	}
}

// wait waits for block writes under way, ignoring their results.
func (c *File) wait(pending []*blockWrite) {
	for _, w := range pending {
		<-w.done
	}
}

// finish ends the capture. After Close (cause nil) everything queued is in
// the file and, for pcapng, the statistics are appended. After a failed
// write, it waits for the writes under way, cuts the file back to its last
// whole record on disk and counts every record not on disk as dropped.
// Then it closes the file and wakes everyone.
func (c *File) finish(pending []*blockWrite, cause error) {
	if cause == nil {
		cause = c.writeStats()
	}
	if cause != nil {
		c.wait(pending)
		if pe := (*fs.PathError)(nil); errors.As(cause, &pe) {
			cause = pe.Err // the path is said once, below
		}
		cause = fmt.Errorf("captures: write %s: %w", c.path, cause)
		if err := c.f.Truncate(c.size.Load()); err != nil {
			cause = errors.Join(cause, fmt.Errorf("captures: truncate %s: %w", c.path, err))
		}
		c.mu.Lock()
		if c.state == running {
			c.state = failed // frames from now on are counted as dropped; after Close they are ignored
		}
		for d := range 2 {
			c.dropped[d].Add(c.queued[d] - c.written[d].Load())
		}
		c.mu.Unlock()
	}
	// Every write has returned and WritePackets queues nothing any more
	// (the state is not running): the blocks go back to the pool.
	c.mu.Lock()
	for blk := range c.held {
		c.giveBackLocked(blk)
	}
	c.cur, c.full, c.fullBytes = nil, nil, 0
	c.mu.Unlock()
	if err := c.closeFiles(); err != nil && cause == nil {
		cause = fmt.Errorf("captures: close %s: %w", c.path, err)
	}
	c.endErr = cause
	close(c.done)
	c.updated.notify()
}

// closeFiles closes the file's handles.
func (c *File) closeFiles() error {
	err := c.f.Close()
	if c.direct != nil {
		err = errors.Join(err, c.direct.Close())
	}
	return err
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
	if err := writeAt(c.f, b, c.size.Load()); err != nil {
		return err
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
// in the file, then closes the file, which keeps every record written. It
// returns why the capture ended badly, if it did (as Err). It is safe to
// call more than once and concurrently with WritePackets.
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
	return c.endErr
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
	return c.follow(ctx, w, flush, rf, 0)
}

// follow is Follow through the read handle rf (which it does not close),
// from byte off of the file on.
func (c *File) follow(ctx context.Context, w io.Writer, flush func() error, rf io.ReaderAt, off int64) error {
	buf := make([]byte, 256<<10)
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
