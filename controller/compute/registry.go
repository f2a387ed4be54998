package compute

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// Compute is a registered agent as GNS3 clients see it, plus how the
// controller reaches it.
type Compute struct {
	ID       string
	Name     string
	Protocol string // "http" or "https"
	Host     string
	Port     int
	User     string // "" is null; the password is never shown
	// URL and Secret reach the agent's API. For the embedded local agent
	// they differ from Host and Port, which name the controller itself.
	URL    string
	Secret string

	Connected     bool
	CPUPercent    *float64 // nil until the agent reports
	MemoryPercent *float64
	Platform      string
	NodeTypes     []string
	LastError     string // "" is null
}

// Registry holds the computes and carries out project.Computes on them.
// It is safe for concurrent use.
type Registry struct {
	client *Client
	log    *slog.Logger

	mu       sync.RWMutex // guards computes and order
	computes map[string]*Compute
	order    []string
}

// NewRegistry returns an empty Registry.
func NewRegistry(client *Client, log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{client: client, log: log, computes: make(map[string]*Compute)}
}

// Add registers a compute, replacing one with the same id, and checks it
// once so its state is known when Add returns.
func (r *Registry) Add(ctx context.Context, c Compute) Compute {
	r.mu.Lock()
	if _, ok := r.computes[c.ID]; !ok {
		r.order = append(r.order, c.ID)
	}
	cp := c
	r.computes[c.ID] = &cp
	r.mu.Unlock()
	r.check(ctx, c.ID)
	got, _ := r.Get(c.ID)
	return got
}

// List returns every compute, in registration order.
func (r *Registry) List() []Compute {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Compute, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, *r.computes[id])
	}
	return out
}

// Get returns one compute.
func (r *Registry) Get(id string) (Compute, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.computes[id]
	if !ok {
		return Compute{}, false
	}
	return *c, true
}

// Exists reports whether a compute is registered.
func (r *Registry) Exists(id string) bool {
	_, ok := r.Get(id)
	return ok
}

// NodeTypes lists the node types a compute runs, as it last reported.
func (r *Registry) NodeTypes(id string) []string {
	c, _ := r.Get(id)
	return c.NodeTypes
}

// Run checks every compute's health every interval until ctx is done.
func (r *Registry) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, c := range r.List() {
			r.check(ctx, c.ID)
		}
	}
}

// check asks a compute for its info and records the answer.
func (r *Registry) check(ctx context.Context, id string) {
	t, err := r.target(id)
	if err != nil {
		return
	}
	var info proto.AgentInfo
	err = r.client.call(ctx, t, "GET", proto.InfoPath, nil, &info)
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.computes[id]
	if !ok {
		return
	}
	if err != nil {
		if c.Connected {
			r.log.Warn("compute lost", "compute", id, "err", err)
		}
		c.Connected, c.CPUPercent, c.MemoryPercent, c.LastError = false, nil, nil, err.Error()
		return
	}
	if !c.Connected {
		r.log.Info("compute connected", "compute", id, "version", info.SoftwareVersion)
	}
	cpu, mem := info.CPUPercent, info.MemoryPercent
	c.Connected, c.CPUPercent, c.MemoryPercent, c.LastError = true, &cpu, &mem, ""
	c.Platform, c.NodeTypes = info.Platform, slices.Clone(info.NodeTypes)
}

func (r *Registry) target(id string) (target, error) {
	c, ok := r.Get(id)
	if !ok {
		return target{}, &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	return target{id: c.ID, url: c.URL, secret: c.Secret}, nil
}

// do calls an agent by compute id.
func (r *Registry) do(ctx context.Context, computeID, method, path string, in, out any) error {
	t, err := r.target(computeID)
	if err != nil {
		return err
	}
	return r.client.call(ctx, t, method, path, in, out)
}

// OpenProject opens a project on a compute.
func (r *Registry) OpenProject(ctx context.Context, computeID string, p project.ProjectRef) error {
	return r.do(ctx, computeID, "PUT", proto.ProjectPath(p.ID), proto.ProjectSpec{ProjectID: p.ID, Name: p.Name}, nil)
}

// CloseProject closes a project on a compute.
func (r *Registry) CloseProject(ctx context.Context, computeID, projectID string) error {
	return r.do(ctx, computeID, "DELETE", proto.ProjectPath(projectID), nil, nil)
}

// CreateNode creates a node on a compute.
func (r *Registry) CreateNode(ctx context.Context, computeID, projectID string, n project.NodeSpec) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := r.do(ctx, computeID, "PUT", proto.NodePath(projectID, n.ID),
		proto.NodeSpec{NodeID: n.ID, NodeType: n.Type, Name: n.Name, MACIndex: n.MACIndex}, &st)
	return runtimeOf(st), err
}

// SetNodeStatus starts or stops a node on a compute.
func (r *Registry) SetNodeStatus(ctx context.Context, computeID, projectID, nodeID, status string) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := r.do(ctx, computeID, "PUT", proto.NodeStatusPath(projectID, nodeID), proto.NodeStatusSpec{Status: status}, &st)
	return runtimeOf(st), err
}

// DeleteNode deletes a node on a compute.
func (r *Registry) DeleteNode(ctx context.Context, computeID, projectID, nodeID string) error {
	return r.do(ctx, computeID, "DELETE", proto.NodePath(projectID, nodeID), nil, nil)
}

func runtimeOf(st proto.NodeState) project.NodeRuntime {
	return project.NodeRuntime{
		Status: st.Status, Console: st.Console, ConsoleHost: st.ConsoleHost, ConsoleType: st.ConsoleType,
		CommandLine: st.CommandLine, NodeDirectory: st.NodeDirectory,
	}
}

// PutLink sets up or updates a link's relay on a compute.
func (r *Registry) PutLink(ctx context.Context, computeID, projectID string, w project.Wiring) error {
	end := func(e project.WireEnd) proto.Endpoint {
		return proto.Endpoint{NodeID: e.NodeID, Adapter: e.Adapter, Port: e.Port, Name: e.Name}
	}
	spec := proto.LinkSpec{LinkID: w.LinkID, A: end(w.A), B: end(w.B), Suspend: w.Suspend}
	return r.do(ctx, computeID, "PUT", proto.LinkPath(projectID, w.LinkID), spec, nil)
}

// DeleteLink removes a link's relay on a compute.
func (r *Registry) DeleteLink(ctx context.Context, computeID, projectID, linkID string) error {
	return r.do(ctx, computeID, "DELETE", proto.LinkPath(projectID, linkID), nil, nil)
}

// StartCapture starts a capture on a compute's relay of a link.
func (r *Registry) StartCapture(ctx context.Context, computeID, projectID, linkID string, c project.CaptureRequest) (project.CaptureResult, error) {
	var st proto.CaptureState
	err := r.do(ctx, computeID, "PUT", proto.CapturePath(projectID, linkID),
		proto.CaptureSpec{FileName: c.FileName, DataLinkType: c.DataLinkType}, &st)
	return project.CaptureResult{FilePath: st.FilePath}, err
}

// StopCapture stops a capture on a compute.
func (r *Registry) StopCapture(ctx context.Context, computeID, projectID, linkID string) error {
	return r.do(ctx, computeID, "DELETE", proto.CapturePath(projectID, linkID), nil, nil)
}

// CaptureStream streams a running capture from a compute.
func (r *Registry) CaptureStream(ctx context.Context, computeID, projectID, linkID string) (io.ReadCloser, error) {
	t, err := r.target(computeID)
	if err != nil {
		return nil, err
	}
	return r.client.stream(ctx, t, proto.CaptureStreamPath(projectID, linkID))
}

var _ project.Computes = (*Registry)(nil)
