// Package server assembles a whole agent, its state and its HTTP API, and
// runs it on a listener. The agent command runs one; so does the
// controller, as its embedded local agent, which it then reaches over HTTP
// like any other.
package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/internal/netguard"
	"github.com/labtap/labtap/internal/pki"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/metrics"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures an agent. It is the agent's own, so that who runs one
// (the agent command, the controller's local agent) needs nothing of the
// agent's inner packages.
type Config struct {
	// ComputeID is the name the controller knows this agent by.
	ComputeID string
	// DataDir holds projects/<project_id>/project-files/...
	DataDir string
	// ConsoleHost is the address reported for node consoles; ConsoleBind
	// is where they listen (empty: 127.0.0.1).
	ConsoleHost, ConsoleBind string
	// ConsolePorts, when set, is the range [lo, hi] node consoles take
	// their ports from.
	ConsolePorts [2]int
	// VPCS is the vpcs executable, a name looked up in PATH or a path.
	VPCS string
	// SoftwareVersion is reported to the controller.
	SoftwareVersion string
	// TunnelBind is the address the agent's ends of tunnels to other agents
	// bind to; empty means ConsoleBind, or 127.0.0.1 when that is a
	// wildcard.
	TunnelBind string
	// SocketBuffer sizes each relay UDP socket's buffers; zero means the
	// relay's default.
	SocketBuffer int
	// NoUDPGRO turns off receiving GSO runs in one piece (for
	// measurements); BufferedCaptures writes captures through the page
	// cache even where direct I/O is possible.
	NoUDPGRO, BufferedCaptures bool
	// CaptureBudget bounds the bytes of the agent's capture files
	// (host.Config.CaptureBudget); 0: none.
	CaptureBudget int64
	// QemuAccel is the accelerator of QEMU nodes: "auto" (default: KVM
	// where it passes a self-test at start), "kvm" or "tcg"
	// (host.Config.QemuAccel).
	QemuAccel string
	// NoDocker turns docker nodes off; DockerInit is the static init given
	// to containers (empty: labtap-init next to the executable).
	NoDocker   bool
	DockerInit string
	// DockerUnsafe lets docker nodes run privileged or with any
	// capability (host.Config.DockerUnsafe).
	DockerUnsafe bool
	// CloudUplink lets a cloud's ethernet port take the agent's own
	// uplink (host.Config.CloudAllowUplink).
	CloudUplink bool
	// Reached are the addresses (IPs; host names are skipped) the agent
	// is reached at besides its listener's, ConsoleBind and TunnelBind:
	// the advertised one, the controller's for its local agent. The
	// interfaces holding them are the agent's uplink.
	Reached []string
	// Secret, when set, is required on every API call.
	Secret string
	// TLS, when set, serves the API over TLS (AgentTLS.ServerTLS: mutual
	// TLS with the controller).
	TLS *tls.Config
	// FilterDeadline bounds the compiling of a link's bpf filter (0: 2 s).
	FilterDeadline time.Duration
	// ProtectedPorts are TCP ports node consoles may not rlogin to (the
	// controller's, for the local agent); the agent's own API port is
	// added.
	ProtectedPorts []int
	// MaxConns caps the API's open connections (0: netguard.DefaultMaxConns);
	// MaxConnsPerIP caps them per client address (0: no cap).
	MaxConns, MaxConnsPerIP int
	// Sandbox confines node programs (host.Config.Sandbox); nil runs them
	// unconfined.
	Sandbox *sandbox.Sandbox
	// ConsolesGated starts the agent with its node consoles closed to
	// client addresses the controller has not granted
	// (host.Config.ConsolesGated).
	ConsolesGated bool
	Logger        *slog.Logger
}

// Run serves the agent on ln until ctx is done, then stops its captures,
// relays and nodes (capture files stay valid) and returns.
func Run(ctx context.Context, cfg Config, ln net.Listener) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = netguard.DefaultMaxConns()
	}
	protected := slices.Clone(cfg.ProtectedPorts)
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		protected = append(protected, a.Port)
	}
	ln = netguard.Listen(ln, netguard.Config{MaxConns: cfg.MaxConns, MaxPerIP: cfg.MaxConnsPerIP, Logger: cfg.Logger})
	if cfg.TLS != nil {
		ln = pki.Listen(ln, cfg.TLS) // inside the caps: a refused connection is refused before any handshake
	}
	h := host.New(host.Config{
		ComputeID:        cfg.ComputeID,
		DataDir:          cfg.DataDir,
		ConsoleHost:      cfg.ConsoleHost,
		ConsoleBind:      cfg.ConsoleBind,
		ConsolePorts:     cfg.ConsolePorts,
		VPCS:             cfg.VPCS,
		SoftwareVersion:  cfg.SoftwareVersion,
		TunnelBind:       cfg.TunnelBind,
		SocketBuffer:     cfg.SocketBuffer,
		NoUDPGRO:         cfg.NoUDPGRO,
		BufferedCaptures: cfg.BufferedCaptures,
		CaptureBudget:    cfg.CaptureBudget,
		QemuAccel:        cfg.QemuAccel,
		NoDocker:         cfg.NoDocker,
		DockerInit:       cfg.DockerInit,
		DockerUnsafe:     cfg.DockerUnsafe,
		CloudAllowUplink: cfg.CloudUplink,
		AgentAddrs:       agentAddrs(ln.Addr(), append([]string{cfg.ConsoleBind, cfg.TunnelBind, cfg.ConsoleHost}, cfg.Reached...)),
		FilterDeadline:   cfg.FilterDeadline,
		ProtectedPorts:   protected,
		Sandbox:          cfg.Sandbox,
		ConsolesGated:    cfg.ConsolesGated,
		Logger:           cfg.Logger,
	})
	// Say at start what this agent cannot run, and why (no Engine, no
	// privileges): docker is then left out of its node types. Run waits
	// for it (the Engine is asked within 3 s).
	var said sync.WaitGroup
	defer said.Wait()
	said.Go(func() {
		if why := h.DockerUnavailable(); why != "" {
			cfg.Logger.Warn("docker nodes unavailable", "why", why)
		} else {
			cfg.Logger.Info("docker nodes available")
		}
	})
	// And whether KVM runs guests: under --qemu-accel auto its self-test
	// (at most a second) decides between KVM and TCG for every VM.
	said.Go(func() {
		if err := h.KVMProblem(); err != nil {
			cfg.Logger.Warn("QEMU nodes run under TCG (slow): KVM does not run guests here", "why", err)
		}
	})
	reg := metrics.NewRegistry()
	reg.MustRegister(newLinkCollector(h))
	handler := api.NewHandler(Parts(h), api.Config{
		Secret:   cfg.Secret,
		Metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Requests: metrics.NewHTTP(reg),
		Logger:   cfg.Logger,
	})
	err := api.Serve(ctx, ln, handler, func() { h.Close() })
	h.Close()
	return err
}

// Parts are the parts of h the agent's API drives.
func Parts(h *host.Host) api.Parts {
	return api.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}
}

// DefaultDataDir is where labtap keeps its data when told nothing:
// $XDG_DATA_HOME/labtap, else ~/.local/share/labtap, else ./labtap-data.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "labtap")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "labtap")
	}
	return "labtap-data"
}

// agentAddrs are the IP addresses among the listener's and hosts, the
// wildcard and host names left out.
func agentAddrs(ln net.Addr, hosts []string) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		a = a.Unmap()
		if a.IsValid() && !a.IsUnspecified() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if ap, err := netip.ParseAddrPort(ln.String()); err == nil {
		add(ap.Addr())
	}
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			add(a)
		}
	}
	return out
}
