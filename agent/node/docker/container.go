package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netns"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/dockerpolicy"
)

// Suspended is the status of a paused container.
const Suspended = "suspended"

// A start waits for the init to run the node's command (it renames itself
// runningName) at most readyWait, then startGrace more for the command to
// end at once. Without our init the grace starts once the interfaces are
// plumbed.
const (
	runningName = "labtap-running" // as agent/node/docker/init names it
	readyWait   = 10 * time.Second
	startGrace  = 500 * time.Millisecond
)

// Adapter is one of a node's network adapters.
type Adapter struct {
	MAC net.HardwareAddr
}

// Config configures one docker node.
type Config struct {
	Engine                       *Engine
	ComputeID, ProjectID, NodeID string
	Name                         string // the node's name: the container's host name
	Dir                          string // the node's directory
	Props                        Properties
	Adapters                     []Adapter // len is the adapter count
	ConsoleType                  string    // "telnet" (default), "none", "http", "https"
	ConsoleHost                  string    // where consoles listen; empty means 127.0.0.1
	Console                      int       // console TCP port; 0 picks one
	InitPath                     string    // our static init, bind-mounted at /labtap/init; "" runs the image's entrypoint as is
	Logger                       *slog.Logger
	OnStop                       func() // called each time the container stops, asked to or not
	StopTimeout                  time.Duration
	Variables                    []Variable // the project's variables
	ProjectDir                   string     // the project's directory on this agent (%project-path%)
	// Policy is what the operator allows beyond dockerpolicy's rule; its zero
	// value confines the node.
	Policy dockerpolicy.Policy
	// ConsoleGate, when set, wraps every console listener (console, aux,
	// HTTP): a node.ConsoleGate bound to the node.
	ConsoleGate func(net.Listener) net.Listener
}

// Container runs one docker node. Its methods are safe for concurrent use.
type Container struct {
	cfg Config
	log *slog.Logger
	e   *Engine

	ops sync.Mutex // serialises Start, Stop, Suspend, Delete

	mu      sync.Mutex // guards the fields below
	vols    []string   // the persistent directories of its spec
	id      string     // the container's id; "" once deleted
	status  string
	console int
	aux     int
	run     *running // nil while stopped
}

// running is what a started container holds in the agent.
type running struct {
	ns      netns.NsHandle
	ifindex []int // host end of each adapter
	term    *client.HijackedResponse
	console *node.ConsoleServer
	auxTerm *client.HijackedResponse
	auxSrv  *node.ConsoleServer
	http    *relay             // the http/https console's relay into the container
	stop    context.CancelFunc // ends the exit watcher
	reaped  chan struct{}      // closed once the node is marked stopped
}

// New prepares a docker node: it checks the image, and creates the
// container, or adopts the running container of the same node and spec
// that an earlier agent process left (the agent restarted: the container
// keeps its interfaces), or replaces a stale one.
func New(ctx context.Context, cfg Config) (*Container, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConsoleHost == "" {
		cfg.ConsoleHost = "127.0.0.1"
	}
	if cfg.ConsoleType == "" {
		cfg.ConsoleType = "telnet"
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	if err := cfg.Policy.Check(cfg.Props.request(cfg.Name)); err != nil {
		return nil, err
	}
	cfg.Props = cfg.Props.withDefaults()
	if strings.Contains(cfg.Dir, ":") {
		return nil, errors.New("Cannot create a Docker container with a project directory containing a colon character (':')")
	}
	switch cfg.ConsoleType {
	case "telnet", "none", "http", "https":
	case "vnc":
		return nil, errors.New("VNC consoles of docker nodes are not supported by this agent: use telnet, http, https or none")
	default:
		return nil, fmt.Errorf("console type %q is not one of telnet, none, http, https", cfg.ConsoleType)
	}
	c := &Container{cfg: cfg, log: cfg.Logger, e: cfg.Engine, status: node.Stopped}
	var err error
	if c.console, err = freeTCPPort(cfg.ConsoleHost, cfg.Console); err != nil {
		return nil, err
	}
	if c.aux, err = freeTCPPort(cfg.ConsoleHost, cfg.Props.Aux); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := writeInterfaces(cfg.Dir, len(cfg.Adapters)); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := c.create(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// name is the container's name: always valid, one per node.
func (c *Container) name() string { return "labtap-" + c.cfg.NodeID }

// spec builds the container's configuration. Its hash, stored
// as a label, tells whether a running container can be adopted.
func (c *Container) spec(ctx context.Context) (*container.Config, *container.HostConfig, error) {
	p := c.cfg.Props
	im, err := c.e.cli.ImageInspect(ctx, p.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, nil, &ErrImageMissing{Image: p.Image}
		}
		return nil, nil, engineError(err)
	}
	cmd, err := p.command()
	if err != nil {
		return nil, nil, err
	}
	var imgVolumes []string
	if im.Config != nil {
		imgVolumes = slices.Sorted(maps.Keys(im.Config.Volumes))
	}
	vols, err := p.volumes(imgVolumes)
	if err != nil {
		return nil, nil, err
	}
	if err := prepareVolumes(c.cfg.Dir, vols); err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.vols = vols
	c.mu.Unlock()
	hosts, err := p.hosts()
	if err != nil {
		return nil, nil, err
	}
	var imgEntry, imgCmd []string
	if im.Config != nil {
		imgEntry, imgCmd = im.Config.Entrypoint, im.Config.Cmd
	}
	if cmd == nil {
		cmd = imgCmd
	}
	n := len(c.cfg.Adapters)
	env := []string{"container=docker", "GNS3_MAX_ETHERNET=" + maxEthernet(n), "LABTAP_ADAPTERS=" + strconv.Itoa(n),
		"GNS3_VOLUMES=" + strings.Join(vols, ":")}
	vars, bad := p.env(c.cfg.Variables, nodeNames{name: c.cfg.Name, id: c.cfg.NodeID, projectID: c.cfg.ProjectID, projectPath: c.cfg.ProjectDir})
	for _, b := range bad {
		c.log.Warn(fmt.Sprintf("%s has invalid environment variable: %s", c.cfg.Name, b))
	}
	env = append(env, vars...)
	if hosts != "" {
		env = append(env, "GNS3_EXTRA_HOSTS="+hosts)
	}
	cfg := &container.Config{
		Image:     p.Image,
		Hostname:  hostname(c.cfg.Name),
		Tty:       true,
		OpenStdin: true,
		StdinOnce: false,
		Env:       env,
		Cmd:       cmd,
		Labels: map[string]string{
			LabelProject: c.cfg.ProjectID,
			LabelNode:    c.cfg.NodeID,
			LabelCompute: c.cfg.ComputeID,
		},
	}
	// The Engine's defaults confine the node (package dockerpolicy): its masked
	// and read-only paths (MaskedPaths and ReadonlyPaths left nil: /proc/sys
	// read-only, so no node writes the host's kernel.core_pattern), its
	// seccomp profile and AppArmor profile (no SecurityOpt), and no
	// CAP_SYS_ADMIN unless the operator allowed it. Nothing in the node
	// needs more: the agent makes its mounts (Mounts below) and brings its
	// interfaces up from outside.
	hc := &container.HostConfig{
		NetworkMode: "none",
		CapAdd:      p.CapAdd,
		Privileged:  p.Privileged,
		Sysctls:     p.Sysctls,
		// Each persistent directory, from the node's directory, bound over
		// its path; seedVolumes gave it the image's content first.
		Mounts: make([]mount.Mount, 0, len(vols)),
	}
	if p.Privileged {
		// The Engine refuses a privileged container in a remapped user
		// namespace (userns-remap); such a node is the host's root anyway.
		hc.UsernsMode = "host"
	}
	for _, v := range vols {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(c.cfg.Dir, v), Target: v})
	}
	if c.cfg.InitPath != "" {
		cfg.Entrypoint = append([]string{"/labtap/init"}, imgEntry...)
		if len(cfg.Entrypoint) == 1 && len(cmd) == 0 {
			cfg.Cmd = []string{"/bin/sh"}
		}
		hc.Binds = []string{c.cfg.InitPath + ":/labtap/init:ro"}
	}
	sum, _ := json.Marshal([]any{cfg, hc, im.ID})
	h := sha256.Sum256(sum)
	cfg.Labels["labtap.spec"] = hex.EncodeToString(h[:8])
	return cfg, hc, nil
}

// prepareVolumes makes each volume's directory in the node's directory and
// checks that it resolves inside it: the container writes these
// directories, and a symbolic link it left where a volume is to be would
// otherwise have the Engine mount a directory of the host's.
func prepareVolumes(dir string, vols []string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer root.Close()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	for _, v := range vols {
		rel := strings.TrimPrefix(v, "/")
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("Persistent volume '%s': %v", v, err)
		}
		got, err := filepath.EvalSymlinks(filepath.Join(dir, rel))
		if err != nil || got != filepath.Join(real, rel) {
			return fmt.Errorf("Persistent volume '%s': its directory in the node's directory is a symbolic link; remove it", v)
		}
	}
	return nil
}

// create makes the node's container, adopting or replacing one of the same
// node that is there already.
func (c *Container) create(ctx context.Context) error {
	cfg, hc, err := c.spec(ctx)
	if err != nil {
		return err
	}
	f := make(client.Filters).Add("label", LabelNode+"="+c.cfg.NodeID)
	res, err := c.e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return engineError(err)
	}
	for _, old := range res.Items {
		if old.Labels[LabelNode] != c.cfg.NodeID || old.Labels[LabelProject] != c.cfg.ProjectID {
			continue // never anyone else's
		}
		if old.Labels["labtap.spec"] == cfg.Labels["labtap.spec"] && old.Labels[LabelCompute] == c.cfg.ComputeID &&
			(old.State == "running" || old.State == "paused") {
			if err := c.adopt(ctx, old.ID, old.State == "paused"); err == nil {
				return nil
			} else {
				c.log.Warn("cannot adopt the running container; replacing it", "container", old.ID[:12], "err", err)
			}
		}
		c.log.Info("removing a stale container of this node", "container", old.ID[:12], "state", old.State)
		if _, err := c.e.cli.ContainerRemove(ctx, old.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return engineError(err)
		}
	}
	for i := range c.cfg.Adapters {
		removeHostEnd(HostEndName(c.cfg.ProjectID, c.cfg.NodeID, i))
	}
	c.mu.Lock()
	vols := c.vols
	c.mu.Unlock()
	if err := c.seedVolumes(ctx, cfg.Image, vols); err != nil {
		return err
	}
	cr, err := c.e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: c.name(), Config: cfg, HostConfig: hc})
	if err != nil {
		return engineError(err)
	}
	c.mu.Lock()
	c.id = cr.ID
	c.mu.Unlock()
	c.log.Info("container created", "container", cr.ID[:12], "image", cfg.Image)
	return nil
}

// adopt takes over a container an earlier agent process started: its
// veths are still there (they live in its network namespace), so links
// come back as soon as the relay has them again.
func (c *Container) adopt(ctx context.Context, id string, paused bool) error {
	ins, err := c.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return engineError(err)
	}
	if ins.Container.State == nil || ins.Container.State.Pid == 0 {
		return errors.New("not running")
	}
	ns, err := netns.GetFromPid(ins.Container.State.Pid)
	if err != nil {
		return fmt.Errorf("open its network namespace: %w", err)
	}
	r := &running{ns: ns, ifindex: make([]int, len(c.cfg.Adapters))}
	for i, a := range c.cfg.Adapters {
		host := HostEndName(c.cfg.ProjectID, c.cfg.NodeID, i)
		idx, ok := adopt(ns, host, i)
		if !ok {
			if idx, err = plumb(ns, host, i, a.MAC, c.altName(i)); err != nil {
				ns.Close()
				return err
			}
		}
		r.ifindex[i] = idx
	}
	c.mu.Lock()
	c.id = id
	c.mu.Unlock()
	if err := c.serve(ctx, r, nil); err != nil {
		ns.Close()
		return err
	}
	c.mu.Lock()
	c.run = r
	c.status = node.Started
	if paused {
		c.status = Suspended
	}
	c.mu.Unlock()
	c.log.Info("adopted the running container of this node", "container", id[:12])
	c.warnUnsafe()
	return nil
}

// warnUnsafe logs a warning naming the node each time a node the
// operator's flag let through runs: it can take the host.
func (c *Container) warnUnsafe() {
	if unsafe := dockerpolicy.Unsafe(c.cfg.Props.request(c.cfg.Name)); len(unsafe) > 0 {
		c.log.Warn(fmt.Sprintf("docker node %s runs unsafe (%s): it can take this host's root; allowed by %s",
			c.cfg.Name, strings.Join(unsafe, ", "), dockerpolicy.Flag), "name", c.cfg.Name, "unsafe", strings.Join(unsafe, ","))
	}
}

func (c *Container) altName(adapter int) string {
	return "labtap-" + c.cfg.NodeID[:8] + "-eth" + strconv.Itoa(adapter)
}

// ID returns the container's id.
func (c *Container) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Status returns node.Started, node.Stopped or Suspended.
func (c *Container) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Console returns the console port and type.
func (c *Container) Console() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.ConsoleType == "none" {
		return 0, "none"
	}
	return c.console, c.cfg.ConsoleType
}

// CommandLine is empty: a container runs no command line of the agent's.
func (c *Container) CommandLine() string { return "" }

// NIC returns false: a container's adapters are not UDP sockets; see
// HostEnd.
func (c *Container) NIC(adapter, port int) (netip.AddrPort, bool) { return netip.AddrPort{}, false }

// HostEnd returns the ifindex of adapter's host end while the container
// runs, for the agent's AF_PACKET port; false while stopped.
func (c *Container) HostEnd(adapter int) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil || adapter < 0 || adapter >= len(c.run.ifindex) {
		return 0, false
	}
	return c.run.ifindex[adapter], true
}

// SetProps replaces the node's properties where the container does not
// depend on them (usage): the caller checked that nothing else changed.
func (c *Container) SetProps(p Properties) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Props.Usage = p.Usage
}

// Properties returns what the compute reports in a docker node's
// properties.
func (c *Container) Properties() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.cfg.Props
	mac := ""
	if len(c.cfg.Adapters) > 0 {
		mac = c.cfg.Adapters[0].MAC.String()
	} else if p.MACAddress != "" {
		mac = p.MACAddress
	}
	return map[string]any{
		"adapters":           len(c.cfg.Adapters),
		"aux":                c.aux,
		"console_http_path":  p.ConsoleHTTPPath,
		"console_http_port":  p.ConsoleHTTPPort,
		"console_resolution": p.ConsoleResolution,
		"container_id":       c.id,
		"environment":        p.Environment,
		"extra_hosts":        p.ExtraHosts,
		"extra_volumes":      p.ExtraVolumes,
		"image":              p.Image,
		"mac_address":        mac,
		"start_command":      p.StartCommand,
		"usage":              p.Usage,
	}
}

// Start starts the container (or resumes it when suspended), plumbs its
// adapters, and serves its consoles. It returns once every eth<n> is there.
func (c *Container) Start(ctx context.Context) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	switch c.Status() {
	case node.Started:
		return nil
	case Suspended:
		if _, err := c.e.cli.ContainerUnpause(ctx, c.ID(), client.ContainerUnpauseOptions{}); err != nil {
			return engineError(err)
		}
		c.setStatus(node.Started)
		return nil
	}
	id := c.ID()
	if _, err := c.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); cerrdefs.IsNotFound(err) || id == "" {
		if err := c.create(ctx); err != nil { // removed behind our back: make it again
			return err
		}
		id = c.ID()
	}
	c.mu.Lock()
	vols := c.vols
	c.mu.Unlock()
	if err := prepareVolumes(c.cfg.Dir, vols); err != nil { // what the container left there since
		return err
	}
	// Attach before start, so the console loses none of the first output.
	var term *client.HijackedResponse
	if c.cfg.ConsoleType == "telnet" {
		at, err := c.e.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			return engineError(err)
		}
		term = &at.HijackedResponse
	}
	fail := func(err error) error {
		if term != nil {
			term.Close()
		}
		return err
	}
	if _, err := c.e.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		if strings.Contains(err.Error(), "unable to apply caps") {
			return fail(fmt.Errorf("%s: the Docker daemon cannot grant the requested capabilities (%s)", c.cfg.Name, engineError(err)))
		}
		return fail(engineError(err))
	}
	ins, err := c.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fail(engineError(err))
	}
	st := ins.Container.State
	if st == nil || !st.Running || st.Pid == 0 {
		return fail(fmt.Errorf("%s: the container exited at start: %s", c.cfg.Name, c.logTail(ctx, id)))
	}
	// The namespace is held by its fd from here on: it stays valid however
	// the process fares, and no pid can be reused under us.
	ns, err := netns.GetFromPid(st.Pid)
	if err != nil {
		c.kill(ctx, id)
		return fail(fmt.Errorf("%s: open the container's network namespace: %w", c.cfg.Name, err))
	}
	c.warnUnsafe()
	r := &running{ns: ns, ifindex: make([]int, len(c.cfg.Adapters))}
	if err := loUp(ns); err != nil {
		ns.Close()
		c.kill(ctx, id)
		return fail(fmt.Errorf("%s: %w", c.cfg.Name, err))
	}
	for i, a := range c.cfg.Adapters {
		idx, err := plumb(ns, HostEndName(c.cfg.ProjectID, c.cfg.NodeID, i), i, a.MAC, c.altName(i))
		if err != nil {
			ns.Close()
			c.kill(ctx, id)
			if tail := c.logTail(ctx, id); tail != "(no output)" {
				err = fmt.Errorf("%w; the container said: %s", err, tail)
			}
			return fail(fmt.Errorf("%s: %w", c.cfg.Name, err))
		}
		r.ifindex[i] = idx
	}
	if err := c.serve(ctx, r, term); err != nil {
		ns.Close()
		c.kill(ctx, id)
		return err
	}
	if err := c.settle(ctx, r, st.Pid); err != nil {
		return err
	}
	c.mu.Lock()
	c.run = r
	c.status = node.Started
	c.mu.Unlock()
	c.log.Info("container started", "container", id[:12], "pid", st.Pid, "adapters", len(r.ifindex))
	return nil
}

// settle waits until the container's init (PID pid on the host) runs the
// node's command, and a moment more: a command that ends at once (a typo,
// a missing file, a capability it lacks) fails the start with what the
// container said, instead of a node that looks started and stops behind
// the caller's back. A command that runs after readyWait (the image's
// ifup waiting for DHCP) is taken as started; if it ends, the node is
// reported stopped as any node that stops.
func (c *Container) settle(ctx context.Context, r *running, pid int) error {
	exited := func() error {
		return fmt.Errorf("%s: the container exited at start: %s", c.cfg.Name, c.logTail(ctx, c.ID()))
	}
	cancel := func() error {
		r.stop()
		<-r.reaped
		c.kill(ctx, c.ID())
		return ctx.Err()
	}
	comm := "/proc/" + strconv.Itoa(pid) + "/comm"
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(readyWait); c.cfg.InitPath != "" && time.Now().Before(deadline); {
		if b, err := os.ReadFile(comm); err == nil && strings.TrimSpace(string(b)) == runningName {
			break
		}
		select {
		case <-r.reaped:
			return exited()
		case <-ctx.Done():
			return cancel()
		case <-tick.C:
		}
	}
	select {
	case <-r.reaped:
		return exited()
	case <-ctx.Done():
		return cancel()
	case <-time.After(startGrace):
		return nil
	}
}

func (c *Container) setStatus(s string) {
	c.mu.Lock()
	c.status = s
	c.mu.Unlock()
}

// kill stops a container that failed to start properly.
func (c *Container) kill(ctx context.Context, id string) {
	zero := 0
	_, _ = c.e.cli.ContainerStop(context.WithoutCancel(ctx), id, client.ContainerStopOptions{Timeout: &zero})
}

// serve starts the consoles of a running container and the watcher that
// notices it exit. term is the attach stream opened before the start, nil
// to attach now (adoption).
func (c *Container) serve(ctx context.Context, r *running, term *client.HijackedResponse) error {
	id := c.ID()
	c.mu.Lock()
	consolePort, auxPort := c.console, c.aux
	c.mu.Unlock()
	bg := context.Background()
	switch c.cfg.ConsoleType {
	case "telnet":
		if term == nil {
			at, err := c.e.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
			if err != nil {
				return engineError(err)
			}
			term = &at.HijackedResponse
		}
		ln, port, err := c.listen(consolePort)
		if err != nil {
			term.Close()
			return err
		}
		r.term = term
		r.console = node.ServeConsole(ln, hijacked{term}, node.ConsoleOptions{
			Banner: c.cfg.Name + " console is now available... Press RETURN to get started.\r\n",
			OnResize: func(cols, rows int) {
				_, _ = c.e.cli.ContainerResize(bg, id, client.ContainerResizeOptions{Height: uint(rows), Width: uint(cols)})
			},
		})
		consolePort = port
	case "http", "https":
		ln, port, err := c.listen(consolePort)
		if err != nil {
			return err
		}
		r.http = c.serveHTTP(ln, r.ns, c.cfg.Props.ConsoleHTTPPort)
		consolePort = port
	}
	if err := c.serveAux(ctx, r, auxPort); err != nil {
		c.log.Warn("aux console", "err", err) // the node runs without it
	}
	c.mu.Lock()
	c.console = consolePort
	c.mu.Unlock()
	wctx, stop := context.WithCancel(bg)
	r.stop = stop
	r.reaped = make(chan struct{})
	wait := c.e.cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	go c.watch(wctx, r, wait)
	return nil
}

// listen binds a console port, or another one when someone took it while
// the node was stopped (the node then reports the new port).
func (c *Container) listen(port int) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(c.cfg.ConsoleHost, strconv.Itoa(port)))
	if err != nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(c.cfg.ConsoleHost, "0")); err != nil {
			return nil, 0, fmt.Errorf("console: %w", err)
		}
	}
	port = ln.Addr().(*net.TCPAddr).Port
	if c.cfg.ConsoleGate != nil {
		ln = c.cfg.ConsoleGate(ln)
	}
	return ln, port, nil
}

// serveAux serves the aux console: a shell run with exec on a TTY inside
// the container, shared by its telnet clients, started again when it ends.
func (c *Container) serveAux(ctx context.Context, r *running, port int) error {
	id := c.ID()
	ex, err := c.e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		TTY: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: []string{"TERM=vt100"},
		Cmd: []string{"/bin/sh", "-c", "while true; do if command -v bash >/dev/null; then bash -l; else sh -l; fi; done"},
	})
	if err != nil {
		return engineError(err)
	}
	at, err := c.e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true})
	if err != nil {
		return engineError(err)
	}
	ln, aport, err := c.listen(port)
	if err != nil {
		at.Close()
		return err
	}
	r.auxTerm = &at.HijackedResponse
	r.auxSrv = node.ServeConsole(ln, hijacked{r.auxTerm}, node.ConsoleOptions{
		OnResize: func(cols, rows int) {
			_, _ = c.e.cli.ExecResize(context.Background(), ex.ID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
		},
	})
	c.mu.Lock()
	c.aux = aport
	c.mu.Unlock()
	return nil
}

// watch waits for the container to stop, asked to or not, then releases
// what it held and marks the node stopped.
func (c *Container) watch(ctx context.Context, r *running, wait client.ContainerWaitResult) {
	exited := false
	select {
	case <-wait.Result:
		exited = true
	case err := <-wait.Error:
		if ctx.Err() == nil {
			c.log.Warn("lost track of the container; treating it as stopped", "err", err)
		}
	case <-ctx.Done():
	}
	c.release(r)
	if exited {
		// The kernel deletes the veths with the namespace, but in a work
		// queue of its own, later: delete them now, so a start right after
		// finds their names free.
		for i := range r.ifindex {
			removeHostEnd(HostEndName(c.cfg.ProjectID, c.cfg.NodeID, i))
		}
	}
	c.mu.Lock()
	if c.run == r {
		c.run = nil
		c.status = node.Stopped
	}
	c.mu.Unlock()
	c.log.Info("container stopped", "container", c.ID()[:min(12, len(c.ID()))])
	if c.cfg.OnStop != nil {
		c.cfg.OnStop()
	}
	close(r.reaped)
}

// release closes the consoles and the namespace handle of a run.
func (c *Container) release(r *running) {
	if r.term != nil {
		r.term.Close()
	}
	if r.console != nil {
		r.console.Close()
	}
	if r.auxTerm != nil {
		r.auxTerm.Close()
	}
	if r.auxSrv != nil {
		r.auxSrv.Close()
	}
	if r.http != nil {
		r.http.Close()
	}
	r.ns.Close()
}

// Stop stops the container (SIGTERM, SIGKILL after 5 s, as GNS3) and waits
// until the node is marked stopped. Its veths die with its namespace.
func (c *Container) Stop(ctx context.Context) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	return c.stopLocked(ctx)
}

func (c *Container) stopLocked(ctx context.Context) error {
	c.mu.Lock()
	r, status, id := c.run, c.status, c.id
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	if status == Suspended {
		if _, err := c.e.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return engineError(err)
		}
	}
	secs := int(c.cfg.StopTimeout / time.Second)
	if _, err := c.e.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return engineError(err)
	}
	select {
	case <-r.reaped:
	case <-time.After(10 * time.Second): // the Engine's wait stream broke: stop watching
		r.stop()
		<-r.reaped
	}
	return nil
}

// Suspend pauses the container; Start resumes it.
func (c *Container) Suspend(ctx context.Context) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	switch c.Status() {
	case Suspended:
		return nil
	case node.Stopped:
		return fmt.Errorf("%s is not running", c.cfg.Name)
	}
	if _, err := c.e.cli.ContainerPause(ctx, c.ID(), client.ContainerPauseOptions{}); err != nil {
		return engineError(err)
	}
	c.setStatus(Suspended)
	return nil
}

// Delete stops the node and removes its container (and its anonymous
// volumes, as GNS3) and any host end left.
func (c *Container) Delete(ctx context.Context) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	if err := c.stopLocked(ctx); err != nil {
		c.log.Warn("stop before delete", "err", err)
	}
	id := c.ID()
	if id != "" {
		if _, err := c.e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return engineError(err)
		}
	}
	for i := range c.cfg.Adapters {
		removeHostEnd(HostEndName(c.cfg.ProjectID, c.cfg.NodeID, i))
	}
	c.mu.Lock()
	c.id = ""
	c.mu.Unlock()
	return nil
}

// ResetConsole drops the console's clients and attaches to the container's
// TTY again (console/reset).
func (c *Container) ResetConsole(ctx context.Context) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	r := c.run
	port := c.console
	c.mu.Unlock()
	if r == nil || r.console == nil {
		return nil
	}
	r.console.Close()
	r.term.Close()
	at, err := c.e.cli.ContainerAttach(ctx, c.ID(), client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return engineError(err)
	}
	ln, port, err := c.listen(port)
	if err != nil {
		at.Close()
		return err
	}
	id := c.ID()
	r.term = &at.HijackedResponse
	r.console = node.ServeConsole(ln, hijacked{r.term}, node.ConsoleOptions{
		Banner: c.cfg.Name + " console is now available... Press RETURN to get started.\r\n",
		OnResize: func(cols, rows int) {
			_, _ = c.e.cli.ContainerResize(context.Background(), id, client.ContainerResizeOptions{Height: uint(rows), Width: uint(cols)})
		},
	})
	c.mu.Lock()
	c.console = port
	c.mu.Unlock()
	return nil
}

// logTail returns the last 4 KiB of a container's output, on one line.
func (c *Container) logTail(ctx context.Context, id string) string {
	rc, err := c.e.cli.ContainerLogs(context.WithoutCancel(ctx), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "100"})
	if err != nil {
		return "(no output)"
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	s := strings.Join(strings.Fields(string(data)), " ")
	if s == "" {
		return "(no output)"
	}
	return s
}

// hijacked is an attach stream as a terminal: reads from its buffered
// reader, writes to its connection.
type hijacked struct{ h *client.HijackedResponse }

func (t hijacked) Read(b []byte) (int, error)  { return t.h.Reader.Read(b) }
func (t hijacked) Write(b []byte) (int, error) { return t.h.Conn.Write(b) }

// serveHTTP relays each connection to the console port to port inside the
// container: the socket is made inside its network namespace, so no
// process runs in the container and nothing is rewritten.
func (c *Container) serveHTTP(ln net.Listener, ns netns.NsHandle, port int) *relay {
	return startRelay(ln, func() (net.Conn, error) {
		var up net.Conn
		err := inNetns(ns, func() error {
			var err error
			up, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
			return err
		})
		return up, err
	})
}

// freeTCPPort returns port when it is given, else a TCP port that was free
// on host a moment ago.
func freeTCPPort(host string, port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("console: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
