package host

import (
	"context"
	"log/slog"
	"sync"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/agent/node/docker"
)

// runnerKinds builds the nodes of the types the agent runs with a program
// of its own (vpcs, qemu, docker), from what each needs of the agent: its
// configuration, the console gate, the images folders and the events.
// Each program is found once: VPCS on first use, the Docker Engine by its
// Probe (docker.go), QEMU by node.QemuRuns.
type runnerKinds struct {
	cfg      *Config
	log      *slog.Logger
	consoles *node.ConsoleGate
	images   *Images
	events   *Events
	docker   *docker.Probe
	// dockerNodes: the agent has a docker runner, whose containers it
	// removes when a project opens or closes.
	dockerNodes bool

	vpcsOnce sync.Once
	vpcs     *node.VPCSProgram
	vpcsErr  error
}

func newRunnerKinds(cfg *Config, consoles *node.ConsoleGate, images *Images, events *Events) *runnerKinds {
	off := ""
	if cfg.NoDocker {
		off = "docker nodes are turned off (--docker=false)"
	}
	return &runnerKinds{cfg: cfg, log: cfg.Logger, consoles: consoles, images: images, events: events, docker: docker.NewProbe(off)}
}

// factories are the real runners, by node type.
func (k *runnerKinds) factories() map[string]RunnerFactory {
	return map[string]RunnerFactory{"vpcs": k.newVPCS, TypeQemu: k.newQemu, "docker": k.newDocker}
}

func (k *runnerKinds) newVPCS(ctx context.Context, env RunnerEnv) (node.Runner, error) {
	k.vpcsOnce.Do(func() { k.vpcs, k.vpcsErr = node.FindVPCS(ctx, k.cfg.VPCS) })
	if k.vpcsErr != nil {
		return nil, k.vpcsErr
	}
	return node.NewVPCS(node.VPCSConfig{
		Program:      k.vpcs,
		Dir:          env.Dir,
		MACIndex:     env.Spec.MACIndex,
		Name:         env.Spec.Name,
		Agent:        env.Agent,
		ConsoleHost:  k.cfg.ConsoleBind,
		ConsolePorts: k.cfg.ConsolePorts,
		DeniedPorts:  k.cfg.ProtectedPorts,
		ConsoleGate:  k.consoles.Wrap(node.ConsoleKey(env.ProjectID, env.Spec.NodeID)),
		Sandbox:      k.cfg.Sandbox,
		Logger:       env.Logger,
		OnStop:       env.OnStop,
	})
}
