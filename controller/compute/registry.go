package compute

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/atomicfile"
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
	User     string // "" is null
	Password string // kept for the compute; never shown
	// URL and Secret reach the agent's API. For the embedded local agent
	// they differ from Host and Port, which name the controller itself.
	URL    string
	Secret string
	// SharedSecret says the compute holds the controller-wide secret: it
	// proved it knows it (an agent that registered itself), or it was
	// asked for explicitly for a host the operator trusts. Otherwise
	// Secret is the compute's own password.
	SharedSecret bool

	Connected     bool
	CPUPercent    *float64 // nil until the agent reports
	MemoryPercent *float64
	Platform      string
	NodeTypes     []string
	// Unavailable names the node types the agent cannot run, and why.
	Unavailable map[string]string
	LastError   string // "" is null
}

// Registry holds the computes and carries out project.Computes on them.
// It is safe for concurrent use.
type Registry struct {
	client   *Client
	log      *slog.Logger
	path     string   // where the computes are saved; "" keeps them in memory
	secret   string   // the controller-wide secret, for computes that hold it
	trusted  []string // host patterns the secret may be sent to on request
	onChange func(action string, c Compute)

	saveMu sync.Mutex // serialises persist: the last save holds the newest list

	mu       sync.RWMutex // guards computes and order
	computes map[string]*Compute
	order    []string

	streams openStreams // capture streams open, per compute
}

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	Client *Client
	// Path is the file the computes (but the local one) are saved to; empty
	// keeps them in memory only.
	Path string
	// Secret is the controller-wide secret (LABTAP_SECRET, shared by the
	// controller and its agents). It is sent only to computes that hold
	// it (see Compute.SharedSecret and Grant).
	Secret string
	// TrustedAgents are host patterns (path.Match globs, or CIDR
	// prefixes) a compute added by hand may be given Secret for, when its
	// request asks for it. Empty: never.
	TrustedAgents []string
	// OnChange, if set, hears of every change of a compute:
	// "compute.created", "compute.updated" (every health report too, as in
	// GNS3) and "compute.deleted". It must not block.
	OnChange func(action string, c Compute)
	Logger   *slog.Logger
}

// NewRegistry returns an empty Registry.
func NewRegistry(cfg RegistryConfig) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(ClientConfig{Retries: DefaultRetries, Logger: cfg.Logger})
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func(string, Compute) {}
	}
	return &Registry{client: cfg.Client, log: cfg.Logger, path: cfg.Path, secret: cfg.Secret, trusted: cfg.TrustedAgents, onChange: cfg.OnChange, computes: make(map[string]*Compute)}
}

// Add registers a compute, replacing one with the same id, and checks it
// once so its state is known when Add returns.
func (r *Registry) Add(ctx context.Context, c Compute) Compute {
	r.put(c)
	r.check(ctx, c.ID)
	got, _ := r.Get(c.ID)
	return got
}

// put registers or replaces a compute, unchecked.
func (r *Registry) put(c Compute) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.computes[c.ID]; !ok {
		r.order = append(r.order, c.ID)
	}
	r.computes[c.ID] = &c
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

// check asks a compute for its info and records the answer.
func (r *Registry) check(ctx context.Context, id string) {
	t, err := r.target(id)
	if err != nil {
		return
	}
	var info proto.AgentInfo
	err = r.client.call(ctx, t, "GET", proto.InfoPath, nil, &info)
	r.mu.Lock()
	defer func() {
		c, ok := r.computes[id]
		var snapshot Compute
		if ok {
			snapshot = *c
		}
		r.mu.Unlock()
		if ok {
			r.onChange("compute.updated", snapshot)
		}
	}()
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
	c.Platform, c.NodeTypes, c.Unavailable = info.Platform, slices.Clone(info.NodeTypes), maps.Clone(info.Unavailable)
}

func (r *Registry) target(id string) (target, error) {
	c, ok := r.Get(id)
	if !ok {
		return target{}, &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	return target{id: c.ID, url: c.URL, secret: c.Secret, user: c.User, password: c.Password}, nil
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

// DockerImages lists the image tags of a compute's Docker Engine.
func (r *Registry) DockerImages(ctx context.Context, computeID string) ([]string, error) {
	var images []proto.DockerImage
	if err := r.do(ctx, computeID, "GET", proto.DockerImagesPath, nil, &images); err != nil {
		return nil, err
	}
	tags := make([]string, 0, len(images))
	for _, im := range images {
		tags = append(tags, im.Image)
	}
	return tags, nil
}

// CloseProject closes a project on a compute.
func (r *Registry) CloseProject(ctx context.Context, computeID, projectID string) error {
	return r.do(ctx, computeID, "DELETE", proto.ProjectPath(projectID), nil, nil)
}

// CreateNode creates a node on a compute.
func (r *Registry) CreateNode(ctx context.Context, computeID, projectID string, n project.NodeSpec) (project.NodeRuntime, error) {
	var st proto.NodeState
	spec := proto.NodeSpec{NodeID: n.ID, NodeType: n.Type, Name: n.Name, MACIndex: n.MACIndex}
	for _, p := range n.Ports {
		spec.Ports = append(spec.Ports, proto.PortMapping{
			Name: p.Name, Type: p.Type, VLAN: p.VLAN, LocalPort: p.LocalPort, RemoteHost: p.RemoteHost, RemotePort: p.RemotePort,
		})
	}
	for _, a := range n.Adapters {
		spec.Adapters = append(spec.Adapters, proto.AdapterSpec{MACAddress: a.MACAddress, PortName: a.Name, AdapterType: a.AdapterType})
	}
	for _, v := range n.Variables {
		spec.Variables = append(spec.Variables, proto.Variable{Name: v.Name, Value: v.Value})
	}
	if n.Properties != nil {
		raw, err := json.Marshal(n.Properties)
		if err != nil {
			return project.NodeRuntime{}, fmt.Errorf("node %s properties: %w", n.ID, err)
		}
		spec.Properties = raw
	}
	err := r.do(ctx, computeID, "PUT", proto.NodePath(projectID, n.ID), spec, &st)
	return runtimeOf(st), err
}

// AdapterMACs is proto.AdapterMACs: the controller's ports and the
// agents' NICs share one MAC arithmetic (project.MACScheme).
func (r *Registry) AdapterMACs(nodeType, nodeID, base string, count int) ([]string, error) {
	return proto.AdapterMACs(nodeType, nodeID, base, count)
}

// SetNodeStatus starts or stops a node on a compute.
func (r *Registry) SetNodeStatus(ctx context.Context, computeID, projectID, nodeID, status string) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := r.do(ctx, computeID, "PUT", proto.NodeStatusPath(projectID, nodeID), proto.NodeStatusSpec{Status: status}, &st)
	return runtimeOf(st), err
}

// Node reports a node as a compute runs it now.
func (r *Registry) Node(ctx context.Context, computeID, projectID, nodeID string) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := r.do(ctx, computeID, "GET", proto.NodePath(projectID, nodeID), nil, &st)
	return runtimeOf(st), err
}

// DeleteNode deletes a node on a compute.
func (r *Registry) DeleteNode(ctx context.Context, computeID, projectID, nodeID string) error {
	return r.do(ctx, computeID, "DELETE", proto.NodePath(projectID, nodeID), nil, nil)
}

func runtimeOf(st proto.NodeState) project.NodeRuntime {
	return project.NodeRuntime{
		Status: st.Status, Console: st.Console, ConsoleHost: st.ConsoleHost, ConsoleType: st.ConsoleType,
		CommandLine: st.CommandLine, NodeDirectory: st.NodeDirectory, Properties: st.Properties,
	}
}

// PutLink sets up or updates a link's relay on a compute.
func (r *Registry) PutLink(ctx context.Context, computeID, projectID string, w project.Wiring) error {
	end := func(e project.WireEnd) proto.Endpoint {
		ep := proto.Endpoint{NodeID: e.NodeID, Adapter: e.Adapter, Port: e.Port, Name: e.Name}
		if t := e.Tunnel; t != nil {
			ep.Tunnel = &proto.Tunnel{LocalPort: t.LocalPort, RemoteHost: t.RemoteHost, RemotePort: t.RemotePort}
		}
		return ep
	}
	f := w.Filters
	spec := proto.LinkSpec{
		LinkID: w.LinkID, A: end(w.A), B: end(w.B), Suspend: w.Suspend, DataLinkType: w.DataLinkType,
		Filters: proto.Filters{FrequencyDrop: f.FrequencyDrop, PacketLoss: f.PacketLoss, Corrupt: f.Corrupt, BPF: f.BPF},
	}
	if f.Delay != nil {
		spec.Filters.Delay = &proto.Delay{Latency: f.Delay[0], Jitter: f.Delay[1]}
	}
	return r.do(ctx, computeID, "PUT", proto.LinkPath(projectID, w.LinkID), spec, nil)
}

// CheckFilters has a compute compile bpf filter expressions (within its
// budget) without applying them.
func (r *Registry) CheckFilters(ctx context.Context, computeID, dataLinkType string, bpf []string) error {
	return r.do(ctx, computeID, "PUT", proto.FilterCheckPath, proto.FilterCheck{DataLinkType: dataLinkType, BPF: bpf}, nil)
}

// DeleteLink removes a link's relay on a compute.
func (r *Registry) DeleteLink(ctx context.Context, computeID, projectID, linkID string) error {
	return r.do(ctx, computeID, "DELETE", proto.LinkPath(projectID, linkID), nil, nil)
}

// StartCapture starts a capture on a compute's relay of a link.
func (r *Registry) StartCapture(ctx context.Context, computeID, projectID, linkID string, spec capspec.Spec) (capspec.State, error) {
	var st proto.CaptureState
	err := r.do(ctx, computeID, "PUT", proto.CapturePath(projectID, linkID), spec, &st)
	return st, err
}

// StopCapture stops a capture on a compute and returns its final state.
func (r *Registry) StopCapture(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error) {
	var st proto.CaptureState
	err := r.do(ctx, computeID, "DELETE", proto.CapturePath(projectID, linkID), nil, &st)
	return st, err
}

// CaptureState reports a running capture on a compute.
func (r *Registry) CaptureState(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error) {
	var st proto.CaptureState
	err := r.do(ctx, computeID, "GET", proto.CapturePath(projectID, linkID), nil, &st)
	return st, err
}

// CaptureStream streams a running capture from a compute.
func (r *Registry) CaptureStream(ctx context.Context, computeID, projectID, linkID string) (io.ReadCloser, error) {
	t, err := r.target(computeID)
	if err != nil {
		return nil, err
	}
	body, err := r.client.stream(ctx, t, proto.CaptureStreamPath(projectID, linkID))
	if err != nil {
		return nil, err
	}
	return r.streams.track(computeID, body), nil
}

// Metrics returns a compute's metrics, Prometheus's text format as the
// agent serves them at proto.MetricsPath, at most 16 MiB of them. The
// caller closes the reader.
func (r *Registry) Metrics(ctx context.Context, computeID string) (io.ReadCloser, error) {
	t, err := r.target(computeID)
	if err != nil {
		return nil, err
	}
	body, err := r.client.stream(ctx, t, proto.MetricsPath)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(body, 16<<20), body}, nil
}

// ReserveTunnelPort has a compute hold a UDP port for a tunnel end.
func (r *Registry) ReserveTunnelPort(ctx context.Context, computeID, projectID, id string) (int, error) {
	var tp proto.TunnelPort
	err := r.do(ctx, computeID, "PUT", proto.TunnelPortPath(projectID, id), nil, &tp)
	return tp.Port, err
}

// ReleaseTunnelPort frees a tunnel port no link took.
func (r *Registry) ReleaseTunnelPort(ctx context.Context, computeID, projectID, id string) error {
	return r.do(ctx, computeID, "DELETE", proto.TunnelPortPath(projectID, id), nil, nil)
}

// TunnelHost is the address other agents send a compute's tunnel traffic
// to: the host it was registered with (for the local compute, the address
// the controller advertises).
func (r *Registry) TunnelHost(computeID string) string {
	c, _ := r.Get(computeID)
	return c.Host
}

var _ project.Computes = (*Registry)(nil)

// Reserved compute ids: the controller's own compute and GNS3's VM.
const (
	LocalID = "local"
	VMID    = "vm"
)

// Grant is what a request that adds or moves a compute offers for the
// controller-wide secret.
type Grant struct {
	// Presented is the secret the caller sent (proto.SecretHeader): an
	// agent registering itself proves it knows the secret this way.
	Presented string
	// Ask is an explicit request to give the compute the controller's
	// secret; granted only for a host matching RegistryConfig.TrustedAgents.
	Ask bool
}

// grant decides whether a compute at host may hold the controller-wide
// secret.
func (r *Registry) grant(host string, g Grant) (bool, error) {
	if r.secret == "" {
		return false, nil
	}
	if g.Presented != "" {
		if subtle.ConstantTimeCompare([]byte(g.Presented), []byte(r.secret)) != 1 {
			return false, &project.Error{Kind: project.ErrForbidden, Msg: "Wrong shared secret (" + proto.SecretHeader + ")"}
		}
		return true, nil
	}
	if !g.Ask {
		return false, nil
	}
	if !HostTrusted(host, r.trusted) {
		return false, &project.Error{Kind: project.ErrForbidden,
			Msg: fmt.Sprintf("Host %q is not a trusted agent (--trusted-agents): the controller's secret is not sent there", host)}
	}
	return true, nil
}

// HostTrusted reports whether host matches one of patterns: a CIDR prefix
// (for an IP host) or a path.Match glob, compared without case.
func HostTrusted(host string, patterns []string) bool {
	ip := net.ParseIP(host)
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, n, err := net.ParseCIDR(p); err == nil {
			if ip != nil && n.Contains(ip) {
				return true
			}
			continue
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(host)); err == nil && ok {
			return true
		}
	}
	return false
}

// secretFor is what a compute is called with: the controller's secret if
// it holds it, else its own password.
func (r *Registry) secretFor(c Compute) string {
	if c.SharedSecret {
		return r.secret
	}
	return c.Password
}

// Create registers a new compute, saves the list and checks the compute
// once (a compute that cannot be reached is still registered, with
// connected false, as in GNS3). Creating a compute whose id exists returns
// the existing one unchanged, except that one which proves it knows the
// secret (an agent registering again) gets it.
func (r *Registry) Create(ctx context.Context, c Compute, g Grant) (Compute, error) {
	if existing, ok := r.Get(c.ID); ok {
		if g.Presented != "" && !existing.SharedSecret {
			shared, err := r.grant(existing.Host, Grant{Presented: g.Presented})
			if err != nil {
				return Compute{}, err
			}
			r.mu.Lock()
			if cur, ok := r.computes[c.ID]; ok && shared {
				cur.SharedSecret, cur.Secret = true, r.secret
			}
			r.mu.Unlock()
			if err := r.persist(); err != nil {
				return Compute{}, err
			}
		}
		r.check(ctx, c.ID)
		got, _ := r.Get(existing.ID)
		return got, nil
	}
	if c.ID == LocalID || c.ID == VMID || c.Name == "gns3vm" {
		return Compute{}, &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("Compute id %q and name \"gns3vm\" are reserved", c.ID)}
	}
	if err := checkCompute(c); err != nil {
		return Compute{}, err
	}
	if err := r.checkName(c.ID, c.Name); err != nil {
		return Compute{}, err
	}
	shared, err := r.grant(c.Host, g)
	if err != nil {
		return Compute{}, err
	}
	if c.URL == "" {
		c.URL = agentURL(c)
	}
	c.SharedSecret = shared
	c.Secret = r.secretFor(c)
	got := r.Add(ctx, c)
	if err := r.persist(); err != nil {
		r.Remove(c.ID)
		return Compute{}, err
	}
	r.onChange("compute.created", got)
	return got, nil
}

// checkCompute refuses a compute whose id or name is not a name
// (project.CheckName), whose host is neither an address nor a host name,
// or whose port is out of range.
func checkCompute(c Compute) error {
	if err := project.CheckName("Compute id", c.ID); err != nil {
		return err
	}
	if err := project.CheckName("Compute name", c.Name); err != nil {
		return err
	}
	if err := project.CheckHost("Compute host", c.Host); err != nil {
		return err
	}
	if c.Port < 1 || c.Port > 65535 {
		return &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("Compute port %d is out of range 1 to 65535", c.Port)}
	}
	return nil
}

// checkName refuses a name another compute has.
func (r *Registry) checkName(id, name string) error {
	for _, other := range r.List() {
		if other.ID != id && other.Name == name {
			return &project.Error{Kind: project.ErrConflict, Msg: fmt.Sprintf("Compute name \"%s\" already exists", name)}
		}
	}
	return nil
}

// ComputeUpdate changes a compute; nil members stay.
type ComputeUpdate struct {
	Name, Protocol, Host *string
	Port                 *int
	User, Password       *string
	// Grant is what the request offers for the secret: a compute that
	// holds the controller's secret keeps it at a new address only if the
	// request proves it or asks for a trusted host.
	Grant Grant
}

// Update changes a compute, saves the list and checks the compute again.
// The local compute is the controller itself: only its name can change.
func (r *Registry) Update(ctx context.Context, id string, u ComputeUpdate) (Compute, error) {
	cur, ok := r.Get(id)
	if !ok {
		return Compute{}, &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	next := cur
	if u.Name != nil {
		next.Name = *u.Name
	}
	if id == LocalID && (u.Protocol != nil && *u.Protocol != cur.Protocol || u.Host != nil && *u.Host != cur.Host || u.Port != nil && *u.Port != cur.Port) {
		return Compute{}, &project.Error{Kind: project.ErrConflict, Msg: "The local compute is the controller itself: its address cannot be changed"}
	}
	if u.Protocol != nil {
		next.Protocol = *u.Protocol
	}
	if u.Host != nil {
		next.Host = *u.Host
	}
	if u.Port != nil {
		next.Port = *u.Port
	}
	if u.User != nil {
		next.User = *u.User
	}
	if u.Password != nil {
		next.Password = *u.Password
	}
	if err := checkCompute(next); err != nil {
		return Compute{}, err
	}
	if err := r.checkName(id, next.Name); err != nil {
		return Compute{}, err
	}
	if id != LocalID {
		next.URL = agentURL(next)
		moved := next.URL != agentURL(cur)
		if moved || u.Grant.Presented != "" || u.Grant.Ask {
			shared, err := r.grant(next.Host, u.Grant)
			if err != nil {
				return Compute{}, err
			}
			// The secret follows a compute to a new address only when the
			// request vouches for it there.
			next.SharedSecret = shared || (cur.SharedSecret && !moved)
		}
		next.Secret = r.secretFor(next)
	}
	r.mu.Lock()
	if c, ok := r.computes[id]; ok {
		*c = next
	}
	r.mu.Unlock()
	if err := r.persist(); err != nil {
		return Compute{}, err
	}
	r.check(ctx, id)
	got, _ := r.Get(id)
	return got, nil
}

// Remove forgets a compute and saves the list. Removing an unknown compute
// does nothing.
func (r *Registry) Remove(id string) error {
	r.mu.Lock()
	c, ok := r.computes[id]
	delete(r.computes, id)
	r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == id })
	r.mu.Unlock()
	if !ok {
		return nil
	}
	r.onChange("compute.deleted", *c)
	return r.persist()
}

// agentURL is where an agent registered by host and port listens.
func agentURL(c Compute) string {
	proto := c.Protocol
	if proto == "" {
		proto = "http"
	}
	return proto + "://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// stored is a compute in the registry's file.
type stored struct {
	ID       string `json:"compute_id"`
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// SharedSecret: the compute holds the controller-wide secret.
	SharedSecret bool `json:"shared_secret,omitempty"`
}

// persist writes every compute but the local one to the registry's file,
// atomically, readable by its owner only (it holds passwords).
func (r *Registry) persist() error {
	if r.path == "" {
		return nil
	}
	// Two computes registering at once each save: without this lock the
	// older list could be renamed over the newer one.
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	var list []stored
	for _, c := range r.List() {
		if c.ID == LocalID {
			continue
		}
		list = append(list, stored{c.ID, c.Name, c.Protocol, c.Host, c.Port, c.User, c.Password, c.SharedSecret})
	}
	data, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(r.path, data, 0o600); err != nil {
		return fmt.Errorf("save computes: %w", err)
	}
	return nil
}

// Load registers the computes saved in the registry's file (at start-up)
// and checks each once.
func (r *Registry) Load(ctx context.Context) error {
	if r.path == "" {
		return nil
	}
	data, err := os.ReadFile(r.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var list []stored
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("read %s: %w", r.path, err)
	}
	// Checked all at once: start-up waits for the slowest unreachable
	// compute, not for the sum of their timeouts.
	var wg sync.WaitGroup
	for _, s := range list {
		c := Compute{ID: s.ID, Name: s.Name, Protocol: s.Protocol, Host: s.Host, Port: s.Port, User: s.User, Password: s.Password, SharedSecret: s.SharedSecret}
		c.URL, c.Secret = agentURL(c), r.secretFor(c)
		r.put(c)
		wg.Go(func() { r.check(ctx, c.ID) })
	}
	wg.Wait()
	return nil
}

// Running asks every connected compute what it still runs, for a
// controller that restarted (see project.Service.Adopt). Computes that do
// not answer are skipped: their projects open the ordinary way.
func (r *Registry) Running(ctx context.Context) []project.Running {
	var out []project.Running
	for _, c := range r.List() {
		if c.Connected {
			out = append(out, r.runningOn(ctx, c.ID)...)
		}
	}
	return out
}

// runningOn asks one compute what it runs; nil if it does not answer.
func (r *Registry) runningOn(ctx context.Context, id string) []project.Running {
	var st proto.AgentState
	if err := r.do(ctx, id, "GET", proto.StatePath, nil, &st); err != nil {
		r.log.Warn("ask a compute what it runs", "compute", id, "err", err)
		return nil
	}
	var out []project.Running
	for _, p := range st.Projects {
		run := project.Running{ComputeID: id, ProjectID: p.ProjectID}
		for _, l := range p.Links {
			rl := project.RunningLink{ID: l.LinkID}
			for _, ep := range []proto.Endpoint{l.Spec.A, l.Spec.B} {
				if t := ep.Tunnel; t != nil {
					rl.Tunnel = &project.TunnelEnd{LocalPort: t.LocalPort, RemoteHost: t.RemoteHost, RemotePort: t.RemotePort}
				}
			}
			if l.Capture != nil && l.Capture.Active {
				rl.Capture = l.Capture
			}
			run.Links = append(run.Links, rl)
		}
		out = append(out, run)
	}
	return out
}

// NodeFile reads a file of a node's directory on its compute.
func (r *Registry) NodeFile(ctx context.Context, computeID, projectID, nodeID, name string) ([]byte, error) {
	var f proto.NodeFile
	if err := r.do(ctx, computeID, "GET", proto.NodeFilePath(projectID, nodeID, name), nil, &f); err != nil {
		return nil, err
	}
	return f.Content, nil
}

// WriteNodeFile replaces a file of a node's directory on its compute.
func (r *Registry) WriteNodeFile(ctx context.Context, computeID, projectID, nodeID, name string, data []byte) error {
	return r.do(ctx, computeID, "PUT", proto.NodeFilePath(projectID, nodeID, name), proto.NodeFile{Content: data}, nil)
}

// CopyNodeDir copies a node's directory into another node's of the same
// project on the same compute (a duplicate).
func (r *Registry) CopyNodeDir(ctx context.Context, computeID, projectID, fromID, toID string) error {
	return r.do(ctx, computeID, "POST", proto.NodeCopyPath(projectID, fromID), proto.NodeCopy{DestinationNodeID: toID}, nil)
}

// ResetConsole disconnects every client of a node's console.
func (r *Registry) ResetConsole(ctx context.Context, computeID, projectID, nodeID string) error {
	return r.do(ctx, computeID, "POST", proto.ConsoleResetPath(projectID, nodeID), nil, nil)
}
