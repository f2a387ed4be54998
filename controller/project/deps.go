package project

import (
	"context"
	"errors"
	"github.com/labtap/labtap/capspec"
	"io"
	"sync"
)

// Computes runs nodes and links on compute agents. *compute.Agents
// satisfies it. Errors from an agent match this package's sentinels
// (ErrNotFound, ErrConflict, ...) and carry the agent's message.
type Computes interface {
	// Exists reports whether a compute is registered.
	Exists(computeID string) bool
	// NodeTypes lists the node types a compute runs.
	NodeTypes(computeID string) []string
	OpenProject(ctx context.Context, computeID string, p ProjectRef) error
	CloseProject(ctx context.Context, computeID, projectID string) error
	CreateNode(ctx context.Context, computeID, projectID string, n NodeSpec) (NodeRuntime, error)
	SetNodeStatus(ctx context.Context, computeID, projectID, nodeID, status string) (NodeRuntime, error)
	// Node reports a node as the compute runs it now.
	Node(ctx context.Context, computeID, projectID, nodeID string) (NodeRuntime, error)
	DeleteNode(ctx context.Context, computeID, projectID, nodeID string) error
	PutLink(ctx context.Context, computeID, projectID string, w Wiring) error
	// CheckFilters has a compute compile bpf filter expressions for a data
	// link type, as PutLink would, without applying them; the compute
	// keeps the programs for the PutLink that follows.
	CheckFilters(ctx context.Context, computeID, dataLinkType string, bpf []string) error
	DeleteLink(ctx context.Context, computeID, projectID, linkID string) error
	// StartCapture starts a capture of spec (its FileName set) and
	// returns its state; StopCapture returns the final state.
	StartCapture(ctx context.Context, computeID, projectID, linkID string, spec capspec.Spec) (capspec.State, error)
	StopCapture(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error)
	// CaptureState reports a running capture: its counts now.
	CaptureState(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error)
	// CaptureStream streams a running capture file from its first byte
	// until the capture stops. The caller closes it.
	CaptureStream(ctx context.Context, computeID, projectID, linkID string) (io.ReadCloser, error)
	// CaptureFile returns the file a running capture writes as it is now
	// (up to its last whole record). The caller closes its Body.
	CaptureFile(ctx context.Context, computeID, projectID, linkID string) (CaptureFile, error)
	// ReserveTunnelPort has a compute bind and hold a UDP port for one end
	// of a tunnel; the same reservation id gets the same port.
	ReserveTunnelPort(ctx context.Context, computeID, projectID, id string) (int, error)
	// ReleaseTunnelPort frees a reservation no link took.
	ReleaseTunnelPort(ctx context.Context, computeID, projectID, id string) error
	// TunnelHost is the address other computes send a compute's tunnel
	// traffic to.
	TunnelHost(computeID string) string
	// NodeFile reads a file of a node's directory (name relative to it);
	// WriteNodeFile replaces one. The compute keeps paths inside.
	NodeFile(ctx context.Context, computeID, projectID, nodeID, name string) ([]byte, error)
	WriteNodeFile(ctx context.Context, computeID, projectID, nodeID, name string, data []byte) error
	// ResetConsole disconnects every client of a node's console.
	ResetConsole(ctx context.Context, computeID, projectID, nodeID string) error
}

// CaptureFileStore is what a Computes adds to serve the capture files of
// projects from whichever compute holds them. *compute.Agents satisfies
// it.
type CaptureFileStore interface {
	// CaptureFiles lists a project's capture files on every compute that
	// answers, each with its ComputeID.
	CaptureFiles(ctx context.Context, projectID string) []capspec.FileInfo
	// OpenCaptureFile returns a capture file by name (a running one up to
	// its last whole record). The caller closes its Body.
	OpenCaptureFile(ctx context.Context, computeID, projectID, name string) (CaptureFile, error)
	// DeleteCaptureFile removes a stopped capture file.
	DeleteCaptureFile(ctx context.Context, computeID, projectID, name string) error
}

// ProjectRef names a project to a compute.
type ProjectRef struct {
	ID, Name string
}

// NodeSpec is what a compute needs to create a node.
type NodeSpec struct {
	ID, Type, Name string
	MACIndex       int
	// Ports configures a cloud, hub or switch (its ports_mapping).
	Ports []PortSpec
	// Properties are a node with adapters' properties (docker, qemu): all
	// of them on creation, the changed ones on an update.
	Properties map[string]any
	// Adapters are a node with adapters' network adapters; link endpoint
	// (adapter i, port 0) is Adapters[i].
	Adapters []Adapter
	// Variables are the project's variables, for a node with adapters
	// whose compute substitutes them (a docker node's environment).
	Variables []Variable
}

// Variable is one of a project's variables (GNS3's project "variables":
// name and value).
type Variable struct {
	Name, Value string
}

// NodeRuntime is what a compute reports of a node.
type NodeRuntime struct {
	Status        string
	Console       int
	ConsoleHost   string
	ConsoleType   string
	CommandLine   string
	NodeDirectory string
	// Properties are what the compute computed of a node with adapters
	// (mac_address, container_id, ...), merged into the node's.
	Properties map[string]any
}

// MACScheme is the MAC address arithmetic shared with computes
// (proto.AdapterMACs); a Computes that implements it gives the
// ports of nodes with adapters their MAC addresses. *compute.Agents does.
type MACScheme interface {
	// AdapterMACs returns the MACs of adapters 0..count-1: base plus n,
	// base "" being the node type's default derived from the node id.
	AdapterMACs(nodeType, nodeID, base string, count int) ([]string, error)
}

// Wiring is the relay of a link on one compute.
type Wiring struct {
	LinkID  string
	A, B    WireEnd
	Filters ActiveFilters
	// Suspend drops every frame; the filters stay configured.
	Suspend bool
	// DataLinkType is the link's DLT_ name, for compiling BPF filters.
	DataLinkType string
}

// WireEnd is one end of a relay: a node port on that compute, or a tunnel.
type WireEnd struct {
	NodeID        string
	Adapter, Port int
	// Name labels the end's frames, e.g. "PC1 Ethernet0".
	Name string
	// Tunnel, when set, makes this end a UDP tunnel to another compute.
	Tunnel *TunnelEnd
}

// TunnelEnd is a tunnel end: frames leave from LocalPort (a reserved port)
// to RemoteHost:RemotePort and are heard only from there.
type TunnelEnd struct {
	LocalPort  int
	RemoteHost string
	RemotePort int
}

// Snapshot is a project as stored: its settings, nodes, links and
// drawings, in creation order.
type Snapshot struct {
	Project  Project
	Nodes    []Node
	Links    []Link
	Drawings []Drawing
}

// Store keeps projects across restarts.
type Store interface {
	// Save writes a project atomically: after a crash at any moment the
	// stored project is either the previous one or this one.
	Save(s *Snapshot) error
	// Remove deletes a project's directory, and nothing outside it.
	Remove(p *Project) error
	// Load reads one project as it is stored now.
	Load(p *Project) (*Snapshot, error)
	// LoadAll reads every stored project; those that cannot be read are
	// reported and skipped.
	LoadAll() ([]*Snapshot, []error)
}

// Event actions on the project and controller notification streams.
const (
	NodeCreated = "node.created"
	NodeUpdated = "node.updated"
	NodeDeleted = "node.deleted"
	LinkCreated = "link.created"
	LinkUpdated = "link.updated"
	LinkDeleted = "link.deleted"

	ProjectCreated = "project.created"
	ProjectUpdated = "project.updated"
	ProjectOpened  = "project.opened"
	ProjectClosed  = "project.closed"
	ProjectDeleted = "project.deleted"

	// LogWarning tells a project's listeners, in words, something that
	// happened by itself (GNS3 clients show it in their log pane).
	LogWarning = "log.warning"
	// LogInfo tells them something that happened as asked, later: a
	// capture that stopped at its limit, a long operation (an archive's)
	// that ended (the GNS3 GUI prints it in its console).
	LogInfo = "log.info"
	// LogError tells them something that failed after it was asked: a
	// change whose save did not reach the disk.
	LogError = "log.error"
)

// Event is something that happened to a project. Exactly one of Node,
// Link, Project, Drawing and Message is set: Message for the log.* actions.
type Event struct {
	Action    string
	ProjectID string
	Node      *Node
	Link      *Link
	Project   *Project
	Drawing   *Drawing
	Template  *Template
	// OmitSVG leaves the drawing's SVG out of a drawing.updated that did
	// not change it (GNS3).
	OmitSVG bool
	Message string
	// Snapshot is snapshot.restored's.
	Snapshot *SnapshotInfo
}

// Emitter receives events, in the order they happened within a project.
// Emit must not block.
type Emitter interface {
	Emit(Event)
}

// MemoryStore is a Store that keeps the last saved snapshot of each project
// in memory. It is for tests and for running without a disk.
type MemoryStore struct {
	mu    sync.Mutex
	saved map[string]*Snapshot
}

// Save keeps s.
func (m *MemoryStore) Save(s *Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saved == nil {
		m.saved = make(map[string]*Snapshot)
	}
	m.saved[s.Project.ID] = s
	return nil
}

// Remove forgets a project.
func (m *MemoryStore) Remove(p *Project) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.saved, p.ID)
	return nil
}

// Load returns the last snapshot saved for a project.
func (m *MemoryStore) Load(p *Project) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap, ok := m.saved[p.ID]
	if !ok {
		return nil, errors.New("project not stored")
	}
	return snap, nil
}

// LoadAll returns every saved snapshot.
func (m *MemoryStore) LoadAll() ([]*Snapshot, []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Snapshot
	for _, s := range m.saved {
		out = append(out, s)
	}
	return out, nil
}

// Saved returns the last snapshot saved for a project, nil if none.
func (m *MemoryStore) Saved(id string) *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saved[id]
}
