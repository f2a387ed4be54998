package host

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/labtap/labtap/proto"
)

// The agent's state is split by owner, each part behind its own lock that
// guards only that part and is never held across disk I/O, a capture's
// close, a process wait, a host name lookup or a Docker Engine or QMP
// call:
//
//   - projectTable.mu: which projects are open;
//   - project.mu: one project's topology: its nodes, its links and the
//     node ports they use (each node's port list), its tunnel reservations;
//   - projectCaptures.mu: one project's captures: which runs on each link,
//     which file names are taken, whether each is done;
//   - projectCaptures.nameMu: the naming of a new capture, which reads the
//     captures folder; only Captures.Start waits on it.
//
// Locks are taken in the order nameMu, project.mu, projectCaptures.mu (each
// optional); projectTable.mu is never held with another.
//
// One lock is held across slow work on purpose: hostNode.ops serialises
// one node's start, stop, suspend, update and removal, and is held across
// the runner's call (seconds for a VM or a container). Only calls on that
// node wait for it; it is taken before project.mu, never while holding it.
// The Host's parts keep leaf locks, held with no other and never across
// slow work: Filters' cache (not held while compiling), Events' followers,
// a docker node's runner (dockerRunner.mu) and each port's carrier. The
// Docker Engine is connected to once (docker.Probe): the first calls
// that need it wait for that, up to its 3 s timeout.

// projectTable is the projects the agent has open.
type projectTable struct {
	mu      sync.Mutex
	open    map[string]*project
	closing map[string]*project // closed, their teardown under way: an open of the same id waits for it
	closed  bool                // the agent is ending: no project opens
}

// project is one open project: its topology, behind its own lock, and the
// calls on it (nodes.go, link.go, tunnels.go).
type project struct {
	id, dir string
	ag      *agentParts // the agent-wide parts it works with
	// opened is closed once the project is ready: crash leftovers
	// repaired and stale containers removed. Calls on the project wait
	// for it, so none sees it half-opened.
	opened chan struct{}
	// gone is closed once CloseProject has stopped everything the
	// project ran: its id may be opened again.
	gone chan struct{}
	caps projectCaptures

	mu       sync.Mutex // guards what follows, and nodePort.link of the project's nodes
	name     string
	closed   bool // taken out of the table: calls fail as for a project not open
	nodes    map[string]*hostNode
	links    map[string]*hostLink
	reserved map[string]*reservation // tunnel ports held for links across agents
}

// projectCaptures is one project's captures.
type projectCaptures struct {
	// nameMu serialises the naming of new captures and guards root: the
	// folder is read under it, and only Captures.Start waits for it.
	nameMu sync.Mutex
	dir    string   // the captures folder
	root   *os.Root // opened on first use
	folder *os.File // the same folder, opened with root: new files' syncs of it (captures.Options.Dir)

	mu sync.Mutex // guards what follows and every capture's done
	// closing holds the captures, by file name, whose files are open:
	// running, or being closed. A new capture of such a name waits.
	closing map[string]*hostCapture
	// byLink is the running or last capture of each link.
	byLink map[string]*hostCapture
}

func newProject(ag *agentParts, spec proto.ProjectSpec) *project {
	dir := filepath.Join(ag.cfg.DataDir, "projects", spec.ProjectID)
	return &project{
		id:       spec.ProjectID,
		dir:      dir,
		ag:       ag,
		opened:   make(chan struct{}),
		gone:     make(chan struct{}),
		name:     spec.Name,
		nodes:    make(map[string]*hostNode),
		links:    make(map[string]*hostLink),
		reserved: make(map[string]*reservation),
		caps: projectCaptures{
			dir:     filepath.Join(dir, "project-files", "captures"),
			closing: make(map[string]*hostCapture),
			byLink:  make(map[string]*hostCapture),
		},
	}
}

// rootLocked opens the captures folder, creating it. c.nameMu must be
// held.
func (c *projectCaptures) rootLocked() (*os.Root, error) {
	if c.root != nil {
		return c.root, nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("captures folder: %w", err)
	}
	// The folder's own name, and project-files', may be new: make them
	// durable once, so a capture's file synced in the folder is never
	// lost with the folder. Every later start finds root open.
	files := filepath.Dir(c.dir) // project-files, in the project's folder
	for _, d := range []string{files, filepath.Dir(files)} {
		if err := syncDir(d); err != nil {
			return nil, fmt.Errorf("captures folder: %w", err)
		}
	}
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return nil, fmt.Errorf("captures folder: %w", err)
	}
	folder, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("captures folder: %w", err)
	}
	c.root, c.folder = root, folder
	return root, nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// notOpen is the error of a call on a project the agent has not open.
func notOpen(id string) error {
	return proto.Errorf(proto.CodeNotFound, "project %s is not open on this agent", id)
}

// project returns an open project, once it is ready.
func (t *projectTable) project(id string) (*project, error) {
	t.mu.Lock()
	p, ok := t.open[id]
	t.mu.Unlock()
	if !ok {
		return nil, notOpen(id)
	}
	<-p.opened
	return p, nil
}

// lockProject returns an open project with p.mu held; the caller unlocks
// it.
func (t *projectTable) lockProject(id string) (*project, error) {
	p, err := t.project(id)
	if err != nil {
		return nil, err
	}
	if err := p.lock(); err != nil {
		return nil, err
	}
	return p, nil
}

// lock takes p.mu, unless the project was closed meanwhile; the caller
// unlocks it.
func (p *project) lock() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return notOpen(p.id)
	}
	return nil
}

// lockLink returns a link of the project with p.mu held; the caller
// unlocks it.
func (p *project) lockLink(linkID string) (*hostLink, error) {
	if err := p.lock(); err != nil {
		return nil, err
	}
	l, ok := p.links[linkID]
	if !ok {
		p.mu.Unlock()
		return nil, proto.Errorf(proto.CodeNotFound, "link %s does not exist on this agent", linkID)
	}
	return l, nil
}

// lockLink returns a link of an open project with p.mu held; the caller
// unlocks it.
func (t *projectTable) lockLink(projectID, linkID string) (*project, *hostLink, error) {
	p, err := t.project(projectID)
	if err != nil {
		return nil, nil, err
	}
	l, err := p.lockLink(linkID)
	if err != nil {
		return nil, nil, err
	}
	return p, l, nil
}

// node returns a node of an open project.
func (t *projectTable) node(projectID, nodeID string) (*hostNode, error) {
	p, err := t.project(projectID)
	if err != nil {
		return nil, err
	}
	return p.node(nodeID)
}

// openProjects lists the projects open now.
func (t *projectTable) openProjects() []*project {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*project, 0, len(t.open))
	for _, p := range t.open {
		out = append(out, p)
	}
	return out
}
