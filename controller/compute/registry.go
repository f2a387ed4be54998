package compute

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	// CertSerial is the serial (decimal) of the certificate the
	// controller's CA issued the compute when it joined; "" for a compute
	// added otherwise. Removing the compute revokes it.
	CertSerial string

	Connected     bool
	CPUPercent    *float64 // nil until the agent reports
	MemoryPercent *float64
	Platform      string
	NodeTypes     []string
	// Unavailable names the node types the agent cannot run, and why.
	Unavailable map[string]string
	LastError   string // "" is null
}

// Registry holds the computes: who they are, where they listen, what
// secret reaches them, and what their last health report said. It is safe
// for concurrent use. Its parts have their own types, reached by name:
// Agents calls the agents (the project.Computes adapter project.Service
// drives, and the API's agent routes), Health checks and watches them,
// store saves the list. The parts read the registry; the registry's mu is
// never held while an agent is called or the list is saved.
type Registry struct {
	// Agents calls the computes' agents.
	Agents *Agents
	// Health checks the computes and follows their events (Watch).
	Health  *Health
	store   store
	log     *slog.Logger
	secret  string   // the controller-wide secret, for computes that hold it
	trusted []string // host patterns the secret may be sent to on request
	// onChange hears of every change of a compute; called with no lock held.
	onChange func(action string, c Compute)

	mu       sync.RWMutex // guards computes, order and enroll
	computes map[string]*Compute
	enroll   *Enrollment // nil: agents cannot join
	order    []string
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
	r := &Registry{store: store{path: cfg.Path}, log: cfg.Logger, secret: cfg.Secret, trusted: cfg.TrustedAgents, onChange: cfg.OnChange, computes: make(map[string]*Compute)}
	r.Agents = &Agents{reg: r, client: cfg.Client, log: cfg.Logger}
	r.Health = &Health{reg: r, agents: r.Agents, client: cfg.Client, log: cfg.Logger}
	return r
}

// Add registers a compute, replacing one with the same id, and checks it
// once so its state is known when Add returns.
func (r *Registry) Add(ctx context.Context, c Compute) Compute {
	r.put(c)
	r.Health.check(ctx, c.ID)
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

func (r *Registry) target(id string) (target, error) {
	c, ok := r.Get(id)
	if !ok {
		return target{}, &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	return target{id: c.ID, url: c.URL, secret: c.Secret, user: c.User, password: c.Password}, nil
}

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
			if err := r.store.save(r.List); err != nil {
				return Compute{}, err
			}
		}
		r.Health.check(ctx, c.ID)
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
	if err := r.store.save(r.List); err != nil {
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
	// The id is a path segment of the compute's routes, which take it as
	// sent: one a client must escape (or "."/"..", which clients resolve)
	// would name a compute no route reaches, so none could delete it.
	if url.PathEscape(c.ID) != c.ID || c.ID == "." || c.ID == ".." {
		return &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("Compute id %q may hold letters, digits and - . _ ~ : @ & = + $ only", c.ID)}
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
	if err := r.store.save(r.List); err != nil {
		return Compute{}, err
	}
	r.Health.check(ctx, id)
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
	enroll := r.enroll
	r.mu.Unlock()
	if !ok {
		return nil
	}
	// Revoked before anything else: from now on the agent is refused.
	if enroll != nil {
		if err := enroll.revokeFor(*c); err != nil {
			return err
		}
	}
	r.onChange("compute.deleted", *c)
	return r.store.save(r.List)
}

// agentURL is where an agent registered by host and port listens.
func agentURL(c Compute) string {
	proto := c.Protocol
	if proto == "" {
		proto = "http"
	}
	return proto + "://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// Load registers the computes saved in the registry's file (at start-up)
// and checks each once.
func (r *Registry) Load(ctx context.Context) error {
	list, err := r.store.load()
	if err != nil {
		return err
	}
	// Checked all at once: start-up waits for the slowest unreachable
	// compute, not for the sum of their timeouts.
	var wg sync.WaitGroup
	for _, s := range list {
		c := Compute{ID: s.ID, Name: s.Name, Protocol: s.Protocol, Host: s.Host, Port: s.Port, User: s.User, Password: s.Password, SharedSecret: s.SharedSecret, CertSerial: s.CertSerial}
		c.URL, c.Secret = agentURL(c), r.secretFor(c)
		r.put(c)
		wg.Go(func() { r.Health.check(ctx, c.ID) })
	}
	wg.Wait()
	return nil
}
