package host

import (
	"context"

	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/proto"
)

// TypeQemu is GNS3's node type of QEMU virtual machines.
const TypeQemu = "qemu"

// LinkSetter is a runner whose NICs have a carrier the host sets: up while
// a link that is not suspended uses the adapter, down otherwise (QEMU's
// set_link, GNS3's replicate_network_connection_state).
type LinkSetter interface {
	SetLink(adapter int, up bool) error
}

// Suspender is a runner that can pause and resume (Start resumes): a
// paused VM or container.
type Suspender interface {
	Suspend(ctx context.Context) error
}

// PowerOffer is a runner whose Stop may ask its guest first (ACPI); a
// closing project uses PowerOff instead, which does not wait for it.
type PowerOffer interface {
	PowerOff(ctx context.Context) error
}

// carrier applies a port's wanted carrier state through its runner, in
// the background (QMP calls must not run under project.mu), the last wish
// winning. Its goroutines are the Host's (Host.carriers), which Close
// waits for.
type carrier struct {
	set     func(up bool) error
	owner   *sync.WaitGroup
	mu      sync.Mutex // guards want
	want    bool
	applyMu sync.Mutex // one apply at a time
}

func (c *carrier) request(up bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.want = up
	c.mu.Unlock()
	c.owner.Go(func() {
		c.applyMu.Lock()
		defer c.applyMu.Unlock()
		c.mu.Lock()
		up := c.want
		c.mu.Unlock()
		_ = c.set(up) // a stopped VM remembers it; a gone one does not matter
	})
}

// QemuBinary is one QEMU executable and its version.
type QemuBinary struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// QemuBinaries lists the QEMU executables that run (-version), for GNS3's
// /qemu/binaries; archs, when not empty, keeps those whose name ends with
// one of them.
func QemuBinaries(ctx context.Context, archs []string) []QemuBinary {
	out := []QemuBinary{}
	for _, b := range node.QemuBinaries() {
		if len(archs) > 0 {
			keep := false
			for _, a := range archs {
				keep = keep || strings.HasSuffix(b, a)
			}
			if !keep {
				continue
			}
		}
		v, err := node.QemuVersion(ctx, b)
		if err != nil {
			continue
		}
		out = append(out, QemuBinary{Path: b, Version: v})
	}
	return out
}

// KVMProblem says why QEMU nodes run under TCG though QemuAccel is "auto"
// (node.KVMProblemFor: KVM's self-test, run once, and whether node
// programs can open /dev/kvm): nil where KVM passes both,
// where the accelerator was named (kvm, tcg), or where no QEMU runs.
func (h *Host) KVMProblem() error {
	if (h.cfg.QemuAccel != "" && h.cfg.QemuAccel != "auto") || (h.probeQemu && !node.QemuRuns()) {
		return nil
	}
	return node.KVMProblemFor(h.cfg.Sandbox)
}

// kvmUsable says whether QEMU nodes confined by sb run with KVM here: its
// self-test passes and they can open /dev/kvm (node.KVMProblemFor).
func kvmUsable(sb *sandbox.Sandbox) bool { return node.KVMProblemFor(sb) == nil }

// runtimeDir is the private folder of a node's sockets.
func runtimeDir(nodeID string) string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("labtap-%d", os.Getuid()))
	}
	return filepath.Join(base, "labtap", nodeID)
}

// qemuAdapters pairs the spec's adapters with the agent's ports.
func qemuAdapters(spec proto.NodeSpec, ports []netip.AddrPort) []node.QemuAdapter {
	out := make([]node.QemuAdapter, len(spec.Adapters))
	for i, a := range spec.Adapters {
		out[i] = node.QemuAdapter{MAC: a.MACAddress, Model: a.AdapterType}
		if i < len(ports) {
			out[i].Agent = ports[i]
		}
	}
	return out
}

// qemuRunner adapts node.Qemu to the host's optional interfaces.
type qemuRunner struct{ *node.Qemu }

func (r qemuRunner) Update(_ context.Context, spec proto.NodeSpec, ports []netip.AddrPort) error {
	return r.Qemu.Update(spec.Properties, qemuAdapters(spec, ports))
}

func (k *runnerKinds) newQemu(ctx context.Context, env RunnerEnv) (node.Runner, error) {
	var props node.QemuProps
	if err := props.Merge(env.Spec.Properties); err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	projectDir := filepath.Dir(filepath.Dir(filepath.Dir(env.Dir))) // <project>/project-files/qemu/<node>
	projectID := filepath.Base(projectDir)
	q, err := node.NewQemu(node.QemuConfig{
		NodeID: env.Spec.NodeID, Name: env.Spec.Name,
		ProjectID: projectID, ProjectDir: projectDir,
		Dir:         env.Dir,
		RuntimeDir:  runtimeDir(env.Spec.NodeID),
		ImagesDir:   k.images.ImagesDir(TypeQemu),
		ImageSums:   k.images.sums,
		ConsoleHost: k.cfg.ConsoleBind,
		ConsoleGate: k.consoles.Wrap(node.ConsoleKey(projectID, env.Spec.NodeID)),
		Accel:       k.cfg.QemuAccel,
		Props:       props,
		Adapters:    qemuAdapters(env.Spec, env.Ports),
		Sandbox:     k.cfg.Sandbox,
		Logger:      env.Logger,
		OnStop:      env.OnStop,
		OnWarning: func(msg string) {
			k.events.publish(proto.Event{Kind: proto.EventNodeWarning, ProjectID: projectID, NodeID: env.Spec.NodeID, Message: msg})
		},
	})
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "%v", err)
	}
	return qemuRunner{q}, nil
}
