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

// folder is a Store whose FoldFile makes a project's file hold every
// change saved, for those who read the file, and returns the file's
// content when it wrote it (nil: read the file).
type folder interface {
	FoldFile(p *Project) ([]byte, error)
}

// opsLock is a project's ops lock (state.ops). A change holds it
// exclusively; its saves are written under it, and waited for (on disk)
// when it unlocks: the change answers only after its saves are on disk,
// and the next change does not wait for this one's flush, so changes that
// queue on the lock share flushes (group commit).
//
// The events of an exclusive hold are held back with its saves, and sent
// at Unlock once those are on disk, after the events of the holds before
// it (so a listener sees a project's changes in the order they were made,
// and never one a power cut could take back). When a save of the hold
// does not reach the disk, its events are not sent: a log.error says so
// instead, and Unlock returns the error for the change to answer.
type opsLock struct {
	mu    sync.RWMutex
	excl  bool           // held exclusively; written by the holder only
	waits []func() error // the exclusive holder's saves, to wait for at Unlock
	held  []Event        // the exclusive holder's events, sent at Unlock
	send  func(Event)    // where held events go (the Service's Emitter)
	// sent is closed once the events of the last exclusive hold that had
	// any are sent (or dropped); written under an exclusive hold.
	sent chan struct{}
}

func (o *opsLock) Lock() {
	o.mu.Lock()
	o.excl = true
}

// Unlock releases the lock, then waits for the saves made under it, then
// sends its events (after those of the holds before it), or a log.error
// when a save failed. It returns the first save's error.
func (o *opsLock) Unlock() error {
	waits, held := o.waits, o.held
	o.waits, o.held, o.excl = nil, nil, false
	if len(held) == 0 {
		o.mu.Unlock()
		return waitAll(waits)
	}
	prev, done, send := o.sent, make(chan struct{}), o.send
	o.sent = done
	o.mu.Unlock()
	defer close(done)
	err := waitAll(waits)
	if prev != nil {
		<-prev
	}
	if err != nil {
		send(Event{Action: LogError, ProjectID: held[0].ProjectID,
			Message: err.Error() + ". The change is kept, not saved: the next save that succeeds writes it"})
		return err
	}
	for _, ev := range held {
		send(ev)
	}
	return nil
}

// waitAll runs every wait and returns the first error.
func waitAll(waits []func() error) error {
	var first error
	for _, w := range waits {
		if err := w(); err != nil && first == nil {
			first = err
		}
	}
	return first
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

// emit sends ev through send, or holds it for Unlock under an exclusive
// hold. The lock must be held: shared, ev leaves once the events of the
// exclusive holds before are sent.
func (o *opsLock) emit(ev Event, send func(Event)) {
	if o.excl {
		o.held = append(o.held, ev)
		o.send = send
		return
	}
	if o.sent != nil {
		<-o.sent
	}
	send(ev)
}

// unlock releases st.ops, held exclusively by a change, and gives the
// change the error of a save of it that did not reach the disk, if it has
// no error of its own (err: the change's named result).
func (st *state) unlock(err *error) {
	if uerr := st.ops.Unlock(); uerr != nil && *err == nil {
		*err = uerr
	}
}

// save writes the project through the Store. st.ops must be held
// (shared will do). Under an exclusive hold, the save is on disk when
// st.ops.Unlock returns (or Unlock fails); under a shared one, when save
// returns.
func (s *core) save(st *state) error { return s.saveAs(st, true) }

// saveKept is save for a change that stays made when its save fails (its
// compute calls cannot be taken back): under an exclusive hold, the
// failure is also Unlock's, so the change's events are not sent.
func (s *core) saveKept(st *state) error {
	err := s.save(st)
	if err != nil {
		st.ops.waitAtUnlock(func() error { return err })
	}
	return err
}

// saveLogged is save for a project read back as it is stored (an open, a
// snapshot restored): a save that fails is logged, and fails nothing. Its
// file holds the project as it was read.
func (s *core) saveLogged(st *state) {
	if err := s.saveAs(st, false); err != nil {
		s.log.Error("save project", "project", st.project().ID, "err", err)
	}
}

// saveAs is save; a failed flush under an exclusive hold fails its Unlock
// when gate is set, and is only logged when not.
func (s *core) saveAs(st *state, gate bool) error {
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
		st.lastSaved = snap
		return nil
	}
	wait, err := as.SaveAsync(snap)
	if err == nil {
		st.lastSaved = snap
	}
	st.saveMu.Unlock()
	if err != nil {
		return writeFailed(err)
	}
	durable := func() error {
		err := s.durable(st, wait)
		if err != nil && !gate {
			s.log.Error("save project", "project", snap.Project.ID, "err", err)
			return nil
		}
		return err
	}
	if st.ops.waitAtUnlock(durable) {
		return nil
	}
	if err := wait(); err != nil {
		return writeFailed(err)
	}
	return nil
}

// durable waits for a save made under an exclusive st.ops, once the lock
// is released. Its change was written, so only a failed flush can fail
// it: then the last snapshot the Store took is saved again, and waited for
// (a Store whose flush failed writes its next save whole) before the change
// answers. Not memory as it is now: the lock is free, and the next change
// may be in it, whose own save could fail and undo it after this wrote it. When that fails too, the change answers the error; it stays in
// memory (its compute calls are made, and the changes after it were made
// on it), and the project's next save that succeeds writes it.
func (s *core) durable(st *state, wait func() error) error {
	err := wait()
	if err == nil {
		return nil
	}
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	snap := st.lastSaved // set by the save whose flush failed, or a later one
	id := snap.Project.ID
	if st.removed { // deleted meanwhile: not written again
		return writeFailed(err)
	}
	s.log.Error("project change not flushed to disk; saving the project again", "project", id, "err", err)
	if ferr := s.cfg.Store.Save(snap); ferr != nil {
		s.log.Error("project change not on disk", "project", id, "err", ferr)
		return writeFailed(ferr)
	}
	return nil
}

// fold makes the project's file hold every change saved, and returns the
// file's content when the Store wrote it (nil: read the file).
func (s *core) fold(p *Project) ([]byte, error) {
	if f, ok := s.cfg.Store.(folder); ok {
		return f.FoldFile(p)
	}
	return nil, nil
}

// writeFailed is the error of a project file write that failed (GNS3's
// words and status).
func writeFailed(err error) *Error {
	return &Error{Kind: ErrInternal, Msg: fmt.Sprintf("Could not write topology: %v", err), Err: err}
}
