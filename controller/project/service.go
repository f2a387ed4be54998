package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/labtap/labtap/controller/archive"
)

// SymbolSizes tells a symbol's width and height in pixels.
type SymbolSizes func(symbolID string) (width, height int)

// Config configures a Service.
type Config struct {
	// ProjectsDir holds one directory per project (<ProjectsDir>/<id>).
	ProjectsDir string
	Computes    Computes
	// Store saves projects; nil keeps them in memory only.
	Store Store
	// Events receives what happens; nil discards it.
	Events Emitter
	// TemplatesFile keeps user templates (Service.LoadTemplates reads
	// it); "" keeps them in memory only.
	TemplatesFile string
	// Symbols sizes node symbols; nil uses 65×59, the default computer icon.
	Symbols SymbolSizes
	// ImagesDir is the local compute's images folder (<data>/images, QEMU
	// images in its QEMU/): exports with include_images read the images
	// of the local compute's QEMU nodes there, imports install an
	// archive's images/QEMU/ there. "" exports and installs none.
	ImagesDir string
	// ArchiveLimits bound what an import or a snapshot restore unpacks;
	// zero members are archive.DefaultLimits'.
	ArchiveLimits archive.Limits
	Logger        *slog.Logger
}

// Service carries out every operation on projects, nodes and links. It is
// safe for concurrent use. Changes to one project are serialised (one at a
// time, compute calls included), so checks and effects never interleave;
// starting, stopping, suspending and reloading nodes are the exception:
// those of different nodes run at once (one at a time per node), and
// exclude every other change. Reads never wait for a change in progress.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.RWMutex // guards projects and order
	projects map[string]*state
	order    []string // creation order of project ids

	archiving sync.Map // project id → an archive operation runs (archive.go)
	templates templateStore

	// Work a request starts and does not wait for (a project's
	// auto-start) runs in bg, on bgCtx, and Close waits for it.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgClosed, and bg.Go against Close's Wait
	bgClosed bool

	hooks hooks // tests open race windows with them
}

// hooks are called at points where tests need to act; nil ones are not.
type hooks struct {
	// beforeOpsLock runs when a change has found its project and is about
	// to wait for the project's ops lock.
	beforeOpsLock func()
}

// state is one project and everything in it.
type state struct {
	// ops serialises changes, held across compute calls: exclusively by
	// a change, shared by node lifecycle operations (start, stop, suspend,
	// reload), which also hold their node's entry of lifecycle.
	ops opsLock

	lifeMu    sync.Mutex             // guards lifecycle
	lifecycle map[string]*sync.Mutex // node id → held by its lifecycle operation

	// saveMu makes a save's snapshot and its write one step, so that of
	// two saves under a shared ops the later snapshot is written last.
	saveMu sync.Mutex

	mu        genRWMutex // guards the fields below; counts their changes
	p         Project
	nodes     map[string]*Node
	nodeOrder []string
	links     map[string]*Link
	linkOrder []string
	// drawings are kept in creation order; a project has few.
	drawings []Drawing
	// onComputes are the computes the project is open on, so a node
	// creation does not reopen it each time. Reset when the project closes.
	onComputes map[string]bool

	// rendered holds, by link id, the link's last rendering for a GET
	// (see RenderedLink); an entry is good while its generation is mu's.
	rendered sync.Map
}

type discardEvents struct{}

func (discardEvents) Emit(Event) {}

// NewService returns a Service with no projects.
func NewService(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == nil {
		cfg.Store = &MemoryStore{}
	}
	if cfg.Events == nil {
		cfg.Events = discardEvents{}
	}
	if cfg.Symbols == nil {
		cfg.Symbols = func(string) (int, int) { return 65, 59 }
	}
	s := &Service{cfg: cfg, log: cfg.Logger, projects: make(map[string]*state), templates: templateStore{path: cfg.TemplatesFile}}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s
}

// background runs f in the Service's own goroutine group, on a context
// that Close cancels; after Close it runs nothing.
func (s *Service) background(f func(ctx context.Context)) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return
	}
	s.bg.Go(func() { f(s.bgCtx) })
}

// Close cancels the work requests left running in the background (a
// project's auto-start) and waits for it to end. Projects stay as they
// are. It is safe to call more than once.
func (s *Service) Close() {
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	s.bgCancel()
	s.bg.Wait()
}

func newState(p Project) *state {
	return &state{p: p, nodes: make(map[string]*Node), links: make(map[string]*Link), onComputes: make(map[string]bool),
		lifecycle: make(map[string]*sync.Mutex)}
}

// openOn opens the project on a compute unless it is open there already.
// st.ops must be held.
func (s *Service) openOn(ctx context.Context, st *state, computeID string) error {
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

// lookup returns a project's state.
func (s *Service) lookup(id string) (*state, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.projects[id]
	if !ok {
		return nil, projectNotFound(id)
	}
	return st, nil
}

// opened returns the state of an opened project, for node and link work.
func (s *Service) opened(id string) (*state, error) {
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
func (s *Service) lockProject(id string) (*state, error) {
	return s.lockState(id, false)
}

// lockState is lockProject holding st.ops shared (the caller RUnlocks it)
// or exclusively.
func (s *Service) lockState(id string, shared bool) (*state, error) {
	for {
		st, err := s.lookup(id)
		if err != nil {
			return nil, err
		}
		if s.hooks.beforeOpsLock != nil {
			s.hooks.beforeOpsLock()
		}
		lock, unlock := st.ops.Lock, st.ops.Unlock
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
func (s *Service) lockOpened(id string) (*state, error) {
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
func (s *Service) lockLifecycle(projectID, nodeID string) (*state, func(), error) {
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

// forgetLifecycle drops a deleted node's lifecycle lock. st.ops must be
// held exclusively: no lifecycle operation holds or waits for it then.
func (st *state) forgetLifecycle(nodeID string) {
	st.lifeMu.Lock()
	delete(st.lifecycle, nodeID)
	st.lifeMu.Unlock()
}

// read runs f with the project's fields (what st.mu guards) held for
// reading. It never waits for a change's compute calls or disk writes:
// changes hold st.mu only while they write memory (change).
func (st *state) read(f func()) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	f()
}

// change runs f with the project's fields held for writing. f writes
// memory only: no compute call, no disk, no event, so reads wait for
// nothing slow.
func (st *state) change(f func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f()
}

// project returns a copy of the project's fields.
func (st *state) project() Project {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.p
}

// Projects returns every project, in creation order.
func (s *Service) Projects() []Project {
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

// Project returns one project.
func (s *Service) Project(id string) (Project, error) {
	st, err := s.lookup(id)
	if err != nil {
		return Project{}, err
	}
	return st.project(), nil
}

// ProjectCreate is a request to create a project.
type ProjectCreate struct {
	ID       string // "" picks a new one
	Name     string
	Path     string // "" is <ProjectsDir>/<id>
	Settings Settings
}

// CreateProject creates an opened project and writes its file. Creating a
// project whose id exists returns that project unchanged (GNS3 does so).
func (s *Service) CreateProject(ctx context.Context, req ProjectCreate) (Project, error) {
	if req.Name == "" {
		return Project{}, errorf(ErrInvalid, "Project name cannot be empty")
	}
	if err := CheckName("Project name", req.Name); err != nil {
		return Project{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.ID != "" {
		if st, ok := s.projects[req.ID]; ok {
			st.mu.RLock()
			defer st.mu.RUnlock()
			return st.p, nil
		}
	} else {
		req.ID = uuid.NewString()
	}
	for _, st := range s.projects {
		if st.p.Name == req.Name {
			return Project{}, errorf(ErrConflict, "Project \"%s\" already exists", req.Name)
		}
	}
	path, err := s.projectPath(req.ID, req.Path)
	if err != nil {
		return Project{}, err
	}
	p := Project{
		ID:       req.ID,
		Name:     req.Name,
		Path:     path,
		Filename: fileName(req.Name),
		Status:   Opened,
		Settings: req.Settings,
	}
	_, statErr := os.Stat(path)
	made := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return Project{}, &Error{Kind: ErrInternal, Msg: fmt.Sprintf("Could not create project directory: %v", err), Err: err}
	}
	if err := s.cfg.Store.Save(&Snapshot{Project: p}); err != nil {
		if made {
			// A refused create leaves nothing behind.
			os.RemoveAll(path)
		}
		return Project{}, &Error{Kind: ErrConflict, Msg: fmt.Sprintf("Could not write project file: %v", err), Err: err}
	}
	s.projects[p.ID] = newState(p)
	s.order = append(s.order, p.ID)
	s.cfg.Events.Emit(Event{Action: ProjectCreated, ProjectID: p.ID, Project: &p})
	s.log.Info("project created", "project", p.ID, "name", p.Name)
	return p, nil
}

// projectPath returns the absolute directory of a new project: the one
// asked for, which must be inside the projects directory (GNS3 without
// --local), or <ProjectsDir>/<id>.
func (s *Service) projectPath(id, asked string) (string, error) {
	root, err := filepath.Abs(s.cfg.ProjectsDir)
	if err != nil {
		return "", &Error{Kind: ErrInternal, Msg: err.Error(), Err: err}
	}
	if asked == "" {
		return filepath.Join(root, id), nil
	}
	if strings.Contains(asked, `"`) {
		return "", errorf(ErrForbidden, "You are not allowed to use \" in the project directory path. Not supported by Dynamips.")
	}
	path, err := filepath.Abs(asked)
	if err != nil || !within(root, path) || path == root {
		return "", errorf(ErrForbidden, "The path is not allowed")
	}
	if _, err := os.Stat(path); err == nil {
		return "", errorf(ErrForbidden, "The path %s already exist.", asked)
	}
	return path, nil
}

// within reports whether path is dir or inside it, comparing cleaned
// absolute paths component by component, never as plain string prefixes
// (GNS3's check lets "<dir>-evil" and "<dir>/../victim" through).
func within(dir, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	if err != nil {
		return false
	}
	return rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// fileName derives a project's file name from its name with every path
// separator removed, so the file always lands in the project directory.
func fileName(name string) string {
	base := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return -1
		}
		return r
	}, name)
	base = strings.TrimLeft(base, ".")
	if base == "" {
		base = "project"
	}
	// Within the 255 bytes a file name may have, with room for the
	// temporary name it is written under (atomicfile), cut at a character.
	for len(base) > MaxNameBytes-len(".gns3")-32 {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	return base + ".gns3"
}

// DeleteProject closes a project on its computes, removes its directory
// (only if it is inside the projects directory) and forgets it.
func (s *Service) DeleteProject(ctx context.Context, id string) error {
	st, err := s.lockProject(id)
	if err != nil {
		return err
	}
	defer st.ops.Unlock()
	st.mu.RLock()
	p := st.p
	computes := st.openComputesLocked()
	st.mu.RUnlock()
	// Refused before anything happens: a project that cannot be deleted
	// stays open on its computes.
	root, _ := filepath.Abs(s.cfg.ProjectsDir)
	if !within(root, p.Path) || filepath.Clean(p.Path) == filepath.Clean(root) {
		return errorf(ErrConflict, "Project '%s' cannot be deleted because it is not in the default project directory: '%s'", p.Name, root)
	}
	s.closeOn(ctx, id, computes, "close project on compute")
	if err := s.cfg.Store.Remove(&p); err != nil {
		return &Error{Kind: ErrConflict, Msg: fmt.Sprintf("Cannot delete project directory %s: %v", p.Path, err), Err: err}
	}
	s.mu.Lock()
	delete(s.projects, id)
	s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	s.mu.Unlock()
	s.cfg.Events.Emit(Event{Action: ProjectDeleted, ProjectID: id, Project: &p})
	s.log.Info("project deleted", "project", id)
	return nil
}

// closeOn closes project id on each of computes, logging (with msg) those
// that fail: the project is closed on the controller either way.
func (s *Service) closeOn(ctx context.Context, id string, computes []string, msg string) {
	for _, c := range computes {
		if err := s.cfg.Computes.CloseProject(ctx, c, id); err != nil {
			s.log.Warn(msg, "project", id, "compute", c, "err", err)
		}
	}
}

// computesLocked lists the computes the project's nodes run on. st.mu must
// be held.
func (st *state) computesLocked() []string {
	var out []string
	for _, id := range st.nodeOrder {
		if c := st.nodes[id].ComputeID; !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// openComputesLocked lists the computes the project is open on, and those
// its nodes are on. st.mu must be held.
func (st *state) openComputesLocked() []string {
	out := st.computesLocked()
	for c := range st.onComputes {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// snapshotLocked copies the project for the Store. st.mu must be held.
func (st *state) snapshotLocked() *Snapshot {
	snap := &Snapshot{Project: st.p, Nodes: make([]Node, 0, len(st.nodeOrder)), Links: make([]Link, 0, len(st.linkOrder))}
	for _, id := range st.nodeOrder {
		snap.Nodes = append(snap.Nodes, *st.nodes[id])
	}
	for _, id := range st.linkOrder {
		snap.Links = append(snap.Links, *st.links[id])
	}
	snap.Drawings = slices.Clone(st.drawings)
	return snap
}

// emit sends an event about a project. st.ops must be held, so that events
// leave in the order things happened (shared, with the node's lifecycle
// lock, orders the events of one node).
func (s *Service) emit(st *state, action string, n *Node, l *Link) {
	ev := Event{Action: action, Node: n, Link: l}
	st.read(func() {
		ev.ProjectID = st.p.ID
	})
	s.cfg.Events.Emit(ev)
}

// isNotFound reports an error a compute gives for something it does not
// know, which removals tolerate.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
