package project

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// core is what every part of the Service shares: the configuration, the
// table of projects, the helpers that find a project and take its locks,
// and the goroutines requests leave running. Each part (Nodes, Links,
// Captures, ...) holds it as its core field; the parts that need one
// another hold each other as named fields too. Its save and emit are in
// service.go, beside the state they write and send.
type core struct {
	cfg Config
	log *slog.Logger

	mu       sync.RWMutex // guards projects, order and creating
	projects map[string]*state
	order    []string // creation order of project ids
	// creating holds the ids (and names) of the projects being created:
	// claimed under mu, written to disk outside it.
	creating map[string]string

	// Work a request starts and does not wait for (a project's
	// auto-start) runs in bg, on bgCtx, and Close waits for it.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgClosed, and bg.Go against Close's Wait
	bgClosed bool

	// quotaMu guards claims and makes a count and its claim one step
	// (quota.go).
	quotaMu sync.Mutex
	claims  map[*claim]bool           // changes admitted and not done
	quotas  atomic.Pointer[quotasBox] // Config.Quotas or SetQuotas's

	hooks hooks // tests open race windows with them
}

// hooks are called at points where tests need to act; nil ones are not.
type hooks struct {
	// beforeOpsLock runs when a change has found its project and is about
	// to wait for the project's ops lock.
	beforeOpsLock func()
	// beforeQuotaCount runs when a quota-bound change is about to take
	// the quota lock and count.
	beforeQuotaCount func()
}

// background runs f in the Service's own goroutine group, on a context
// that Close cancels; after Close it runs nothing.
func (s *core) background(f func(ctx context.Context)) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return
	}
	s.bg.Go(func() { f(s.bgCtx) })
}

// openOn opens the project on a compute unless it is open there already.
// st.ops must be held.
func (s *core) openOn(ctx context.Context, st *state, computeID string) error {
	st.mu.RLock()
	done := st.onComputes[computeID]
	ref := ProjectRef{ID: st.p.ID, Name: st.p.Name}
	st.mu.RUnlock()
	if done {
		return nil
	}
	if err := s.cfg.Computes.OpenProject(ctx, computeID, ref); err != nil {
		return err
	}
	st.change(func() {
		st.onComputes[computeID] = true
	})
	return nil
}

// nameTakenLocked says whether a project, or one being created, has
// name. s.mu must be held.
func (s *core) nameTakenLocked(name string) bool {
	for _, st := range s.projects {
		st.mu.RLock()
		same := st.p.Name == name
		st.mu.RUnlock()
		if same {
			return true
		}
	}
	for _, n := range s.creating {
		if n == name {
			return true
		}
	}
	return false
}

// lookup returns a project's state.
func (s *core) lookup(id string) (*state, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.projects[id]
	if !ok {
		return nil, projectNotFound(id)
	}
	return st, nil
}

// all returns every project, in creation order.
func (s *core) all() []Project {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Project, 0, len(s.order))
	for _, id := range s.order {
		st := s.projects[id]
		st.read(func() {
			out = append(out, st.p)
		})
	}
	return out
}

// project returns a copy of one project's fields.
func (s *core) project(id string) (Project, error) {
	st, err := s.lookup(id)
	if err != nil {
		return Project{}, err
	}
	return st.project(), nil
}

// opened returns the state of an opened project, for node and link work.
func (s *core) opened(id string) (*state, error) {
	st, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.p.Status != Opened {
		return nil, errNotOpened
	}
	return st, nil
}

// lockProject returns a project's state with st.ops held, for a change;
// the caller unlocks it. The project is looked up again once the lock is
// taken: a change that waited behind a delete must not act on the deleted
// project (a save would write its file back).
func (s *core) lockProject(id string) (*state, error) {
	return s.lockState(id, false)
}

// lockState is lockProject holding st.ops shared (the caller RUnlocks it)
// or exclusively.
func (s *core) lockState(id string, shared bool) (*state, error) {
	for {
		st, err := s.lookup(id)
		if err != nil {
			return nil, err
		}
		if s.hooks.beforeOpsLock != nil {
			s.hooks.beforeOpsLock()
		}
		lock, unlock := st.ops.Lock, func() { st.ops.Unlock() } // nothing held: no error
		if shared {
			lock, unlock = st.ops.RLock, st.ops.RUnlock
		}
		lock()
		now, err := s.lookup(id)
		if err == nil && now == st {
			return st, nil
		}
		unlock()
		if err != nil {
			return nil, err
		}
		// Deleted and made again under the same id meanwhile: take the new one.
	}
}

// lockOpened is lockProject for a change that needs the project opened. It
// checks once the lock is taken: a close that held it first must not be
// undone by a change that was waiting (a node started in a closed project
// would open it on its compute again).
func (s *core) lockOpened(id string) (*state, error) {
	st, err := s.lockProject(id)
	if err != nil {
		return nil, err
	}
	if st.project().Status != Opened {
		st.ops.Unlock()
		return nil, errNotOpened
	}
	return st, nil
}

// lockLifecycle is lockOpened for a lifecycle operation on one node: it
// holds st.ops shared and the node's lifecycle lock, so that operations on
// other nodes run meanwhile and every other change waits. The caller calls
// the returned unlock.
func (s *core) lockLifecycle(projectID, nodeID string) (*state, func(), error) {
	st, err := s.lockState(projectID, true)
	if err != nil {
		return nil, nil, err
	}
	if st.project().Status != Opened {
		st.ops.RUnlock()
		return nil, nil, errNotOpened
	}
	st.lifeMu.Lock()
	m := st.lifecycle[nodeID]
	if m == nil {
		m = new(sync.Mutex)
		st.lifecycle[nodeID] = m
	}
	st.lifeMu.Unlock()
	m.Lock()
	return st, func() { m.Unlock(); st.ops.RUnlock() }, nil
}

// closeOn closes project id on each of computes, logging (with msg) those
// that fail: the project is closed on the controller either way.
func (s *core) closeOn(ctx context.Context, id string, computes []string, msg string) {
	for _, c := range computes {
		if err := s.cfg.Computes.CloseProject(ctx, c, id); err != nil {
			s.log.Warn(msg, "project", id, "compute", c, "err", err)
		}
	}
}

// emitLocked sends ev about st's project. st.ops must be held: see emit.
func (s *core) emitLocked(st *state, ev Event) {
	ev.ProjectID = st.project().ID
	st.ops.emit(ev, s.cfg.Events.Emit)
}

// deleteFromCompute deletes a node on its compute; an inert node is on
// none, and a node its compute does not know is gone already.
func (s *core) deleteFromCompute(ctx context.Context, n Node) error {
	if n.Inert {
		return nil
	}
	if err := s.cfg.Computes.DeleteNode(ctx, n.ComputeID, n.ProjectID, n.ID); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// emitLog announces, after the change it explains, why something happened
// by itself. st.ops must be held: see emit.
func (s *core) emitLog(st *state, msg string) { s.emitLogAt(st, LogWarning, msg) }

// emitLogAt is emitLog with the log action: LogWarning or LogInfo.
func (s *core) emitLogAt(st *state, action, msg string) {
	st.mu.RLock()
	id := st.p.ID
	st.mu.RUnlock()
	st.ops.emit(Event{Action: action, ProjectID: id, Message: msg}, s.cfg.Events.Emit)
}

// mayRun says whether a node type can be asked of a compute: labtap must
// know the type, and the compute must run it, as far as it has said. A
// compute that has never answered has said nothing: the call is made, and
// fails with the reason it cannot be reached.
func (s *core) mayRun(computeID, nodeType string) bool {
	if kindOf(nodeType) == nil {
		return false
	}
	types := s.cfg.Computes.NodeTypes(computeID)
	return len(types) == 0 || slices.Contains(types, nodeType)
}
