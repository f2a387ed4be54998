// The agent command runs a labtap compute agent: it runs lab nodes (VPCS,
// and the cloud, hub and switch nodes it implements itself), relays their
// frames between UDP tunnel ends through each link's filters, and writes
// link captures, all driven by a labtap controller over HTTP.
//
// Usage:
//
//	agent [--listen 127.0.0.1:3081] [--data-dir DIR] [--compute-id ID] [--advertise HOST]
//	      [--controller http://[user:password@]host:3080] [--tunnel-bind IP]
//	      [--socket-buffer BYTES] [--udp-gro=false] [--capture-direct-io=false] [--qemu-accel auto|kvm|tcg]
//	      [--docker=false] [--docker-init PATH] [--docker-allow-unsafe] [--node-uids LO-HI]
//	agent --version
//
// Every flag has an environment twin (LABTAP_LISTEN, LABTAP_DATA_DIR,
// LABTAP_COMPUTE_ID, LABTAP_ADVERTISE, LABTAP_CONTROLLER, LABTAP_TUNNEL_BIND,
// LABTAP_VPCS, LABTAP_SOCKET_BUFFER, LABTAP_UDP_GRO, LABTAP_CAPTURE_DIRECT_IO, LABTAP_QEMU_ACCEL, LABTAP_NODE_UIDS,
// LABTAP_DOCKER_NODES, LABTAP_DOCKER_INIT, LABTAP_DOCKER_ALLOW_UNSAFE,
// LABTAP_LOG_LEVEL, LABTAP_LOG_FORMAT); a flag wins over its variable, and a bad value of
// either exits with code 2. LABTAP_SECRET, when set, is the shared secret the controller
// must send on every call: set it on every agent that listens beyond
// loopback (and on the controller).
//
// With --controller, the agent registers itself as a compute of that
// controller (GNS3's POST /v2/computes), under its compute id, at its
// advertised address.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/server"
	"github.com/labtap/labtap/internal/cli"
	"github.com/labtap/labtap/internal/netguard"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/pcapfilter"
	"golang.org/x/sync/errgroup"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	sandbox.Main()    // a node's launcher runs this binary: it never returns
	pcapfilter.Main() // a filter compile runs this binary as its child: it never returns
	cli.Exit("agent", run(os.Args[1:]))
}

// options are the agent's settings, from flags and environment; the tags
// are the flags' names, variables, defaults and help.
type options struct {
	Listen          string        `name:"listen" env:"LABTAP_LISTEN" default:"127.0.0.1:3081" help:"HTTP listen address of the agent API."`
	Advertise       string        `name:"advertise" env:"LABTAP_ADVERTISE" help:"Address the controller and other agents reach this host on (default: the listen host)."`
	Controller      string        `name:"controller" env:"LABTAP_CONTROLLER" help:"Register with the controller at this URL (http://[user:password@]host:port)."`
	TunnelBind      string        `name:"tunnel-bind" env:"LABTAP_TUNNEL_BIND" help:"IP address the ends of tunnels to other agents bind to (default: the listen host)."`
	DataDir         string        `name:"data-dir" env:"LABTAP_DATA_DIR" default:"${data_dir}" help:"Directory for project files and captures."`
	ComputeID       string        `name:"compute-id" env:"LABTAP_COMPUTE_ID" default:"${hostname}" help:"The id the controller knows this agent by."`
	VPCS            string        `name:"vpcs" env:"LABTAP_VPCS" default:"vpcs" help:"vpcs executable."`
	Docker          bool          `name:"docker" env:"LABTAP_DOCKER_NODES" default:"true" negatable:"" help:"Run docker nodes where a Docker Engine answers and the agent has the privileges."`
	DockerInit      string        `name:"docker-init" env:"LABTAP_DOCKER_INIT" help:"Static init given to containers (default: labtap-init next to this executable)."`
	DockerUnsafe    bool          `name:"docker-allow-unsafe" env:"LABTAP_DOCKER_ALLOW_UNSAFE" default:"false" help:"Let docker nodes run privileged or add capabilities outside the allowlist (SYS_ADMIN, SYS_MODULE...): such a node can take this host's root. Each start of one is logged as a warning."`
	ConsoleHost     string        `name:"console-host" env:"LABTAP_CONSOLE_HOST" help:"Host clients are told to reach node consoles at (default: the advertised host); e.g. 127.0.0.1 in a container whose console ports are published."`
	ConsolePorts    string        `name:"console-ports" env:"LABTAP_CONSOLE_PORTS" help:"Range LO-HI node consoles take their TCP ports from (default: any free port)."`
	UDPGRO          bool          `name:"udp-gro" env:"LABTAP_UDP_GRO" default:"true" negatable:"" help:"Take runs of datagrams a peer sent with UDP GSO in one piece (UDP_GRO); false for measurements."`
	CaptureDirectIO bool          `name:"capture-direct-io" env:"LABTAP_CAPTURE_DIRECT_IO" default:"true" negatable:"" help:"Write captures' full blocks with direct I/O (O_DIRECT) where the file system allows it; false writes through the page cache."`
	SocketBuffer    int           `name:"socket-buffer" env:"LABTAP_SOCKET_BUFFER" default:"${socket_buffer}" help:"Receive and send buffer of each relay UDP socket, in bytes (capped by net.core.rmem_max unless root)."`
	FilterDeadline  time.Duration `name:"filter-deadline" env:"LABTAP_FILTER_DEADLINE" default:"2s" help:"Longest a link's bpf filter may take to compile; longer is refused as too complex."`
	MaxConns        int           `name:"max-conns" env:"LABTAP_MAX_CONNS" default:"0" help:"Most API connections open at once (0: the open-file limit - 256); more are refused with 503."`
	MaxConnsPerIP   int           `name:"max-conns-per-ip" env:"LABTAP_MAX_CONNS_PER_IP" default:"0" help:"Most API connections open at once from one client address (0: no cap; the controller is one client)."`
	NodeUIDs        string        `name:"node-uids" env:"LABTAP_NODE_UIDS" help:"Range LO-HI of the uids (and gids) node programs run as, one per node, when the agent runs as root (default 1900000000-1900065535)."`
	QemuAccel       string        `name:"qemu-accel" env:"LABTAP_QEMU_ACCEL" default:"auto" enum:"auto,kvm,tcg" help:"Accelerator of QEMU nodes: auto (KVM where it passes a self-test at start, else TCG with a warning), kvm or tcg."`
	LogLevel        slog.Level    `name:"log-level" env:"LABTAP_LOG_LEVEL" default:"info" help:"debug, info, warn or error."`
	LogFormat       string        `name:"log-format" env:"LABTAP_LOG_FORMAT" default:"text" enum:"text,json" help:"Log lines as text (key=value) or json (one object per line)."`

	// Version is --version (kong prints it and the parse ends).
	Version cli.VersionFlag `name:"version" help:"Print the version and exit."`
}

// Validate rejects values that parse but make no sense; kong calls it.
func (o *options) Validate() error {
	if err := cli.ListenAddress(o.Listen); err != nil {
		return fmt.Errorf("--listen (LABTAP_LISTEN): %w", err)
	}
	if o.FilterDeadline <= 0 {
		return fmt.Errorf("--filter-deadline must be positive, not %v", o.FilterDeadline)
	}
	if o.MaxConns < 0 || o.MaxConnsPerIP < 0 {
		return fmt.Errorf("--max-conns and --max-conns-per-ip cannot be negative")
	}
	if o.SocketBuffer <= 0 {
		return fmt.Errorf("--socket-buffer must be a positive number of bytes, not %d", o.SocketBuffer)
	}
	if _, err := sandbox.ParseUIDs(o.NodeUIDs); err != nil {
		return fmt.Errorf("--node-uids: %w", err)
	}
	if _, err := cli.PortRange(o.ConsolePorts); err != nil {
		return fmt.Errorf("--console-ports: %w", err)
	}
	return nil
}

func parse(args []string) (options, error) { return parseTo(os.Stdout, args) }

// parseTo is parse printing help to stdout.
func parseTo(stdout io.Writer, args []string) (options, error) {
	var o options
	err := cli.Parse("agent", "A labtap compute agent: runs lab nodes, relays their links and writes their captures.\n\n"+
		"LABTAP_SECRET (a variable only, kept out of ps), when set, is the secret the controller must send on every call: set it on every agent that listens beyond loopback, and the same on the controller.",
		&o, map[string]string{"data_dir": server.DefaultDataDir(), "hostname": hostname(), "version": "labtap agent " + version,
			"socket_buffer": strconv.Itoa(bridge.DefaultBufferBytes)}, stdout, args)
	return o, err
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	log := cli.Logger(o.LogFormat, o.LogLevel)
	if limit, err := netguard.FileLimit(); err == nil {
		log.Info("open-file limit", "limit", limit)
	}

	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return cli.FlagError("data-dir", "LABTAP_DATA_DIR", err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return cli.FlagError("listen", "LABTAP_LISTEN", err)
	}
	bindHost, _, _ := net.SplitHostPort(ln.Addr().String())
	consoleHost := o.Advertise
	if consoleHost == "" {
		consoleHost = bindHost
	}
	if ip := net.ParseIP(consoleHost); ip != nil && ip.IsUnspecified() && o.Controller != "" {
		ln.Close()
		return errors.New("--controller needs --advertise when listening on every address: the controller must know where to reach this agent")
	}
	secret := os.Getenv("LABTAP_SECRET")
	log.Info("agent listening", "addr", ln.Addr().String(), "compute_id", o.ComputeID,
		"data_dir", o.DataDir, "console_host", consoleHost, "secret", secret != "", "version", version,
		"socket_buffer", o.SocketBuffer)
	if ip := net.ParseIP(bindHost); secret == "" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("the agent API is reachable beyond this host without a shared secret: anyone who reaches it can run programs here; set LABTAP_SECRET on the agent and its controller")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	uids, _ := sandbox.ParseUIDs(o.NodeUIDs) // checked by Validate
	sb, err := sandbox.New(ctx, sandbox.Config{UIDs: uids, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	if o.Controller != "" {
		_, portStr, _ := net.SplitHostPort(ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		g.Go(func() error {
			err := server.Register(gctx, server.Registration{
				Controller: o.Controller, ComputeID: o.ComputeID, Name: o.ComputeID,
				Host: consoleHost, Port: port, Secret: secret, Logger: log,
			})
			if err != nil && gctx.Err() == nil {
				// The agent serves on: the controller can still add it.
				log.Error("register with the controller", "err", err)
			}
			return nil
		})
	}
	consolePorts, _ := cli.PortRange(o.ConsolePorts) // checked by Validate
	reportedConsole := consoleHost
	if o.ConsoleHost != "" {
		reportedConsole = o.ConsoleHost
	}
	g.Go(func() error {
		return server.Run(gctx, server.Config{
			ComputeID:        o.ComputeID,
			DataDir:          o.DataDir,
			ConsoleHost:      reportedConsole,
			ConsolePorts:     consolePorts,
			ConsoleBind:      bindHost,
			VPCS:             o.VPCS,
			NoDocker:         !o.Docker,
			DockerInit:       o.DockerInit,
			DockerUnsafe:     o.DockerUnsafe,
			SoftwareVersion:  version,
			SocketBuffer:     o.SocketBuffer,
			NoUDPGRO:         !o.UDPGRO,
			BufferedCaptures: !o.CaptureDirectIO,
			TunnelBind:       o.TunnelBind,
			QemuAccel:        o.QemuAccel,
			FilterDeadline:   o.FilterDeadline,
			MaxConns:         o.MaxConns,
			MaxConnsPerIP:    o.MaxConnsPerIP,
			Sandbox:          sb,
			Secret:           secret,
			Logger:           log,
		}, ln)
	})
	return g.Wait()
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "agent"
	}
	return h
}
