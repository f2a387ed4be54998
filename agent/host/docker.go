package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/agent/node/docker"
	"github.com/labtap/labtap/dockerpolicy"
	"github.com/labtap/labtap/proto"
)

// Remover is a runner that made something outside the agent (a container):
// Remove, called once the node is stopped and forgotten (node delete,
// project close), removes it and closes the runner's own ports.
type Remover interface {
	Remove(ctx context.Context) error
}

// DockerInitName is the file name of the static init given to containers
// (agent/node/docker/init), looked up next to the agent's executable, then
// in PATH.
const DockerInitName = "labtap-init"

// DockerUnavailable returns why this agent cannot run docker nodes, "" when
// it can. The agent logs it at start.
func (h *Host) DockerUnavailable() string { return h.kinds.docker.Unavailable() }

// DockerImages lists the Engine's image tags (the GUI's docker template
// wizard).
func (h *Host) DockerImages(ctx context.Context) ([]string, error) { return h.kinds.dockerImages(ctx) }

// dockerImages lists the Engine's image tags.
func (k *runnerKinds) dockerImages(ctx context.Context) ([]string, error) {
	e, why := k.docker.Engine()
	if e == nil {
		return nil, proto.Errorf(proto.CodeConflict, "docker nodes cannot run on this agent: %s", why)
	}
	tags, err := e.Images(ctx)
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "%v", err)
	}
	return tags, nil
}

// cleanDocker removes the containers a killed agent left behind in a
// project, those no longer running; running ones are adopted by their nodes
// as they are created again.
func (k *runnerKinds) cleanDocker(projectID string) {
	if !k.dockerNodes {
		return
	}
	e, _ := k.docker.Engine()
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := e.RemoveProject(ctx, k.cfg.ComputeID, projectID, false)
	if err != nil {
		k.log.Warn("remove stale containers", "project", projectID, "err", err)
	} else if n > 0 {
		k.log.Info("removed stale containers of a previous agent", "project", projectID, "count", n)
	}
}

// removeContainers removes every container of a closed project, running
// or not: those of nodes deleted while a previous agent was down included
// (GNS3 removes a project's containers when it closes).
func (k *runnerKinds) removeContainers(projectID string) {
	if !k.dockerNodes {
		return
	}
	e, _ := k.docker.Engine()
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.RemoveProject(ctx, k.cfg.ComputeID, projectID, true); err != nil {
		k.log.Warn("remove the project's containers", "project", projectID, "err", err)
	}
}

// dockerInit finds the static init binary.
func (k *runnerKinds) dockerInit() string {
	if k.cfg.DockerInit != "" {
		return k.cfg.DockerInit
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), DockerInitName)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "" // containers run their image's entrypoint as is
}

// newDocker builds a docker node's runner.
func (k *runnerKinds) newDocker(ctx context.Context, env RunnerEnv) (node.Runner, error) {
	e, why := k.docker.Engine()
	if e == nil {
		return nil, proto.Errorf(proto.CodeConflict, "docker nodes cannot run on this agent: %s", why)
	}
	cfg, err := k.dockerConfig(env.ProjectID, env.Spec, env.Dir)
	if err != nil {
		return nil, err
	}
	d := &dockerRunner{k: k, env: env}
	for range env.Spec.Adapters {
		d.ports = append(d.ports, bridge.NewPacketPort(k.cfg.SocketBuffer))
	}
	cfg.Engine = e
	cfg.OnStop = d.stopped
	c, err := docker.New(ctx, cfg)
	if err != nil {
		var missing *docker.ErrImageMissing
		if errors.As(err, &missing) {
			return nil, proto.Errorf(proto.CodeConflict, "%v", err)
		}
		return nil, proto.Errorf(proto.CodeConflict, "%v", err)
	}
	d.c = c
	d.syncPorts() // an adopted running container
	return d, nil
}

// dockerConfig reads a docker node's spec.
func (k *runnerKinds) dockerConfig(projectID string, spec proto.NodeSpec, dir string) (docker.Config, error) {
	var props docker.Properties
	if len(spec.Properties) > 0 {
		if err := json.Unmarshal(spec.Properties, &props); err != nil {
			return docker.Config{}, proto.Errorf(proto.CodeInvalid, "docker node properties: %v", err)
		}
	}
	if props.Image == "" {
		return docker.Config{}, proto.Errorf(proto.CodeInvalid, "docker node %s has no image", spec.NodeID)
	}
	// Before anything is removed or made: an update to an unsafe node
	// keeps the container it had.
	policy := dockerpolicy.Policy{Unsafe: k.cfg.DockerUnsafe}
	if err := policy.Check(dockerpolicy.Request{Node: spec.Name, Privileged: props.Privileged, CapAdd: props.CapAdd, ExtraVolumes: props.ExtraVolumes, Sysctls: props.Sysctls}); err != nil {
		return docker.Config{}, confineError(err)
	}
	var ads []docker.Adapter
	for i, a := range spec.Adapters {
		mac, err := net.ParseMAC(a.MACAddress)
		if err != nil || len(mac) != 6 {
			return docker.Config{}, proto.Errorf(proto.CodeInvalid, "adapter %d: invalid MAC address %q", i, a.MACAddress)
		}
		ads = append(ads, docker.Adapter{MAC: mac})
	}
	var consoleType string
	var console int
	var top struct {
		ConsoleType string `json:"console_type"`
		Console     int    `json:"console"`
	}
	if len(spec.Properties) > 0 {
		_ = json.Unmarshal(spec.Properties, &top)
		consoleType, console = top.ConsoleType, top.Console
	}
	var vars []docker.Variable
	for _, v := range spec.Variables {
		vars = append(vars, docker.Variable{Name: v.Name, Value: v.Value})
	}
	return docker.Config{
		Variables:   vars,
		ProjectDir:  filepath.Dir(filepath.Dir(filepath.Dir(dir))), // <project>/project-files/docker/<node>
		ComputeID:   k.cfg.ComputeID,
		ProjectID:   projectID,
		NodeID:      spec.NodeID,
		Name:        spec.Name,
		Dir:         dir,
		Props:       props,
		Adapters:    ads,
		ConsoleType: consoleType,
		Console:     console,
		ConsoleHost: k.cfg.ConsoleBind,
		ConsoleGate: k.consoles.Wrap(node.ConsoleKey(projectID, spec.NodeID)),
		InitPath:    k.dockerInit(),
		Logger:      k.log.With("node", spec.NodeID),
		Policy:      policy,
	}, nil
}

// confineError is the agent's answer to a refusal of dockerpolicy's rule, with
// the status the controller gives the same refusal.
func confineError(err error) error {
	code := proto.CodeConflict // a volume where none may be, as GNS3 answers it
	switch {
	case errors.Is(err, dockerpolicy.ErrUnsafe):
		code = proto.CodeForbidden
	case errors.Is(err, dockerpolicy.ErrInvalid):
		code = proto.CodeInvalid
	}
	return proto.Errorf(code, "%v", err)
}

// dockerRunner is a docker node as the host runs it: the container, and
// one AF_PACKET port per adapter attached to the adapter's host end while
// the container runs.
type dockerRunner struct {
	k     *runnerKinds
	env   RunnerEnv
	ports []*bridge.PacketPort // one per adapter

	mu sync.Mutex // guards c and ports (replaced by an update)
	c  *docker.Container
}

func (d *dockerRunner) container() *docker.Container {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c
}

// syncPorts attaches each adapter's port to the host end of the running
// container, or detaches it while stopped.
func (d *dockerRunner) syncPorts() {
	d.mu.Lock()
	c, ports := d.c, slices.Clone(d.ports)
	d.mu.Unlock()
	for i, p := range ports {
		idx, ok := c.HostEnd(i)
		switch {
		case !ok:
			p.Detach()
		case p.Ifindex() != idx:
			if err := p.Attach(idx); err != nil {
				d.env.Logger.Error("relay port on the container's veth", "adapter", i, "err", err)
			}
		}
	}
}

// stopped is the container's OnStop: the ports let go of the dead veths,
// then the controller hears of it.
func (d *dockerRunner) stopped() {
	d.syncPorts()
	if d.env.OnStop != nil {
		d.env.OnStop()
	}
}

func (d *dockerRunner) RelayPorts() []bridge.Port {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]bridge.Port, len(d.ports))
	for i, p := range d.ports {
		out[i] = p
	}
	return out
}

func (d *dockerRunner) Start(ctx context.Context) error {
	err := d.container().Start(ctx)
	d.syncPorts()
	return err
}

func (d *dockerRunner) Stop(ctx context.Context) error {
	err := d.container().Stop(ctx)
	d.syncPorts()
	return err
}

func (d *dockerRunner) Suspend(ctx context.Context) error { return d.container().Suspend(ctx) }
func (d *dockerRunner) Status() string                    { return d.container().Status() }
func (d *dockerRunner) Console() (int, string)            { return d.container().Console() }
func (d *dockerRunner) CommandLine() string               { return d.container().CommandLine() }
func (d *dockerRunner) NIC(adapter, port int) (netip.AddrPort, bool) {
	return netip.AddrPort{}, false
}
func (d *dockerRunner) Properties() map[string]any { return d.container().Properties() }

// ResetConsole (console/reset) drops the console's clients and attaches to
// the container's TTY again.
func (d *dockerRunner) ResetConsole() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.container().ResetConsole(ctx); err != nil {
		d.env.Logger.Warn("console reset", "err", err)
	}
}

var _ consoleResetter = (*dockerRunner)(nil)

// inPlace are the properties a docker node takes without a new container,
// running or not.
var inPlace = map[string]bool{"usage": true}

// Update takes a node PUT: the changed properties are merged into the
// node's. A change of usage is applied as it is; any other change makes
// the container again with the new spec (GNS3 does the same), and a
// running node refuses it with a 409 that names what it must be stopped
// for. A new adapter count gives the node a relay port per adapter (the
// host checked that no link uses a removed one).
func (d *dockerRunner) Update(ctx context.Context, spec proto.NodeSpec, _ []netip.AddrPort) error {
	old := d.env.Spec
	merged := map[string]json.RawMessage{}
	if len(old.Properties) > 0 {
		if err := json.Unmarshal(old.Properties, &merged); err != nil {
			return proto.Errorf(proto.CodeInvalid, "%v", err)
		}
	}
	changed := map[string]json.RawMessage{}
	if len(spec.Properties) > 0 {
		if err := json.Unmarshal(spec.Properties, &changed); err != nil {
			return proto.Errorf(proto.CodeInvalid, "docker node properties: %v", err)
		}
	}
	var remake []string // what needs a new container
	for k, v := range changed {
		if prev, ok := merged[k]; ok && jsonEqual(prev, v) {
			continue
		}
		merged[k] = v
		if !inPlace[k] {
			remake = append(remake, k)
		}
	}
	if spec.Name != old.Name {
		remake = append(remake, "name")
	}
	adaptersChanged := len(spec.Adapters) != len(old.Adapters)
	if !adaptersChanged && !reflect.DeepEqual(spec.Adapters, old.Adapters) {
		remake = append(remake, "mac_address")
	}
	slices.Sort(remake)
	remake = slices.Compact(remake)
	props, _ := json.Marshal(merged)
	next := spec
	next.Properties = props
	if len(remake) == 0 && !adaptersChanged && bytes.Equal(props, old.Properties) {
		return nil
	}
	c := d.container()
	if c.Status() != node.Stopped {
		if adaptersChanged {
			return proto.Errorf(proto.CodeConflict, "%s must be stopped to change its number of adapters (%d to %d): a running container's interfaces cannot be added or removed",
				old.Name, len(old.Adapters), len(spec.Adapters))
		}
		if len(remake) > 0 {
			return proto.Errorf(proto.CodeConflict, "%s must be stopped to change %s", old.Name, strings.Join(remake, ", "))
		}
	}
	cfg, err := d.k.dockerConfig(d.env.ProjectID, next, d.env.Dir)
	if err != nil {
		return err
	}
	if len(remake) == 0 && !adaptersChanged {
		c.SetProps(cfg.Props) // usage
		d.mu.Lock()
		d.env.Spec = next
		d.mu.Unlock()
		return nil
	}
	e, _ := d.k.docker.Engine()
	cfg.Engine, cfg.OnStop = e, d.stopped
	if err := c.Delete(ctx); err != nil {
		return proto.Errorf(proto.CodeConflict, "%v", err)
	}
	nc, err := docker.New(ctx, cfg)
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "%v", err)
	}
	d.mu.Lock()
	d.c = nc
	d.env.Spec = next
	for len(d.ports) > len(spec.Adapters) {
		d.ports[len(d.ports)-1].Close()
		d.ports = d.ports[:len(d.ports)-1]
	}
	for len(d.ports) < len(spec.Adapters) {
		d.ports = append(d.ports, bridge.NewPacketPort(d.k.cfg.SocketBuffer))
	}
	d.mu.Unlock()
	return nil
}

// jsonEqual compares two JSON values by meaning.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// Remove deletes the container and closes the ports.
func (d *dockerRunner) Remove(ctx context.Context) error {
	err := d.container().Delete(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.ports {
		p.Close()
	}
	if err != nil {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}
