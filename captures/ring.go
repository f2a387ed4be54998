package captures

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labtap/labtap/capspec"
)

// Limits end a capture's files, with dumpcap's -a and -b semantics: with
// Files > 1 a file that reaches a limit is followed by the next one
// (name-00001.pcap, name-00002.pcap, ...) and the newest Files are kept;
// otherwise the first limit reached ends the capture. The zero value has no
// limit: one file, ended by Close.
type Limits struct {
	// MaxBytes ends a file before the record that would take it past this
	// size (a pcapng file's closing statistics come on top).
	MaxBytes int64
	// MaxDuration ends a file this long after it began.
	MaxDuration time.Duration
	// MaxPackets ends a file once it holds this many records.
	MaxPackets uint64
	// Files > 1 keeps that many files, the newest.
	Files int
}

func (l Limits) ring() bool { return l.Files > 1 }

// RingHooks tell the Ring's owner about its files, from the Ring's own
// goroutine (never from WritePackets), or for the first file from
// CreateRing. Nil hooks are skipped.
type RingHooks struct {
	// Creating is called before a file is created, Began when a file after
	// the first one takes over, Closed after a file was closed cleanly,
	// Removed after the ring removed a file (too old).
	Creating, Began, Closed, Removed func(name string)
	// Created is called once a file was created, its header and name
	// durable, before it takes records. The file's records are queued and
	// none is written to it until release is called, which Created must
	// do, once, soon, from any goroutine: the owner marks the file as
	// being written (for a repair after a crash) off the capture's start,
	// since a file holding only its header needs no repair. Closed and
	// Removed come after release.
	Created func(name string, release func())
	// Counted is called once a file that took records is closed (cleanly
	// or not), with the frames it could not hold: a pcap file has no place
	// to say so itself.
	Counted func(name string, dropped uint64)
}

// Ring is a capture written to a sequence of files, each a File ending on a
// whole record and valid on its own; with no limit it is one File. The next
// file is created ahead of need, by the Ring's goroutine, so that a file's
// end costs WritePackets no disk access: the switch is a pointer swap.
// Frames that come when a file ended and the next one is not ready (its
// creation is slower than the link fills a file) are counted as dropped.
//
// A Ring ends when Close is called, when a file fails (Err), or, without
// Files > 1, when a limit is reached (Limit says which).
type Ring struct {
	dir    *os.Root
	name   string
	opts   Options
	limits Limits
	hooks  RingHooks

	cur atomic.Pointer[ringFile] // the file WritePackets writes to

	mu      sync.Mutex    // guards the fields below
	files   []*ringFile   // the files begun and not removed, oldest first
	spare   *ringFile     // created, not begun; nil if none
	ended   bool          // no file is begun any more
	timeUp  bool          // the current file reached its time limit with no spare: the spare begins when made
	limit   string        // why the ring ended at a limit
	endErr  error         // why the ring ended on a failure
	closed  [3]uint64     // frames, bytes and dropped of files closed
	dropped atomic.Uint64 // frames that found no file to take them
	count   int           // files begun
	// followers maps each Follow to the number of the file it is on;
	// lingering are released files whose read handle a follower may need.
	followers map[int]int
	nextID    int
	lingering []*ringFile

	kick    chan struct{} // capacity 1: the current file changed, or the ring must end
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when every file is closed
	changed signal        // notified when a file begins and when the ring ends
	once    sync.Once
}

// ringFile is one file of a Ring.
type ringFile struct {
	n     int // its number, from 1
	name  string
	f     *File
	begun time.Time
	next  chan struct{} // closed when the next file begins or the ring ends
	// Guarded by Ring.mu:
	shut     bool      // closed, its counts added to the Ring's
	after    *ringFile // the file that began after it
	rd       *os.File  // read handle for followers: a removed file stays readable to those still to read it
	released bool      // removed from the ring, or the ring ended: rd closes once no follower needs it
}

// CreateRing creates the first file of a capture named name in dir (name
// itself without a ring, capspec.RingName(name, 1) with one) and starts
// the ring's goroutine.
func CreateRing(dir *os.Root, name string, opts Options, limits Limits, hooks RingHooks) (*Ring, error) {
	r := &Ring{
		dir: dir, name: name, opts: opts, limits: limits, hooks: hooks,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	first, err := r.create(1)
	if err != nil {
		return nil, err
	}
	r.begin(first)
	go r.run()
	return r, nil
}

// fileName returns the name of file n.
func (r *Ring) fileName(n int) string {
	if !r.limits.ring() {
		return r.name
	}
	return capspec.RingName(r.name, n)
}

// create creates file n.
func (r *Ring) create(n int) (*ringFile, error) {
	name := r.fileName(n)
	if r.hooks.Creating != nil {
		r.hooks.Creating(name)
	}
	opts := r.opts
	opts.MaxBytes = r.limits.MaxBytes
	opts.MaxRecords = r.limits.MaxPackets
	if r.hooks.Created != nil {
		opts.gate = newGate()
	}
	f, err := Create(r.dir, name, opts)
	if err != nil {
		return nil, err // no writer waits for the gate: Create opened it, or started none
	}
	rd, err := f.Reader()
	if err != nil {
		opts.gate.open()
		f.Close()
		_ = r.dir.Remove(name) // a failed start leaves no file, as Create's own failures
		return nil, fmt.Errorf("captures: open %s for followers: %w", name, err)
	}
	if r.hooks.Created != nil {
		r.hooks.Created(name, opts.gate.open)
	}
	return &ringFile{n: n, name: name, f: f, rd: rd, next: make(chan struct{})}, nil
}

// releaseLocked lets rf's read handle go once no follower needs it. r.mu
// must be held.
func (r *Ring) releaseLocked(rf *ringFile) {
	if !rf.released {
		rf.released = true
		r.lingering = append(r.lingering, rf)
	}
	r.sweepLocked()
}

// sweepLocked closes the read handles of released files that no follower
// needs: a follower on file n reads every file from n on. r.mu must be
// held.
func (r *Ring) sweepLocked() {
	lowest := -1
	for _, n := range r.followers {
		if lowest < 0 || n < lowest {
			lowest = n
		}
	}
	kept := r.lingering[:0]
	for _, rf := range r.lingering {
		if lowest >= 0 && rf.n >= lowest {
			kept = append(kept, rf)
			continue
		}
		rf.rd.Close()
		rf.rd = nil
	}
	clear(r.lingering[len(kept):])
	r.lingering = kept
}

// begin makes rf the file WritePackets writes to. r.mu must be held, or r
// not shared yet.
func (r *Ring) begin(rf *ringFile) {
	rf.begun = time.Now()
	if len(r.files) > 0 {
		prev := r.files[len(r.files)-1]
		prev.after = rf
		close(prev.next)
	}
	r.files = append(r.files, rf)
	r.count++
	r.cur.Store(rf)
	r.changed.notify()
}

// WritePackets writes frames to the current file, and when it ends (its
// size limit), to the next. It never waits for the disk. See
// File.WritePackets.
func (r *Ring) WritePackets(dir Direction, frames [][]byte) {
	for len(frames) > 0 {
		rf := r.cur.Load()
		n := rf.f.WritePackets(dir, frames)
		frames = frames[n:]
		full := r.limits.MaxPackets > 0 && rf.f.atMaxRecords()
		if len(frames) == 0 {
			if full { // ends now, not with the next frame (which may never come)
				r.next(rf, "capture_max_packets", 0)
			}
			return
		}
		reason := "capture_max_bytes"
		if full {
			reason = "capture_max_packets"
		}
		if !r.next(rf, reason, len(frames)) {
			return
		}
	}
}

// next ends file rf, if it is still the current one, for reason: the spare
// file takes over (true), or the ring ends (false). When rf is no longer
// current, another goroutine ended it already (true: write to the new one).
// pending frames wait for the answer: they are counted as dropped when no
// file can take them while the ring goes on.
func (r *Ring) next(rf *ringFile, reason string, pending int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur.Load() != rf {
		return !r.ended
	}
	if r.ended {
		return false
	}
	rf.f.Seal() // before the swap: every record of rf is older than those of the next file
	if !r.limits.ring() {
		r.ended = true
		r.limit = limitText(reason, r.limits)
		notify(r.kick)
		return false
	}
	if r.spare == nil {
		// The next file is not ready: frames wait for nothing, they are
		// dropped (counted) until it is. At the time limit, the next file
		// begins as soon as it is made, records or not (dumpcap's -b
		// duration); at the size limit, with the next record that comes
		// (-b filesize: a file begins for a record).
		r.dropped.Add(uint64(pending))
		if reason == "capture_max_seconds" {
			r.timeUp = true
		}
		return false
	}
	spare := r.spare
	r.spare = nil
	r.begin(spare)
	notify(r.kick)
	return true
}

func limitText(reason string, l Limits) string {
	if reason == "capture_max_seconds" {
		return fmt.Sprintf("it reached capture_max_seconds (%d s)", int(l.MaxDuration/time.Second))
	}
	if reason == "capture_max_packets" {
		return fmt.Sprintf("it reached capture_max_packets (%d packets)", l.MaxPackets)
	}
	return fmt.Sprintf("it reached capture_max_bytes (%d bytes)", l.MaxBytes)
}

// run is the Ring's goroutine: it makes the spare file, ends files at their
// time limit, closes the files that ended and removes the oldest, until the
// ring ends.
func (r *Ring) run() {
	defer close(r.done)
	var timer *time.Timer
	var timerC <-chan time.Time
	var timed *ringFile
	announced := r.cur.Load()
	for {
		r.housekeep()
		rf := r.cur.Load()
		if rf != announced {
			announced = rf
			if r.hooks.Began != nil {
				r.hooks.Began(rf.name)
			}
		}
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		if ended {
			r.finish(nil)
			return
		}
		if r.limits.MaxDuration > 0 && timed != rf {
			if timer != nil {
				timer.Stop()
			}
			timer = time.NewTimer(time.Until(rf.begun.Add(r.limits.MaxDuration)))
			timerC, timed = timer.C, rf
		}
		select {
		case <-r.kick:
		case <-timerC:
			timed = nil
			// Without a spare yet, the file is sealed and housekeep
			// begins the next one as soon as it is made.
			r.next(rf, "capture_max_seconds", 0)
		case <-rf.f.Done():
			// A file that ends without Close failed.
			r.finish(rf.f.Err())
			return
		case <-r.stop:
			r.finish(nil)
			return
		}
	}
}

// housekeep closes the files that ended, removes files beyond the newest
// Files and makes the spare file.
func (r *Ring) housekeep() {
	r.mu.Lock()
	var retired []*ringFile
	for _, rf := range r.files[:len(r.files)-1] {
		if !rf.shut {
			retired = append(retired, rf)
		}
	}
	needSpare := r.limits.ring() && r.spare == nil && !r.ended
	n := r.count + 1
	r.mu.Unlock()
	if needSpare { // first: the link may be filling the current file
		r.makeSpare(n)
	}
	for _, rf := range retired {
		r.closeFile(rf)
	}
	r.removeOld()
}

// makeSpare creates file n, the next one, and begins it at once if the
// current one reached its time limit meanwhile. A file that reached its
// size limit meanwhile is followed by the spare with the next record
// (WritePackets): beginning it here, with no record for it, made the run
// loop miss that the current file changed (no kick), so the ended file was
// never closed, no spare made, and every later frame dropped.
func (r *Ring) makeSpare(n int) {
	spare, err := r.create(n)
	r.mu.Lock()
	switch {
	case err != nil:
		if r.endErr == nil {
			r.endErr = err
		}
		r.ended = true
	case r.ended:
		r.mu.Unlock()
		r.discard(spare)
		return
	default:
		r.spare = spare
		if r.timeUp {
			// The run loop must go round: close the file that ended,
			// make the next spare, time the new file.
			r.timeUp = false
			r.spare = nil
			r.begin(spare)
			notify(r.kick)
		}
	}
	r.mu.Unlock()
}

// closeFile closes a file that ended and adds its counts to the ring's,
// once.
func (r *Ring) closeFile(rf *ringFile) {
	err := rf.f.Close()
	frames, size, dropped := rf.f.Stats()
	r.mu.Lock()
	if rf.shut {
		r.mu.Unlock()
		return
	}
	rf.shut = true
	r.closed[0] += frames
	r.closed[1] += uint64(size)
	r.closed[2] += dropped
	if err != nil && r.endErr == nil {
		r.endErr, r.ended = err, true
	}
	r.mu.Unlock()
	if r.hooks.Counted != nil {
		r.hooks.Counted(rf.name, dropped)
	}
	if err == nil && r.hooks.Closed != nil {
		r.hooks.Closed(rf.name)
	}
}

// removeOld removes the oldest files while there are more than Files.
func (r *Ring) removeOld() {
	if !r.limits.ring() {
		return
	}
	for {
		r.mu.Lock()
		if len(r.files) <= r.limits.Files || !r.files[0].shut {
			r.mu.Unlock()
			return
		}
		old := r.files[0]
		r.files = r.files[1:]
		r.releaseLocked(old)
		r.mu.Unlock()
		if err := r.dir.Remove(old.name); err == nil && r.hooks.Removed != nil {
			r.hooks.Removed(old.name)
		}
	}
}

// discard closes and removes a spare file that was never begun.
func (r *Ring) discard(rf *ringFile) {
	rf.rd.Close()
	rf.f.Close()
	_ = r.dir.Remove(rf.name)
	if r.hooks.Closed != nil {
		r.hooks.Closed(rf.name)
	}
}

// finish ends the ring: no file begins any more, every file is closed.
func (r *Ring) finish(cause error) {
	r.mu.Lock()
	r.ended = true
	if cause != nil && r.endErr == nil {
		r.endErr = cause
	}
	spare := r.spare
	r.spare = nil
	cur := r.files[len(r.files)-1]
	close(cur.next)
	r.mu.Unlock()
	if spare != nil {
		r.discard(spare)
	}
	cur.f.Seal()
	for _, rf := range r.snapshot() {
		r.closeFile(rf)
	}
	r.removeOld()
	r.mu.Lock()
	for _, rf := range r.files {
		r.releaseLocked(rf)
	}
	r.mu.Unlock()
	r.changed.notify()
}

// snapshot returns the files begun and not removed.
func (r *Ring) snapshot() []*ringFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*ringFile(nil), r.files...)
}

// Close ends the capture: every frame accepted before it is written, and
// every file closed. It returns why the capture ended badly, if it did (as
// Err). It is safe to call more than once.
func (r *Ring) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return r.Err()
}

// Done is closed when the capture has ended, by Close, a failure or a
// limit, and every file is closed.
func (r *Ring) Done() <-chan struct{} { return r.done }

// Err returns why the capture ended by itself on a failure.
func (r *Ring) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endErr
}

// Limit returns why the capture ended by itself at a limit, "" if it did
// not.
func (r *Ring) Limit() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limit
}

// Current returns the name and absolute path of the file being written
// (the last one, once the capture ended).
func (r *Ring) Current() (name, path string) {
	rf := r.cur.Load()
	return rf.name, rf.f.Path()
}

// Written returns the name of the file being written and how much of it
// is on disk: whole records, every byte before them written (a File's
// blocks may reach the disk out of order: past this, a reader may find a
// hole).
func (r *Ring) Written() (name string, size int64) {
	rf := r.cur.Load()
	_, size, _ = rf.f.Stats()
	return rf.name, size
}

// Stats returns what the capture holds, over all its files: records
// written, bytes on disk (each file's header included), frames dropped,
// and files begun.
func (r *Ring) Stats() (frames uint64, size int64, dropped uint64, files int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	frames, bytes, dropped := r.closed[0], r.closed[1], r.closed[2]
	for _, rf := range r.files {
		if !rf.shut { // File.Stats takes no lock
			fr, sz, dr := rf.f.Stats()
			frames += fr
			bytes += uint64(sz)
			dropped += dr
		}
	}
	return frames, int64(bytes), dropped + r.dropped.Load(), r.count
}

// Follow writes the capture to w as one continuous stream, from the first
// byte of the file being written: that file, then the records of each file
// that follows it (their headers, the same, left out), calling flush after
// each write, until the capture ends (it returns nil) or ctx is done (it
// returns ctx's error). A follower keeps the file it is on readable: the
// ring may remove it meanwhile (too old), the follower still gets every
// record. See File.Follow.
func (r *Ring) Follow(ctx context.Context, w io.Writer, flush func() error) error {
	r.mu.Lock()
	rf := r.cur.Load()
	if rf.rd == nil { // the capture ended, and nobody follows it
		r.mu.Unlock()
		return rf.f.Follow(ctx, w, flush)
	}
	if r.followers == nil {
		r.followers = make(map[int]int)
	}
	id := r.nextID
	r.nextID++
	r.followers[id] = rf.n
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.followers, id)
		r.sweepLocked()
		r.mu.Unlock()
	}()
	var from int64
	for {
		if err := rf.f.follow(ctx, w, flush, rf.rd, from); err != nil {
			return err
		}
		select {
		case <-rf.next:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
		next := rf.after
		if next == nil { // the ring ended
			r.mu.Unlock()
			return nil
		}
		r.followers[id] = next.n
		r.sweepLocked()
		r.mu.Unlock()
		rf, from = next, int64(next.f.HeaderLen())
	}
}

// Snapshot is the file a capture is writing, as it was when the snapshot
// was taken: its first Size bytes, which end on a whole record, a valid
// capture on its own. Read it, then Close it.
type Snapshot struct {
	// Name is the file's name (for a ring, the numbered file).
	Name string
	// Size is the snapshot's length in bytes.
	Size int64
	io.Reader
	release func()
}

// Close lets the file go: the ring may close its read handle once it
// removed the file.
func (s *Snapshot) Close() error {
	s.release()
	return nil
}

// Snapshot returns the file being written (the last one, once the capture
// ended) as it is now. The ring keeps the file readable until the
// snapshot is closed, even if it removes the file meanwhile (too old).
func (r *Ring) Snapshot() (*Snapshot, error) {
	r.mu.Lock()
	rf := r.cur.Load()
	if rf.rd == nil { // the capture ended and nobody follows it: the file is whole
		r.mu.Unlock()
		f, err := r.dir.Open(rf.name)
		if err != nil {
			return nil, fmt.Errorf("captures: snapshot of %s: %w", rf.name, err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("captures: snapshot of %s: %w", rf.name, err)
		}
		return &Snapshot{Name: rf.name, Size: info.Size(), Reader: io.NewSectionReader(f, 0, info.Size()), release: func() { f.Close() }}, nil
	}
	if r.followers == nil {
		r.followers = make(map[int]int)
	}
	id := r.nextID
	r.nextID++
	r.followers[id] = rf.n // keeps rf.rd open
	r.mu.Unlock()
	// The size the writer committed: whole records only (File.Stats).
	_, size, _ := rf.f.Stats()
	var once sync.Once
	release := func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.followers, id)
			r.sweepLocked()
			r.mu.Unlock()
		})
	}
	return &Snapshot{Name: rf.name, Size: size, Reader: io.NewSectionReader(rf.rd, 0, size), release: release}, nil
}
