package project

import (
	"fmt"
	"sync"
)

// A Store may keep a project's changes beside its file (topology's
// journal): its saves then tell when they are on disk apart from making
// them, and it writes the changes into the file when asked.

// JournalSuffix names a project file's journal: "<name>.gns3.journal"
// (topology.JournalSuffix). Only the server writes it.
const JournalSuffix = ".journal"

// asyncStore is a Store whose SaveAsync makes a save and returns a wait
// that returns once the save is on disk. Waits may run at once, and those
// that do share the disk's flushes.
type asyncStore interface {
	SaveAsync(s *Snapshot) (wait func() error, err error)
}

// folder is a Store whose Fold makes a project's file hold every change
// saved, for those who read the file.
type folder interface {
	Fold(p *Project) error
}

// opsLock is a project's ops lock (state.ops). A change holds it
// exclusively; its saves are written under it, and waited for (on disk)
// when it unlocks: the change answers only after its saves are on disk,
// and the next change does not wait for this one's flush, so changes that
// queue on the lock share flushes (group commit).
type opsLock struct {
	mu    sync.RWMutex
	excl  bool           // held exclusively; written by the holder only
	waits []func() error // the exclusive holder's saves, to wait for at Unlock
}

func (o *opsLock) Lock() {
	o.mu.Lock()
	o.excl = true
}

// Unlock releases the lock, then waits for the saves made under it.
func (o *opsLock) Unlock() {
	waits := o.waits
	o.waits, o.excl = nil, false
	o.mu.Unlock()
	for _, w := range waits {
		w()
	}
}

func (o *opsLock) RLock()   { o.mu.RLock() }
func (o *opsLock) RUnlock() { o.mu.RUnlock() }

// waitAtUnlock leaves w to the exclusive holder's Unlock and reports true,
// or reports false when the lock is held shared.
func (o *opsLock) waitAtUnlock(w func() error) bool {
	if !o.excl {
		return false
	}
	o.waits = append(o.waits, w)
	return true
}

// save writes the project through the Store. st.ops must be held
// (shared will do). Under an exclusive hold, the save is on disk when
// st.ops.Unlock returns; under a shared one, when save returns.
func (s *core) save(st *state) error {
	st.saveMu.Lock()
	st.mu.RLock()
	snap := st.snapshotLocked()
	st.mu.RUnlock()
	as, ok := s.cfg.Store.(asyncStore)
	if !ok {
		defer st.saveMu.Unlock()
		if err := s.cfg.Store.Save(snap); err != nil {
			return writeFailed(err)
		}
		return nil
	}
	wait, err := as.SaveAsync(snap)
	st.saveMu.Unlock()
	if err != nil {
		return writeFailed(err)
	}
	p := snap.Project
	if st.ops.waitAtUnlock(func() error { return s.durable(&p, wait) }) {
		return nil
	}
	if err := wait(); err != nil {
		return writeFailed(err)
	}
	return nil
}

// durable waits for a save made under an exclusive st.ops, once the lock
// is released. Its change was written, so only a failed flush can fail
// it: then the project file is written whole (with its own flushes)
// before the change answers.
func (s *core) durable(p *Project, wait func() error) error {
	err := wait()
	if err == nil {
		return nil
	}
	s.log.Error("project change not flushed to disk; writing the project file whole", "project", p.ID, "err", err)
	if ferr := s.fold(p); ferr != nil {
		s.log.Error("project change may not be on disk", "project", p.ID, "err", ferr)
		return ferr
	}
	return nil
}

// fold makes the project's file hold every change saved.
func (s *core) fold(p *Project) error {
	if f, ok := s.cfg.Store.(folder); ok {
		return f.Fold(p)
	}
	return nil
}

// writeFailed is the error of a project file write that failed.
func writeFailed(err error) *Error {
	return &Error{Kind: ErrConflict, Msg: fmt.Sprintf("Could not write project file: %v", err), Err: err}
}
