// Package host is an agent's state and the operations its API performs:
// the projects it has open, the nodes it runs, the relays of the links
// between them, and the captures of those links.
//
// Every method is safe for concurrent use and reports failures as
// *proto.Error, whose code the API turns into an HTTP status.
package host

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// RunnerEnv is what a RunnerFactory gets to build a node.
type RunnerEnv struct {
	Spec proto.NodeSpec
	// Dir is the node's working directory (created by the runner as needed).
	Dir string
	// Agent is where the node must send the frames of its port 0/0.
	Agent netip.AddrPort
	// OnStop must be called each time the node stops, asked to or not.
	OnStop func()
	Logger *slog.Logger
}

// RunnerFactory builds the runner of one node.
type RunnerFactory func(ctx context.Context, env RunnerEnv) (node.Runner, error)

// Config configures a Host. Zero values give a working agent with the real
// node runners.
type Config struct {
	// ComputeID is the name the controller knows this agent by.
	ComputeID string
	// DataDir holds projects/<project_id>/project-files/...
	DataDir string
	// ConsoleHost is the address reported for node consoles.
	ConsoleHost string
	// ConsoleBind is the address node consoles listen on: where the agent's
	// own API listens, so consoles are no more exposed than the API. Empty
	// means 127.0.0.1.
	ConsoleBind string
	// VPCS is the vpcs executable, a name looked up in PATH or a path.
	VPCS string
	// Runners builds nodes by node type; nil means the real runners.
	Runners map[string]RunnerFactory
	// SoftwareVersion is reported in AgentInfo.
	SoftwareVersion string
	Logger          *slog.Logger
}

// Host is an agent's state. Make one with New and end it with Close.
type Host struct {
	cfg     Config
	log     *slog.Logger
	runners map[string]RunnerFactory

	ctx    context.Context // lifetime of the relay goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup // relay and capture goroutines

	vpcsOnce sync.Once
	vpcs     *node.VPCSProgram
	vpcsErr  error

	load loadSampler

	mu       sync.Mutex // guards projects and everything reachable from it, but node.ops
	projects map[string]*project
	closed   bool
}

type project struct {
	id, name, dir string
	captures      *os.Root // opened on first capture
	nodes         map[string]*hostNode
	links         map[string]*hostLink
}

type hostNode struct {
	spec   proto.NodeSpec
	dir    string
	runner node.Runner
	port   *bridge.UDPPort // the agent's socket facing port 0/0
	link   string          // the link using port 0/0, "" if none
	ops    sync.Mutex      // serialises start and stop
}

// New returns a Host. The data directory is created on first use.
func New(cfg Config) *Host {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ComputeID == "" {
		cfg.ComputeID = "local"
	}
	if cfg.VPCS == "" {
		cfg.VPCS = "vpcs"
	}
	if cfg.ConsoleBind == "" {
		cfg.ConsoleBind = "127.0.0.1"
	}
	if cfg.ConsoleHost == "" {
		cfg.ConsoleHost = cfg.ConsoleBind
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		cfg:      cfg,
		log:      cfg.Logger,
		ctx:      ctx,
		cancel:   cancel,
		projects: make(map[string]*project),
	}
	h.runners = cfg.Runners
	if h.runners == nil {
		h.runners = map[string]RunnerFactory{"vpcs": h.newVPCS}
	}
	return h
}

// uuidRE is the shape of project, node and link ids. Ids become directory
// names, so nothing else is accepted.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func checkID(kind, id string) error {
	if !uuidRE.MatchString(id) {
		return proto.Errorf(proto.CodeInvalid, "%s id %q is not a UUID", kind, id)
	}
	return nil
}

// Info describes the agent.
func (h *Host) Info() proto.AgentInfo {
	types := make([]string, 0, len(h.runners))
	for _, t := range []string{"vpcs"} { // GNS3's order, of the types we run
		if _, ok := h.runners[t]; ok {
			types = append(types, t)
		}
	}
	cpu, mem := h.load.sample()
	return proto.AgentInfo{
		ComputeID:       h.cfg.ComputeID,
		ProtocolVersion: proto.Version,
		SoftwareVersion: h.cfg.SoftwareVersion,
		Platform:        runtime.GOOS,
		NodeTypes:       types,
		CPUPercent:      cpu,
		MemoryPercent:   mem,
	}
}

// OpenProject makes a project known to the agent; opening an open project
// does nothing.
func (h *Host) OpenProject(spec proto.ProjectSpec) error {
	if err := checkID("project", spec.ProjectID); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return proto.Errorf(proto.CodeUnavailable, "agent is shutting down")
	}
	if p, ok := h.projects[spec.ProjectID]; ok {
		p.name = spec.Name
		return nil
	}
	h.projects[spec.ProjectID] = &project{
		id:    spec.ProjectID,
		name:  spec.Name,
		dir:   filepath.Join(h.cfg.DataDir, "projects", spec.ProjectID),
		nodes: make(map[string]*hostNode),
		links: make(map[string]*hostLink),
	}
	h.log.Info("project opened", "project", spec.ProjectID)
	return nil
}

// CloseProject stops everything the project runs on this agent and forgets
// it: captures end (their files stay valid), relays stop, nodes stop. Its
// files stay on disk. Closing an unknown project does nothing.
func (h *Host) CloseProject(ctx context.Context, projectID string) error {
	h.mu.Lock()
	p, ok := h.projects[projectID]
	if ok {
		delete(h.projects, projectID)
		for _, l := range p.links {
			h.removeLinkLocked(p, l)
		}
	}
	h.mu.Unlock()
	if !ok {
		return nil
	}
	h.stopNodes(ctx, p)
	if p.captures != nil {
		p.captures.Close()
	}
	h.log.Info("project closed", "project", projectID)
	return nil
}

// stopNodes stops every node of a project that is no longer in h.projects,
// and closes their ports.
func (h *Host) stopNodes(ctx context.Context, p *project) {
	var wg sync.WaitGroup
	for _, n := range p.nodes {
		wg.Go(func() {
			h.stopNode(ctx, n)
			n.port.Close()
		})
	}
	wg.Wait()
}

func (h *Host) stopNode(ctx context.Context, n *hostNode) {
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := n.runner.Stop(ctx); err != nil {
		h.log.Warn("stop node", "node", n.spec.NodeID, "err", err)
	}
}

// Close ends the agent: it closes every project, then waits for all its
// goroutines. It is safe to call twice.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	ids := make([]string, 0, len(h.projects))
	for id := range h.projects {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.CloseProject(context.Background(), id)
	}
	h.cancel()
	h.wg.Wait()
	return nil
}

// projectLocked returns an open project. h.mu must be held.
func (h *Host) projectLocked(id string) (*project, error) {
	p, ok := h.projects[id]
	if !ok {
		return nil, proto.Errorf(proto.CodeNotFound, "project %s is not open on this agent", id)
	}
	return p, nil
}

// goServe runs a port's receive loop until the port is closed or the host
// ends.
func (h *Host) goServe(p *bridge.UDPPort) {
	h.wg.Go(func() {
		if err := p.Serve(h.ctx); err != nil {
			h.log.Error("relay port failed", "port", p.LocalAddr(), "err", err)
		}
	})
}

// loopbackAny binds an agent socket that faces local emulators.
var loopbackAny = netip.MustParseAddrPort("127.0.0.1:0")

// CreateNode creates a node; creating an existing node returns it unchanged.
func (h *Host) CreateNode(ctx context.Context, projectID string, spec proto.NodeSpec) (proto.NodeState, error) {
	if err := checkID("node", spec.NodeID); err != nil {
		return proto.NodeState{}, err
	}
	factory, ok := h.runners[spec.NodeType]
	if !ok {
		return proto.NodeState{}, proto.Errorf(proto.CodeInvalid, "node type %q is not supported by this agent", spec.NodeType)
	}
	h.mu.Lock()
	p, err := h.projectLocked(projectID)
	if err != nil {
		h.mu.Unlock()
		return proto.NodeState{}, err
	}
	if n, ok := p.nodes[spec.NodeID]; ok {
		h.mu.Unlock()
		if n.spec.NodeType != spec.NodeType {
			return proto.NodeState{}, proto.Errorf(proto.CodeConflict, "node %s exists with type %s", spec.NodeID, n.spec.NodeType)
		}
		return h.nodeState(n), nil
	}
	h.mu.Unlock()

	port, err := bridge.ListenUDP(bridge.UDPConfig{Local: loopbackAny})
	if err != nil {
		return proto.NodeState{}, proto.Errorf(proto.CodeInternal, "node %s: %v", spec.NodeID, err)
	}
	n := &hostNode{
		spec: spec,
		dir:  filepath.Join(p.dir, "project-files", spec.NodeType, spec.NodeID),
		port: port,
	}
	runner, err := factory(ctx, RunnerEnv{
		Spec:   spec,
		Dir:    n.dir,
		Agent:  port.LocalAddr(),
		OnStop: func() { syncPeer(n) },
		Logger: h.log.With("node", spec.NodeID),
	})
	if err != nil {
		port.Close()
		return proto.NodeState{}, asProtoError(err, proto.CodeConflict)
	}
	n.runner = runner

	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.projects[projectID]; !ok || cur != p {
		port.Close()
		return proto.NodeState{}, proto.Errorf(proto.CodeNotFound, "project %s is not open on this agent", projectID)
	}
	if other, ok := p.nodes[spec.NodeID]; ok { // created concurrently
		port.Close()
		return h.nodeState(other), nil
	}
	p.nodes[spec.NodeID] = n
	h.goServe(port)
	return h.nodeState(n), nil
}

// syncPeer points the node's port at where the node receives its frames
// now: its NIC while it runs, nowhere while it is stopped. It is called
// after every start and stop, in any order, and always converges.
func syncPeer(n *hostNode) {
	if n.runner == nil {
		return
	}
	nic, _ := n.runner.NIC(0, 0) // invalid when stopped: frames are dropped
	n.port.SetPeer(nic)
}

func (h *Host) nodeState(n *hostNode) proto.NodeState {
	console, kind := n.runner.Console()
	return proto.NodeState{
		NodeID:        n.spec.NodeID,
		Status:        n.runner.Status(),
		Console:       console,
		ConsoleHost:   h.cfg.ConsoleHost,
		ConsoleType:   kind,
		CommandLine:   n.runner.CommandLine(),
		NodeDirectory: n.dir,
	}
}

func (h *Host) node(projectID, nodeID string) (*hostNode, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := h.projectLocked(projectID)
	if err != nil {
		return nil, err
	}
	n, ok := p.nodes[nodeID]
	if !ok {
		return nil, proto.Errorf(proto.CodeNotFound, "node %s does not exist on this agent", nodeID)
	}
	return n, nil
}

// Node returns a node's state.
func (h *Host) Node(projectID, nodeID string) (proto.NodeState, error) {
	n, err := h.node(projectID, nodeID)
	if err != nil {
		return proto.NodeState{}, err
	}
	return h.nodeState(n), nil
}

// SetNodeStatus starts or stops a node and returns its new state. Asking
// for the status a node already has succeeds and changes nothing.
func (h *Host) SetNodeStatus(ctx context.Context, projectID, nodeID, status string) (proto.NodeState, error) {
	n, err := h.node(projectID, nodeID)
	if err != nil {
		return proto.NodeState{}, err
	}
	switch status {
	case proto.StatusStarted:
		n.ops.Lock()
		err := n.runner.Start(ctx)
		syncPeer(n)
		n.ops.Unlock()
		if err != nil {
			return proto.NodeState{}, asProtoError(err, proto.CodeConflict)
		}
	case proto.StatusStopped:
		h.stopNode(ctx, n)
		syncPeer(n)
	default:
		return proto.NodeState{}, proto.Errorf(proto.CodeInvalid, "status %q: want %q or %q", status, proto.StatusStarted, proto.StatusStopped)
	}
	return h.nodeState(n), nil
}

// DeleteNode stops a node, removes the links on its ports and forgets it.
// Its directory stays. Deleting an unknown node does nothing.
func (h *Host) DeleteNode(ctx context.Context, projectID, nodeID string) error {
	h.mu.Lock()
	p, err := h.projectLocked(projectID)
	if err != nil {
		h.mu.Unlock()
		return err
	}
	n, ok := p.nodes[nodeID]
	if ok {
		if l, linked := p.links[n.link]; linked {
			h.removeLinkLocked(p, l)
		}
		delete(p.nodes, nodeID)
	}
	h.mu.Unlock()
	if !ok {
		return nil
	}
	h.stopNode(ctx, n)
	n.port.Close()
	return nil
}

func (h *Host) newVPCS(ctx context.Context, env RunnerEnv) (node.Runner, error) {
	h.vpcsOnce.Do(func() { h.vpcs, h.vpcsErr = node.FindVPCS(ctx, h.cfg.VPCS) })
	if h.vpcsErr != nil {
		return nil, h.vpcsErr
	}
	return node.NewVPCS(node.VPCSConfig{
		Program:     h.vpcs,
		Dir:         env.Dir,
		MACIndex:    env.Spec.MACIndex,
		Agent:       env.Agent,
		ConsoleHost: h.cfg.ConsoleBind,
		Logger:      env.Logger,
		OnStop:      env.OnStop,
	})
}

// asProtoError keeps a *proto.Error as it is and gives any other error the
// code def, keeping its message.
func asProtoError(err error, def proto.Code) error {
	if pe, ok := errors.AsType[*proto.Error](err); ok {
		return pe
	}
	return &proto.Error{Code: def, Message: err.Error()}
}
