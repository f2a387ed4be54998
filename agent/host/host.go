// Package host is an agent's state and the operations its API performs:
// the projects it has open, the nodes it runs (emulator processes such as
// VPCS, and the cloud, hub and switch nodes it implements itself, see
// builtin.go), the relays of the links between their ports with each link's
// filters, and the captures of those links.
//
// The state has owners, one file each: the Host (host.go) is the registry
// of open projects and what is agent-wide (Info, State, Statistics,
// Metrics, console access); a call on one project (byproject.go) is
// handed to its *project (projects.go: the locks), whose nodes (nodes.go),
// links (link.go) and tunnel ports (tunnels.go) it owns, or to one node.
// The parts with a job of their own are reached by name: Captures,
// Filters, Events, Images, Consoles. Node programs are built by
// runnerKinds (runners.go, qemu.go, docker.go); the Docker Engine and
// QEMU are probed in their runner packages (docker.Probe, node.QemuRuns).
//
// Every method is safe for concurrent use and reports failures as
// *proto.Error, whose code the API turns into an HTTP status.
package host

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/imagesum"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/proto"
)

// RunnerEnv is what a RunnerFactory gets to build a node.
type RunnerEnv struct {
	// ProjectID is the node's project.
	ProjectID string
	Spec      proto.NodeSpec
	// Dir is the node's working directory (created by the runner as needed).
	Dir string
	// Ports are where the node must send the frames of each adapter: the
	// agent's UDP address facing adapter i (port 0) is Ports[i]. A node
	// without adapters in its spec (VPCS) has one.
	Ports []netip.AddrPort
	// Agent is Ports[0], for runners with one port.
	Agent netip.AddrPort
	// OnStop must be called each time the node stops, asked to or not.
	OnStop func()
	Logger *slog.Logger
}

// RunnerFactory builds the runner of one node.
type RunnerFactory func(ctx context.Context, env RunnerEnv) (node.Runner, error)

// The optional interfaces below are what a runner may add to node.Runner;
// the host asks for them with a type assertion.

// RelayPorter is a runner that supplies its own relay port per adapter
// (e.g. the host end of a veth read with AF_PACKET) instead of the UDP
// socket the host opens for it. RelayPorts is called once, after the
// factory returns; entry i serves adapter i, and a nil entry keeps the
// host's UDP socket for that adapter. The runner closes its ports.
type RelayPorter interface {
	RelayPorts() []bridge.Port
}

// PropertyReporter is a runner whose node has type-specific properties:
// what it reports (container_id, mac_address, ...) is returned in
// proto.NodeState.Properties.
type PropertyReporter interface {
	Properties() map[string]any
}

// Updater is a runner whose node can take a changed spec in place: a node
// PUT's changed properties, or new adapters. The host has already checked
// that the adapters it removes carry no link; Update refuses (a
// *proto.Error) what it cannot change now, e.g. while running.
type Updater interface {
	// Update takes the new spec; ports are the agent's UDP addresses
	// facing each of its adapters, as RunnerEnv.Ports.
	Update(ctx context.Context, spec proto.NodeSpec, ports []netip.AddrPort) error
}

// Config configures a Host. Zero values give a working agent with the real
// node runners.
type Config struct {
	// ComputeID is the name the controller knows this agent by.
	ComputeID string
	// DataDir holds projects/<project_id>/project-files/...
	DataDir string
	// ConsoleHost is the address reported for node consoles.
	ConsoleHost string
	// ConsolePorts, when set, is the range [lo, hi] node consoles take
	// their ports from (a container publishes it to its host).
	ConsolePorts [2]int
	// ConsoleBind is the address node consoles listen on: where the agent's
	// own API listens, so consoles are no more exposed than the API. Empty
	// means 127.0.0.1.
	ConsoleBind string
	// VPCS is the vpcs executable, a name looked up in PATH or a path.
	VPCS string
	// ProtectedPorts are TCP ports node consoles may not rlogin to: the
	// agent's API (server.Run adds it) and, for the local agent, the
	// controller's.
	ProtectedPorts []int
	// Runners builds nodes by node type; nil means the real runners.
	Runners map[string]RunnerFactory
	// SoftwareVersion is reported in AgentInfo.
	SoftwareVersion string
	// TunnelBind is the address the agent's ends of tunnels to other agents
	// are bound to: the address other agents reach this one at. Empty
	// means ConsoleBind, or 127.0.0.1 when that is a wildcard.
	TunnelBind string
	// SocketBuffer sizes the receive and send buffers of every UDP socket
	// of the relay; zero means bridge.DefaultBufferBytes. Larger buffers
	// ride out longer scheduling stalls on a busy host without loss; the
	// kernel caps them at net.core.rmem_max/wmem_max unless the agent runs
	// as root.
	SocketBuffer int
	// NoUDPGRO turns off receiving GSO runs in one piece (UDP_GRO) on the
	// relay's sockets; for measuring what it saves.
	NoUDPGRO bool
	// BufferedCaptures writes captures through the page cache even where
	// the file system allows direct I/O (captures.Options.BufferedIO).
	BufferedCaptures bool
	// CaptureBudget bounds the bytes of every project's capture files
	// on this agent: past it the oldest stopped files are removed, and a
	// new capture is refused while running ones alone hold it. 0: none.
	CaptureBudget int64
	// QemuAccel is the accelerator of QEMU nodes: "auto" (the default: KVM
	// where it passes its self-test, else TCG with a warning; see
	// KVMProblem), "kvm" or "tcg".
	QemuAccel string
	// NoDocker turns docker nodes off even where a Docker Engine answers.
	NoDocker bool
	// DockerInit is the static init given to containers (bin/labtap-init);
	// empty looks for labtap-init next to the executable.
	DockerInit string
	// CloudAllowUplink lets a cloud's ethernet port take the agent's own
	// uplink (--cloud-allow-uplink): the interface of a default route or
	// of one of AgentAddrs. Without it such a port is refused.
	CloudAllowUplink bool
	// AgentAddrs are the addresses the agent listens and is reached at:
	// the interfaces holding them are its uplink.
	AgentAddrs []netip.Addr
	// DockerUnsafe lets docker nodes run privileged or with
	// capabilities outside dockerpolicy.Allowed (--docker-allow-unsafe): such
	// a node can take the host. Each start of one is logged as a warning.
	DockerUnsafe bool
	// FilterDeadline bounds the compiling of a link's bpf filter; 0 means
	// pcapfilter.DefaultDeadline.
	FilterDeadline time.Duration
	// ImageHashes sets up the md5 sums of images (imagesum.Config: how
	// many are hashed at once, the largest file hashed).
	ImageHashes imagesum.Config
	// ImageListWait is how long an images listing waits for sums not
	// known yet before answering them empty; 0 means DefaultImageListWait.
	ImageListWait time.Duration
	// Sandbox confines node programs (VPCS, QEMU and its helpers): they run
	// as users of their own and reach only their node's folder. Nil runs
	// them unconfined (with a scrubbed environment); agents set one.
	Sandbox *sandbox.Sandbox
	// ConsolesGated starts the agent with its node consoles closed to
	// every client address the controller has not granted
	// (node.ConsoleGate); otherwise they are open until the controller
	// closes them (SetConsoleAccess).
	ConsolesGated bool
	Logger        *slog.Logger
}

// Host is an agent's state. Make one with New and end it with Close.
type Host struct {
	cfg     Config
	log     *slog.Logger
	runners map[string]RunnerFactory

	ctx    context.Context // lifetime of the relay goroutines
	cancel context.CancelFunc

	ifaces ifaceClaims // host interfaces clouds' ethernet ports hold

	relay *sockets // the relay's UDP sockets and their receive loops
	// carriers are the goroutines that set NICs' carriers (carrier.request).
	carriers sync.WaitGroup

	// probeQemu: the qemu runner is the real one, listed in node_types only
	// where QEMU runs.
	probeQemu bool

	load loadSampler

	kinds *runnerKinds // the vpcs, qemu and docker runners, and the Docker Engine

	tunnelAddr netip.Addr // where reserved tunnel ports are bound

	projects projectTable // see projects.go for the locks and their order

	// The parts with a job of their own, each reached by name. They share
	// the project table (and its locks) with the Host; none holds the Host.

	// Filters compiles the bpf programs of link and capture filters.
	Filters *Filters
	// Images serves the images folders and the QEMU wizard's facts.
	Images *Images
	// Events is what the controller follows (see events.go).
	Events *Events
	// Captures runs the captures of links.
	Captures *Captures
	// Consoles lets client addresses in to node consoles.
	Consoles *node.ConsoleGate

	hooks hooks // tests open race windows with them

	// shared is what every project uses of the above, handed to each.
	shared *agentParts
}

// agentParts are the agent-wide parts a project works with: the relay's
// sockets, the node runners, the captures, filters and events, the host
// interfaces clouds hold. The Host owns them and gives every project the
// same agentParts; a project never holds the Host.
type agentParts struct {
	cfg        *Config
	log        *slog.Logger
	runners    map[string]RunnerFactory
	relay      *sockets
	carriers   *sync.WaitGroup // the goroutines that set NICs' carriers
	tunnelAddr netip.Addr
	ifaces     *ifaceClaims
	filters    *Filters
	captures   *Captures
	events     *Events
	consoles   *node.ConsoleGate
	hooks      *hooks
}

// hooks are called at points where tests need to act.
type hooks struct {
	closing   func() // before a capture's files are closed, no lock held
	nameBusy  func() // a capture waits for the close of files of its name
	naming    func() // a new capture reads the captures folder to name its files
	repairing func() // an opening project repairs a capture a crash left
	// ringMade runs in Captures.Start once the capture's files exist, before
	// the capture is published (c.tap set); began at the start of a ring's
	// new-file hook.
	ringMade, began func()
	creating        func(name string)    // a ring is about to create its file name
	marking         func(name string)    // a capture file's .writing mark is about to be made (markWriting)
	sync            func(*os.File) error // makes a new capture file, or its folder, durable (captures.Options.Sync); nil: fsync
	resolving       func()               // a tunnel's remote host name is about to be looked up
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
		projects: projectTable{open: make(map[string]*project), closing: make(map[string]*project)},
	}
	h.relay = &sockets{ctx: ctx, bufferBytes: cfg.SocketBuffer, noGRO: cfg.NoUDPGRO, log: cfg.Logger}
	h.Filters = &Filters{ctx: ctx, deadline: cfg.FilterDeadline, log: cfg.Logger}
	h.Events = &Events{}
	h.Consoles = node.NewConsoleGate(cfg.ConsolesGated)
	h.Captures = &Captures{projects: &h.projects, filters: h.Filters, events: h.Events, log: cfg.Logger,
		buffered: cfg.BufferedCaptures, pool: captures.DefaultPool(), hooks: &h.hooks, dataDir: cfg.DataDir}
	h.Captures.retention.budget = cfg.CaptureBudget
	// A project's own budget may come with any capture's start.
	h.Captures.wg.Go(func() { h.Captures.sweepLoop(ctx.Done()) })
	sums := cfg.ImageHashes
	if sums.Logger == nil {
		sums.Logger = cfg.Logger
	}
	h.Images = &Images{dataDir: cfg.DataDir, log: cfg.Logger, sums: imagesum.New(sums), listWait: cfg.ImageListWait, sandbox: cfg.Sandbox}
	h.tunnelAddr = tunnelAddr(cfg)
	h.kinds = newRunnerKinds(&h.cfg, h.Consoles, h.Images, h.Events)
	h.runners = cfg.Runners
	if h.runners == nil {
		h.runners = h.kinds.factories()
		h.probeQemu = true
	}
	_, h.kinds.dockerNodes = h.runners["docker"]
	h.shared = &agentParts{cfg: &h.cfg, log: h.log, runners: h.runners, relay: h.relay, carriers: &h.carriers,
		tunnelAddr: h.tunnelAddr, ifaces: &h.ifaces, filters: h.Filters, captures: h.Captures, events: h.Events,
		consoles: h.Consoles, hooks: &h.hooks}
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
	var types []string
	for _, t := range []string{TypeCloud, TypeHub, TypeSwitch, "vpcs", TypeQemu} { // GNS3's order, of the types we run
		if t == TypeQemu && h.probeQemu && !node.QemuRuns() {
			continue // listed only where a qemu-system binary runs
		}
		if _, ok := h.runners[t]; ok || builtin(t) {
			types = append(types, t)
		}
	}
	var unavailable map[string]string
	if _, ok := h.runners["docker"]; ok {
		if why := h.DockerUnavailable(); why == "" {
			types = append(types, "docker") // last, as in GNS3's list
		} else {
			unavailable = map[string]string{"docker": why}
		}
	}
	cpu, mem := h.load.sample()
	return proto.AgentInfo{
		ComputeID:       h.cfg.ComputeID,
		ProtocolVersion: proto.Version,
		SoftwareVersion: h.cfg.SoftwareVersion,
		Platform:        runtime.GOOS,
		NodeTypes:       types,
		Unavailable:     unavailable,
		CPUPercent:      cpu,
		MemoryPercent:   mem,
		Capacity:        capacity(&h.cfg, h.projects.openProjects(), slices.Contains(types, TypeQemu)),
	}
}

// OpenProject makes a project known to the agent; opening an open project
// does nothing. Captures a crash left unfinished are repaired and stale
// containers removed before any call on the project proceeds, with no lock
// held that calls on other projects need.
func (h *Host) OpenProject(spec proto.ProjectSpec) error {
	if err := checkID("project", spec.ProjectID); err != nil {
		return err
	}
	for {
		h.projects.mu.Lock()
		if h.projects.closed {
			h.projects.mu.Unlock()
			return proto.Errorf(proto.CodeUnavailable, "agent is shutting down")
		}
		if p, ok := h.projects.open[spec.ProjectID]; ok {
			h.projects.mu.Unlock()
			<-p.opened
			p.mu.Lock()
			p.name = spec.Name
			p.mu.Unlock()
			return nil
		}
		if old, ok := h.projects.closing[spec.ProjectID]; ok {
			h.projects.mu.Unlock()
			<-old.gone // its captures are still being closed
			continue
		}
		p := newProject(h.shared, spec)
		h.projects.open[spec.ProjectID] = p
		h.projects.mu.Unlock()
		h.Captures.repairCaptures(p)
		// Before any node of the project is created again.
		h.kinds.cleanDocker(spec.ProjectID)
		close(p.opened)
		h.log.Info("project opened", "project", spec.ProjectID)
		return nil
	}
}

// CloseProject stops everything the project runs on this agent and forgets
// it: captures end (their files stay valid), relays stop, nodes stop. Its
// files stay on disk. Closing an unknown project does nothing.
func (h *Host) CloseProject(ctx context.Context, projectID string) error {
	h.projects.mu.Lock()
	p, ok := h.projects.open[projectID]
	if ok {
		delete(h.projects.open, projectID)
		h.projects.closing[projectID] = p
	}
	h.projects.mu.Unlock()
	if !ok {
		return nil
	}
	<-p.opened
	p.mu.Lock()
	p.closed = true
	var capturing []*hostCapture
	for _, l := range p.links {
		if c := p.removeLinkLocked(l); c != nil {
			capturing = append(capturing, c)
		}
	}
	p.releaseAllLocked()
	nodes := slices.Collect(maps.Values(p.nodes))
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range capturing {
		wg.Go(func() { h.Captures.closeCapture(p, c) })
	}
	wg.Wait()
	stopNodes(ctx, nodes, h.log)
	h.kinds.removeContainers(projectID)
	p.caps.nameMu.Lock()
	if p.caps.root != nil {
		p.caps.root.Close()
		p.caps.folder.Close()
	}
	p.caps.nameMu.Unlock()
	h.projects.mu.Lock()
	delete(h.projects.closing, projectID)
	h.projects.mu.Unlock()
	close(p.gone)
	h.log.Info("project closed", "project", projectID)
	return nil
}

// Close ends the agent: it closes every project, then waits for all its
// goroutines. It is safe to call twice.
func (h *Host) Close() error {
	h.projects.mu.Lock()
	h.projects.closed = true
	ids := slices.Collect(maps.Keys(h.projects.open))
	h.projects.mu.Unlock()
	for _, id := range ids {
		h.CloseProject(context.Background(), id)
	}
	h.Events.closeAll()
	h.cancel()
	h.Captures.wg.Wait()
	h.relay.wg.Wait()
	h.carriers.Wait()
	return nil
}

// asProtoError keeps a *proto.Error as it is and gives any other error the
// code def, keeping its message.
func asProtoError(err error, def proto.Code) error {
	if pe, ok := errors.AsType[*proto.Error](err); ok {
		return pe
	}
	return &proto.Error{Code: def, Message: err.Error()}
}
