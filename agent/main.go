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
// With --join https://ctl:3080, --token (LABTAP_JOIN_TOKEN) and --ca-sha256
// (LABTAP_CA_SHA256), the agent joins a controller started with --tls auto:
// it gets its own certificate from the controller's CA and serves its API
// over mutual TLS, to the controller's certificate only (LABTAP_JOIN,
// LABTAP_TLS_CERT, LABTAP_TLS_KEY and LABTAP_TLS_CA twin the join and
// --tls-cert/--tls-key/--tls-ca, a certificate the operator issued).
// LABTAP_SECRET is deprecated.
//
// With --controller, the agent registers itself as a compute of that
// controller (GNS3's POST /v2/computes), under its compute id, at its
// advertised address.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/server"
	"github.com/labtap/labtap/internal/cli"
	"github.com/labtap/labtap/internal/netguard"
	"github.com/labtap/labtap/internal/pki"
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
	Join            string        `name:"join" env:"LABTAP_JOIN" help:"Join the controller at this https:// URL (started with --tls auto) with --token and --ca-sha256: the agent gets its own certificate and takes calls over mutual TLS from then on (kept in the data directory's tls/; later starts need neither)."`
	Token           string        `name:"token" env:"LABTAP_JOIN_TOKEN" help:"One-time join token an admin made (POST /v3/computes/join-tokens); prefer LABTAP_JOIN_TOKEN: flags show in ps."`
	CASHA256        string        `name:"ca-sha256" env:"LABTAP_CA_SHA256" help:"SHA-256 fingerprint of the controller's CA (logged at its start as ca_sha256): the join, or --controller https://..., trusts nothing else."`
	TLSCert         string        `name:"tls-cert" env:"LABTAP_TLS_CERT" help:"Serve the API over mutual TLS with this PEM certificate (one the operator issued, instead of joining); needs --tls-key and --tls-ca."`
	TLSKey          string        `name:"tls-key" env:"LABTAP_TLS_KEY" help:"PEM private key of --tls-cert."`
	TLSCA           string        `name:"tls-ca" env:"LABTAP_TLS_CA" help:"PEM certificate of the CA whose controller certificate (common name labtap-controller) alone may call this agent."`
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
	CaptureBudget   string        `name:"capture-disk-budget" env:"LABTAP_CAPTURE_DISK_BUDGET" default:"0" help:"Most bytes the capture files of every project may hold on this agent (e.g. 20GiB, 500MiB; 0: no bound): past it the oldest stopped files are removed, and a new capture is refused while running ones alone hold it."`
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
	if _, err := cli.ByteSize(o.CaptureBudget); err != nil {
		return fmt.Errorf("--capture-disk-budget (LABTAP_CAPTURE_DISK_BUDGET): %w", err)
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
	if o.Join != "" && (o.Token == "" || o.CASHA256 == "") {
		return fmt.Errorf("--join needs --token (LABTAP_JOIN_TOKEN) and --ca-sha256 (LABTAP_CA_SHA256)")
	}
	if len(o.Token) > 128 {
		return fmt.Errorf("--token is at most 128 characters")
	}
	if n := boolCount(o.TLSCert != "", o.TLSKey != "", o.TLSCA != ""); n != 0 && n != 3 {
		return fmt.Errorf("--tls-cert, --tls-key and --tls-ca go together")
	}
	if o.TLSCert != "" && o.Join != "" {
		return fmt.Errorf("--join gets a certificate: give it or --tls-cert, not both")
	}
	return nil
}

func boolCount(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
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
	budget, _ := cli.ByteSize(o.CaptureBudget) // checked by Validate
	bindHost, _, _ := net.SplitHostPort(ln.Addr().String())
	consoleHost := o.Advertise
	if consoleHost == "" {
		consoleHost = bindHost
	}
	if ip := net.ParseIP(consoleHost); ip != nil && ip.IsUnspecified() && (o.Controller != "" || o.Join != "") {
		ln.Close()
		return errors.New("--controller and --join need --advertise when listening on every address: the controller must know where to reach this agent (its certificate is issued for that name)")
	}
	secret := os.Getenv("LABTAP_SECRET")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	files, joined := server.JoinedTLS(o.DataDir)
	switch {
	case o.TLSCert != "":
		files, joined = server.AgentTLS{CertFile: o.TLSCert, KeyFile: o.TLSKey, CAFile: o.TLSCA}, true
	case joined && o.Join != "":
		log.Info("joined before: the certificate in the data directory is used, --join is not", "cert_file", files.CertFile)
	case o.Join != "":
		// Listening already, so the port is known; nothing is served
		// until the join ends.
		files, err = server.JoinController(ctx, server.Join{Controller: o.Join, Token: o.Token, CASHA256: o.CASHA256,
			ComputeID: o.ComputeID, Name: o.ComputeID, Host: consoleHost, Port: port, DataDir: o.DataDir, Logger: log})
		if err != nil {
			ln.Close()
			return err
		}
		joined = true
	}
	var serverTLS *tls.Config
	if joined {
		if serverTLS, err = files.ServerTLS(); err != nil {
			ln.Close()
			return fmt.Errorf("agent TLS: %w", err)
		}
	}
	log.Info("agent listening", "addr", ln.Addr().String(), "compute_id", o.ComputeID,
		"data_dir", o.DataDir, "console_host", consoleHost, "secret", secret != "", "mutual_tls", joined, "version", version,
		"socket_buffer", o.SocketBuffer)
	if secret != "" {
		log.Warn("LABTAP_SECRET is deprecated: one secret shared by every agent lets one stolen agent host pose as the controller to the others; join this agent instead (--join, --token, --ca-sha256)")
	}
	if ip := net.ParseIP(bindHost); secret == "" && !joined && (ip == nil || !ip.IsLoopback()) {
		log.Warn("the agent API is reachable beyond this host without mutual TLS or a shared secret: anyone who reaches it can run programs here; join it to its controller (--join)")
	}

	uids, _ := sandbox.ParseUIDs(o.NodeUIDs) // checked by Validate
	sb, err := sandbox.New(ctx, sandbox.Config{UIDs: uids, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	if o.Controller != "" && !joined {
		var pin []byte
		var ctlHost string
		if o.CASHA256 != "" {
			if pin, err = pki.ParseFingerprint(o.CASHA256); err != nil {
				ln.Close()
				return cli.FlagError("ca-sha256", "LABTAP_CA_SHA256", err)
			}
			if u, err := url.Parse(o.Controller); err == nil {
				ctlHost = u.Hostname()
			}
		}
		g.Go(func() error {
			reg := server.Registration{
				Controller: o.Controller, ComputeID: o.ComputeID, Name: o.ComputeID,
				Host: consoleHost, Port: port, Secret: secret, Logger: log,
			}
			if pin != nil {
				// An https controller of --tls auto, met by its CA's fingerprint.
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.TLSClientConfig = pki.PinnedClientConfig(pin, ctlHost)
				reg.Transport = tr
			}
			err := server.Register(gctx, reg)
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
			CaptureBudget:    budget,
			TunnelBind:       o.TunnelBind,
			QemuAccel:        o.QemuAccel,
			FilterDeadline:   o.FilterDeadline,
			MaxConns:         o.MaxConns,
			MaxConnsPerIP:    o.MaxConnsPerIP,
			Sandbox:          sb,
			Secret:           secret,
			TLS:              serverTLS,
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
