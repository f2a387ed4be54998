// Package imagesum computes the md5 sums of image files (what GNS3 clients
// match appliance files by) once per version of a file, in the background,
// a few at a time, and caches them.
//
// A version of a file is its identity: device, inode, size, modification
// and change times. A sum is kept in memory for that identity and written
// beside the file in <file>.md5sum (GNS3's cache: 32 hex digits), which is
// trusted only when it is not older than the file's last change (ctime: a
// rename or a rewrite sets it, and no one can set it back), so a file
// replaced by another, even one with an older modification time, is
// hashed again.
//
// Callers that want a sum wait for it; callers asking for the same
// version share one computation, and a computation nobody waits for any
// more stops, keeping how far it got (the offset and md5's state), so the
// next caller goes on from there instead of starting over.
package imagesum

import (
	"context"
	"crypto/md5"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labtap/labtap/internal/atomicfile"
)

// DefaultMaxBytes is the largest file hashed when Config.MaxBytes is 0:
// 128 GiB, the largest image upload the agent takes. Hashing costs one
// core for as long as reading the whole apparent size takes (about 2 s a
// GiB), holes of a sparse file included, so a 2 TiB sparse file made in a
// blink would cost an hour.
const DefaultMaxBytes = 128 << 30

// Errors of Sum.
var (
	// ErrTooLarge is a file over Config.MaxBytes: it is not hashed.
	ErrTooLarge = errors.New("too large to hash")
	// ErrChanged is a file that changed while it was being hashed.
	ErrChanged = errors.New("changed while hashed")
	// ErrNotRegular is what is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// Config sets a Sums up. The zero Config works.
type Config struct {
	// Workers is how many files are hashed at once; 1 when 0.
	Workers int
	// MaxBytes is the largest file hashed; DefaultMaxBytes when 0.
	MaxBytes int64
	Logger   *slog.Logger
}

// Sums computes and caches md5 sums of files. It is safe for concurrent
// use. Make one with New.
type Sums struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{} // one per file hashed at once

	mu   sync.Mutex       // guards done and jobs
	done map[string]entry // by path: the sum of one version of the file
	jobs map[string]*job  // by path: a computation running or paused
	st   stats
}

type stats struct {
	runs, running, finished, paused atomic.Int64
	bytes                           atomic.Int64
}

// Stats counts what a Sums did.
type Stats struct {
	Runs     int64 // computations started or resumed
	Running  int64 // computations going on now (waiting for a slot included)
	Finished int64 // sums computed
	Paused   int64 // computations stopped as nobody waited any more
	Bytes    int64 // bytes hashed
}

// version is what tells one version of a file from another.
type version struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns
}

func versionOf(fi os.FileInfo) (version, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return version{}, false
	}
	return version{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}

type entry struct {
	v   version
	sum string
}

// job is the computation of one version's sum. s.mu guards its fields.
type job struct {
	v        version
	waiters  int
	cancel   context.CancelFunc // of the run going on; nil when paused
	finished chan struct{}      // closed once sum or err is set
	sum      string
	err      error
	off      int64  // bytes hashed so far
	state    []byte // md5's state at off
}

// New returns a Sums set up by cfg.
func New(cfg Config) *Sums {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sums{
		cfg: cfg, log: cfg.Logger,
		slots: make(chan struct{}, cfg.Workers),
		done:  make(map[string]entry),
		jobs:  make(map[string]*job),
	}
}

// Stats returns what s did so far.
func (s *Sums) Stats() Stats {
	return Stats{Runs: s.st.runs.Load(), Running: s.st.running.Load(), Finished: s.st.finished.Load(), Paused: s.st.paused.Load(), Bytes: s.st.bytes.Load()}
}

// Cached returns the sum of the file at path when it is known for the
// file as it is now, without hashing anything.
func (s *Sums) Cached(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	v, ok := versionOf(fi)
	if !ok {
		return "", false
	}
	return s.cached(path, v)
}

func (s *Sums) cached(path string, v version) (string, bool) {
	s.mu.Lock()
	e, ok := s.done[path]
	s.mu.Unlock()
	if ok && e.v == v {
		return e.sum, true
	}
	if sum, ok := readSidecar(path, v); ok {
		s.mu.Lock()
		s.done[path] = entry{v, sum}
		s.mu.Unlock()
		return sum, true
	}
	return "", false
}

// Sum returns the md5 (hex) of the file at path, from the cache or
// computed. It waits until the sum is known or ctx is done; the
// computation is shared with every other caller asking for the same
// version of the file, runs at most Config.Workers at a time, and pauses
// once no caller waits for it.
func (s *Sums) Sum(ctx context.Context, path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %w", filepath.Base(path), ErrNotRegular)
	}
	v, ok := versionOf(fi)
	if !ok {
		return "", fmt.Errorf("%s: no file identity", filepath.Base(path))
	}
	if sum, ok := s.cached(path, v); ok {
		return sum, nil
	}
	if v.size > s.cfg.MaxBytes {
		return "", fmt.Errorf("%s: %d bytes: %w", filepath.Base(path), v.size, ErrTooLarge)
	}
	s.mu.Lock()
	j := s.jobs[path]
	if j != nil && j.v != v {
		// The file changed: what was hashed is of no use.
		if j.cancel != nil {
			j.cancel()
		}
		delete(s.jobs, path)
		j = nil
	}
	if j == nil {
		j = &job{v: v, finished: make(chan struct{})}
		s.jobs[path] = j
	}
	j.waiters++
	if j.cancel == nil {
		s.startLocked(path, j)
	}
	s.mu.Unlock()

	select {
	case <-j.finished:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j.waiters--
	select {
	case <-j.finished:
		return j.sum, j.err
	default:
	}
	if j.waiters == 0 && j.cancel != nil {
		j.cancel() // the run pauses, keeping its progress
	}
	return "", ctx.Err()
}

// startLocked starts a run of j. s.mu must be held.
func (s *Sums) startLocked(path string, j *job) {
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	s.st.runs.Add(1)
	s.st.running.Add(1)
	go s.run(ctx, path, j)
}

// run hashes j's file from where it stopped last, in a worker slot, until
// the end or until ctx is cancelled.
func (s *Sums) run(ctx context.Context, path string, j *job) {
	s.mu.Lock()
	off, state := j.off, j.state
	s.mu.Unlock()
	var sum string
	var err error
	select {
	case s.slots <- struct{}{}:
		sum, off, state, err = s.hash(ctx, path, j.v, off, state)
		<-s.slots
	case <-ctx.Done():
		err = ctx.Err()
	}

	if err == nil {
		writeSidecar(path, sum, j.v) // a cache: failing to write it costs time only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.running.Add(-1)
	j.cancel = nil
	switch {
	case err == nil:
		j.sum = sum
		if s.jobs[path] == j {
			delete(s.jobs, path)
			s.done[path] = entry{j.v, sum}
		}
		close(j.finished)
		s.st.finished.Add(1)
	case ctx.Err() != nil:
		j.off, j.state = off, state
		s.st.paused.Add(1)
		if s.jobs[path] != j { // replaced: the file changed
			j.err = ErrChanged
			close(j.finished)
		} else if j.waiters > 0 { // a caller came while the run was stopping
			s.startLocked(path, j)
		}
	default:
		j.err = err
		if s.jobs[path] == j {
			delete(s.jobs, path)
		}
		close(j.finished)
	}
}

// chunk is how much hash reads between two looks at its context.
const chunk = 1 << 20

// hash goes on hashing the file at path (version v) from off, md5 being
// in state there, until its end or until ctx is done: then it returns the
// offset and state it reached.
func (s *Sums) hash(ctx context.Context, path string, v version, off int64, state []byte) (string, int64, []byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", off, state, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", off, state, err
	}
	if got, ok := versionOf(fi); !ok || got != v || !fi.Mode().IsRegular() {
		return "", off, state, ErrChanged
	}
	m := md5.New()
	if state != nil {
		if err := m.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			off = 0
			m.Reset()
		}
	}
	buf := make([]byte, chunk)
	for off < v.size {
		if ctx.Err() != nil {
			return "", off, marshal(m), ctx.Err()
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), v.size-off)], off)
		m.Write(buf[:n])
		off += int64(n)
		s.st.bytes.Add(int64(n))
		if err != nil && !(errors.Is(err, io.EOF) && off == v.size) {
			if errors.Is(err, io.EOF) {
				err = ErrChanged
			}
			return "", 0, nil, err
		}
	}
	if fi, err := f.Stat(); err != nil {
		return "", 0, nil, err
	} else if got, _ := versionOf(fi); got != v {
		return "", 0, nil, ErrChanged
	}
	return hex.EncodeToString(m.Sum(nil)), off, nil, nil
}

func marshal(m hash.Hash) []byte {
	b, err := m.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil
	}
	return b
}

// Store records sum as the md5 of the file at path as it is now (an
// upload hashed as it was written), in memory and beside the file.
func (s *Sums) Store(path, sum string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	v, ok := versionOf(fi)
	if !ok {
		return
	}
	s.mu.Lock()
	s.done[path] = entry{v, sum}
	s.mu.Unlock()
	writeSidecar(path, sum, v)
}

// readSidecar reads <path>.md5sum when it is a regular file newer than the
// file's last change (ctime). Strictly newer: file times move by clock
// ticks of a few milliseconds, and a change in the tick the sidecar was
// written in must not pass for older.
func readSidecar(path string, v version) (string, bool) {
	f, err := os.OpenFile(path+".md5sum", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.ModTime().UnixNano() <= v.ctime {
		return "", false
	}
	b := make([]byte, 64)
	n, _ := io.ReadFull(f, b)
	sum := strings.TrimSpace(string(b[:n]))
	if _, err := hex.DecodeString(sum); err != nil || len(sum) != 32 {
		return "", false
	}
	return sum, true
}

// writeSidecar writes <path>.md5sum, the sum of version v of the file,
// through a new temporary file renamed over it: a link or FIFO in its
// place is replaced, never followed or opened. Written in the clock tick
// of v's last change, it is dated just after it, so that readSidecar
// trusts it.
func writeSidecar(path, sum string, v version) {
	f, err := atomicfile.Create(path+".md5sum", 0o644)
	if err != nil {
		return
	}
	_, err = f.WriteString(sum)
	if err == nil {
		if fi, serr := f.Stat(); serr == nil && fi.ModTime().UnixNano() <= v.ctime {
			t := time.Unix(0, v.ctime+1)
			err = os.Chtimes(f.Name(), t, t)
		}
	}
	if err != nil {
		f.Abort()
		return
	}
	f.Commit()
}
