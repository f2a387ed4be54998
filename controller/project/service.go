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
	// TemplatesFile keeps user templates (Service.Templates.Load reads
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
	// DockerUnsafe is the embedded local agent's
	// --docker-allow-unsafe: docker nodes on the local compute may run
	// privileged or with capabilities outside dockerpolicy.Allowed. Other
	// computes' agents apply their own flag.
	DockerUnsafe bool
	// Quotas, when set, tells the quotas each change must keep (quota.go).
	Quotas Quotas
	Logger *slog.Logger
}

// Service carries out every operation on projects, nodes and links. It is
// safe for concurrent use. Changes to one project are serialised (one at a
// time, compute calls included), so checks and effects never interleave;
// starting, stopping, suspending and reloading nodes are the exception:
// those of different nodes run at once (one at a time per node), and
// exclude every other change. Reads never wait for a change in progress.
type Service struct {
	core *core

	Drawings  *Drawings
	Links     *Links
	Captures  *Captures
	Nodes     *Nodes
	Files     *Files
	Templates *Templates
	Reports   *Reports
	Archives  *Archives

	builder *builder
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
	// removed: the project's directory is deleted (guarded by saveMu), so
	// a save that failed to flush is not written again (durable).
	removed bool
	// lastSaved is the last snapshot the Store took (guarded by saveMu):
	// what a failed flush writes again (durable). Memory may hold more by
	// then, such as a change whose own save is about to fail and be undone.
	lastSaved *Snapshot

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
	c := &core{cfg: cfg, log: cfg.Logger, projects: make(map[string]*state), creating: make(map[string]string)}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	s := &Service{core: c}
	if cfg.Quotas != nil {
		s.SetQuotas(cfg.Quotas)
	}
	s.Drawings = &Drawings{core: c}
	s.Links = &Links{core: c}
	s.Captures = &Captures{core: c, links: s.Links}
	s.Nodes = &Nodes{core: c, links: s.Links, captures: s.Captures}
	s.Files = &Files{core: c, nodes: s.Nodes}
	s.builder = &builder{core: c, nodes: s.Nodes, links: s.Links}
	s.Archives = &Archives{core: c, builder: s.builder, drawings: s.Drawings}
	s.Reports = &Reports{core: c, nodes: s.Nodes, links: s.Links}
	s.Templates = &Templates{core: c, nodes: s.Nodes, store: templateStore{path: cfg.TemplatesFile}}
	return s
}

// Close cancels the work requests left running in the background (a
// project's auto-start) and waits for it to end. Projects stay as they
// are. It is safe to call more than once.
func (s *Service) Close() {
	s.core.bgMu.Lock()
	s.core.bgClosed = true
	s.core.bgMu.Unlock()
	s.core.bgCancel()
	s.core.bg.Wait()
}

func newState(p Project) *state {
	return &state{p: p, nodes: make(map[string]*Node), links: make(map[string]*Link), onComputes: make(map[string]bool),
		lifecycle: make(map[string]*sync.Mutex)}
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
func (s *Service) Projects() []Project { return s.core.all() }

// Project returns one project.
func (s *Service) Project(id string) (Project, error) { return s.core.project(id) }

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
	// The checks and the claim on the id and name are made under core.mu;
	// the directory and the first save are made outside it, since every
	// lookup of every project takes that lock and a disk may be slow.
	s.core.mu.Lock()
	if req.ID != "" {
		if st, ok := s.core.projects[req.ID]; ok {
			s.core.mu.Unlock()
			st.mu.RLock()
			defer st.mu.RUnlock()
			return st.p, nil
		}
		if _, ok := s.core.creating[req.ID]; ok {
			s.core.mu.Unlock()
			return Project{}, errorf(ErrConflict, "Project ID %s is being created", req.ID)
		}
	} else {
		req.ID = uuid.NewString()
	}
	if s.core.nameTakenLocked(req.Name) {
		s.core.mu.Unlock()
		return Project{}, errorf(ErrConflict, "Project \"%s\" already exists", req.Name)
	}
	path, err := s.projectPath(req.ID, req.Path)
	if err != nil {
		s.core.mu.Unlock()
		return Project{}, err
	}
	s.core.creating[req.ID] = req.Name
	s.core.mu.Unlock()
	p := Project{
		ID:       req.ID,
		Name:     req.Name,
		Path:     path,
		Filename: fileName(req.Name),
		Status:   Opened,
		Settings: req.Settings,
	}
	if err := s.makeProject(p); err != nil {
		s.core.mu.Lock()
		delete(s.core.creating, p.ID)
		s.core.mu.Unlock()
		return Project{}, err
	}
	s.core.mu.Lock()
	defer s.core.mu.Unlock()
	delete(s.core.creating, p.ID)
	s.core.projects[p.ID] = newState(p)
	s.core.order = append(s.core.order, p.ID)
	s.core.cfg.Events.Emit(Event{Action: ProjectCreated, ProjectID: p.ID, Project: &p})
	s.core.log.Info("project created", "project", p.ID, "name", p.Name)
	return p, nil
}

// makeProject makes a new project's directory and its first save; a
// refused create leaves nothing behind.
func (s *Service) makeProject(p Project) error {
	_, statErr := os.Stat(p.Path)
	made := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(p.Path, 0o755); err != nil {
		return &Error{Kind: ErrInternal, Msg: fmt.Sprintf("Could not create project directory: %v", err), Err: err}
	}
	if err := s.core.cfg.Store.Save(&Snapshot{Project: p}); err != nil {
		if made {
			os.RemoveAll(p.Path)
		}
		return writeFailed(err)
	}
	return nil
}

// projectPath returns the absolute directory of a new project: the one
// asked for, which must be inside the projects directory (GNS3 without
// --local), or <ProjectsDir>/<id>.
func (s *Service) projectPath(id, asked string) (string, error) {
	root, err := filepath.Abs(s.core.cfg.ProjectsDir)
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
func (s *Service) DeleteProject(ctx context.Context, id string) (err error) {
	st, err := s.core.lockProject(id)
	if err != nil {
		return err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	p := st.p
	computes := st.openComputesLocked()
	st.mu.RUnlock()
	// Refused before anything happens: a project that cannot be deleted
	// stays open on its computes.
	root, _ := filepath.Abs(s.core.cfg.ProjectsDir)
	if !within(root, p.Path) || filepath.Clean(p.Path) == filepath.Clean(root) {
		return errorf(ErrConflict, "Project '%s' cannot be deleted because it is not in the default project directory: '%s'", p.Name, root)
	}
	s.core.closeOn(ctx, id, computes, "close project on compute")
	st.saveMu.Lock()
	err = s.core.cfg.Store.Remove(&p)
	st.removed = err == nil
	st.saveMu.Unlock()
	if err != nil {
		return &Error{Kind: ErrConflict, Msg: fmt.Sprintf("Cannot delete project directory %s: %v", p.Path, err), Err: err}
	}
	s.core.mu.Lock()
	delete(s.core.projects, id)
	s.core.order = slices.DeleteFunc(s.core.order, func(x string) bool { return x == id })
	s.core.mu.Unlock()
	s.core.emitLocked(st, Event{Action: ProjectDeleted, Project: &p})
	s.core.log.Info("project deleted", "project", id)
	return nil
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
// lock, orders the events of one node); under an exclusive hold, the event
// leaves once the change is on disk (opsLock).
func (s *core) emit(st *state, action string, n *Node, l *Link) {
	ev := Event{Action: action, Node: n, Link: l}
	st.read(func() {
		ev.ProjectID = st.p.ID
	})
	st.ops.emit(ev, s.cfg.Events.Emit)
}

// isNotFound reports an error a compute gives for something it does not
// know, which removals tolerate.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
