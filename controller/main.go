// The controller command runs the labtap controller: GNS3's /v2 HTTP API
// (so the GNS3 GUI, web UI and GNS3 scripts work against it), the projects
// it keeps on disk, and, unless told otherwise, an embedded local agent
// (compute "local") that runs nodes and captures on this machine. The
// controller reaches that agent over HTTP on a private loopback port, the
// same way it reaches remote agents.
//
// Usage:
//
//	controller [--listen 127.0.0.1:3080] [--data-dir DIR] [--gns3-version 2.2.59] [--advertise HOST]
//	controller --version
//
// Every flag has an environment twin (LABTAP_LISTEN, LABTAP_DATA_DIR,
// LABTAP_GNS3_VERSION, LABTAP_ADVERTISE, LABTAP_LOCAL_AGENT, LABTAP_VPCS, LABTAP_DOCKER_NODES, LABTAP_DOCKER_INIT, LABTAP_DOCKER_ALLOW_UNSAFE, LABTAP_USER,
// LABTAP_PASSWORD, LABTAP_MAX_JSON_BODY, LABTAP_AUTO_CLOSE_GRACE,
// LABTAP_LOG_LEVEL, LABTAP_LOG_FORMAT, LABTAP_QEMU_ACCEL, LABTAP_NODE_UIDS, LABTAP_PPROF_LISTEN, LABTAP_ALLOWED_ORIGINS, LABTAP_TLS, LABTAP_TLS_CERT, LABTAP_TLS_KEY); a flag wins over its variable, and a bad value of
// either exits with code 2. LABTAP_SECRET is the secret shared with remote agents
// (deprecated: with --tls auto, agents join with their own certificates).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/server"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/labcapture"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/symbols"
	"github.com/labtap/labtap/controller/topology"
	"github.com/labtap/labtap/controller/web"
	"github.com/labtap/labtap/internal/cli"
	"github.com/labtap/labtap/internal/netguard"
	"github.com/labtap/labtap/internal/pki"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/metrics"
	"github.com/labtap/labtap/pcapfilter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultGNS3Version is the GNS3 release whose GUI connects by default.
const defaultGNS3Version = "2.2.59"

func main() {
	sandbox.Main()    // a node's launcher runs this binary: it never returns
	pcapfilter.Main() // a filter compile runs this binary as its child: it never returns
	cli.Exit("controller", run(os.Args[1:]))
}

// options are the controller's settings, from flags and environment; the
// tags are the flags' names, variables, defaults and help.
type options struct {
	Listen         string        `name:"listen" env:"LABTAP_LISTEN" default:"127.0.0.1:3080" help:"HTTP listen address of the /v2 API."`
	DataDir        string        `name:"data-dir" env:"LABTAP_DATA_DIR" default:"${data_dir}" help:"Directory for projects, captures and symbols."`
	GNS3Version    string        `name:"gns3-version" env:"LABTAP_GNS3_VERSION" default:"${gns3_version}" help:"GNS3 version reported to clients; the GNS3 GUI needs its own x.y.z."`
	LocalAgent     bool          `name:"local-agent" env:"LABTAP_LOCAL_AGENT" default:"true" negatable:"" help:"Run an embedded agent as compute \"local\"."`
	VPCS           string        `name:"vpcs" env:"LABTAP_VPCS" default:"vpcs" help:"vpcs executable of the local agent."`
	Docker         bool          `name:"docker" env:"LABTAP_DOCKER_NODES" default:"true" negatable:"" help:"Let the local agent run docker nodes where a Docker Engine answers and it has the privileges."`
	DockerInit     string        `name:"docker-init" env:"LABTAP_DOCKER_INIT" help:"Static init given to containers (default: labtap-init next to this executable)."`
	DockerUnsafe   bool          `name:"docker-allow-unsafe" env:"LABTAP_DOCKER_ALLOW_UNSAFE" default:"false" help:"Let the local agent's docker nodes run privileged or add capabilities outside the allowlist (SYS_ADMIN, SYS_MODULE...): such a node can take this host's root. Each start of one is logged as a warning."`
	CloudUplink    bool          `name:"cloud-allow-uplink" env:"LABTAP_CLOUD_ALLOW_UPLINK" default:"false" help:"Let a cloud node's ethernet port on the local agent take this host's uplink (the interface of a default route or of the address the controller listens or is reached at): bridging a lab there can cut the host off and leak lab traffic."`
	User           string        `name:"user" env:"LABTAP_USER" help:"HTTP Basic user; with --password, turns authentication on."`
	Password       string        `name:"password" env:"LABTAP_PASSWORD" help:"HTTP Basic password (prefer LABTAP_PASSWORD: flags show in ps)."`
	MaxJSONBody    int           `name:"max-json-body" env:"LABTAP_MAX_JSON_BODY" default:"1048576" help:"Largest JSON request body, in bytes."`
	MaxImportSize  int64         `name:"max-import-size" env:"LABTAP_MAX_IMPORT_SIZE" default:"10737418240" help:"Largest project archive an import takes, in bytes (it streams to disk)."`
	AutoCloseGrace time.Duration `name:"auto-close-grace" env:"LABTAP_AUTO_CLOSE_GRACE" default:"5s" help:"How long a project with auto_close stays opened after its last notification listener leaves."`
	LogLevel       slog.Level    `name:"log-level" env:"LABTAP_LOG_LEVEL" default:"info" help:"debug, info, warn or error."`
	LogFormat      string        `name:"log-format" env:"LABTAP_LOG_FORMAT" default:"text" enum:"text,json" help:"Log lines as text (key=value) or json (one object per line)."`
	Advertise      string        `name:"advertise" env:"LABTAP_ADVERTISE" help:"Address agents on other hosts reach this host's local agent at, for links to it (default: the listen host)."`
	TrustedAgents  []string      `name:"trusted-agents" env:"LABTAP_TRUSTED_AGENTS" help:"Host patterns (globs such as *.lab.example, or CIDR prefixes), comma-separated, a compute added by POST /v2/computes may be given LABTAP_SECRET for when its request asks (use_controller_secret); empty: never."`
	MaxConns       int           `name:"max-conns" env:"LABTAP_MAX_CONNS" default:"0" help:"Most API connections open at once (0: the open-file limit - 256); more are refused with 503."`
	MaxConnsPerIP  int           `name:"max-conns-per-ip" env:"LABTAP_MAX_CONNS_PER_IP" default:"512" help:"Most API connections open at once from one client address (0: no cap)."`
	FilterDeadline time.Duration `name:"filter-deadline" env:"LABTAP_FILTER_DEADLINE" default:"2s" help:"Longest a link's bpf filter may take to compile on the local agent, and a display filter of the capture view; longer is refused as too complex."`
	ConsoleHost    string        `name:"console-host" env:"LABTAP_CONSOLE_HOST" help:"Host clients are told to reach the local agent's node consoles at (default: the listen host)."`
	ConsolePorts   string        `name:"console-ports" env:"LABTAP_CONSOLE_PORTS" help:"Range LO-HI the local agent's node consoles take their TCP ports from (default: any free port)."`
	NodeUIDs       string        `name:"node-uids" env:"LABTAP_NODE_UIDS" help:"Range LO-HI of the uids (and gids) the local agent's node programs run as, one per node, when the agent runs as root (default 1900000000-1900065535)."`
	QemuAccel      string        `name:"qemu-accel" env:"LABTAP_QEMU_ACCEL" default:"auto" enum:"auto,kvm,tcg" help:"Accelerator of the local agent's QEMU nodes: auto (KVM where it passes a self-test at start, else TCG with a warning), kvm or tcg."`
	CaptureBudget  string        `name:"capture-disk-budget" env:"LABTAP_CAPTURE_DISK_BUDGET" default:"0" help:"Most bytes the capture files of every project may hold on the local agent (e.g. 20GiB; 0: no bound): past it the oldest stopped files are removed; a new capture is refused while running ones alone hold it."`
	PprofListen    string        `name:"pprof-listen" env:"LABTAP_PPROF_LISTEN" help:"Serve Go's profiles (/debug/pprof/, behind the API's authentication when it is on) on this address, e.g. 127.0.0.1:6060; empty: off."`
	TLS            string        `name:"tls" env:"LABTAP_TLS" default:"off" enum:"off,auto" help:"auto: serve HTTPS with a private CA and server certificate made in the data directory's tls/ on first start (its SHA-256 fingerprint is logged at start), and let agents join (see --tls-cert for your own certificate)."`
	TLSCert        string        `name:"tls-cert" env:"LABTAP_TLS_CERT" help:"Serve HTTPS with this PEM certificate (chain); read again when the file changes. Needs --tls-key."`
	TLSKey         string        `name:"tls-key" env:"LABTAP_TLS_KEY" help:"PEM private key of --tls-cert; read again when the file changes."`
	Placement      string        `name:"placement" env:"LABTAP_PLACEMENT" default:"spread" enum:"spread,pack" help:"Where a node created with no compute_id (or \"auto\") goes: spread (a project's first node on the agent with the fewest nodes per CPU) or pack (on the fullest agent with room); a project's later nodes join its agent while it has room."`
	ConsoleOpen    bool          `name:"console-open" env:"LABTAP_CONSOLE_OPEN" default:"false" help:"Keep node consoles open to every client address, as without users (single-user labs). Otherwise, with --user/--password, an agent lets an address in to a node's console only after a user allowed Node.Console read the node from it."`
	ConsoleIdle    time.Duration `name:"console-grant-idle" env:"LABTAP_CONSOLE_GRANT_IDLE" default:"1h" help:"How long a console grant lasts after its user's last request on the node or its project (a GET, an open, a start...)."`
	AllowedOrigins []string      `name:"allowed-origins" env:"LABTAP_ALLOWED_ORIGINS" help:"Browser origins (scheme://host[:port]), comma-separated, besides the server's own, whose pages may change state and open WebSockets (e.g. a GNS3 web UI served elsewhere); others get 403."`
	AuditMaxSize   int           `name:"audit-max-size" env:"LABTAP_AUDIT_MAX_SIZE" default:"100" help:"Size in megabytes at which the audit trail (<data-dir>/audit/audit.log) is rotated."`
	AuditKeep      int           `name:"audit-keep" env:"LABTAP_AUDIT_KEEP" default:"10" help:"Rotated audit trail files kept; older ones are deleted."`
	pinVersion     bool          // --gns3-version or its variable was given

	// Version is --version (kong prints it and the parse ends).
	Version cli.VersionFlag `name:"version" help:"Print the version and exit."`
}

// Validate rejects values that parse but make no sense; kong calls it.
func (o *options) Validate() error {
	if err := cli.ListenAddress(o.Listen); err != nil {
		return fmt.Errorf("--listen (LABTAP_LISTEN): %w", err)
	}
	if _, err := cli.ByteSize(o.CaptureBudget); err != nil {
		return fmt.Errorf("--capture-disk-budget (LABTAP_CAPTURE_DISK_BUDGET): %w", err)
	}
	if o.MaxJSONBody <= 0 {
		return fmt.Errorf("--max-json-body must be a positive number of bytes, not %d", o.MaxJSONBody)
	}
	if o.FilterDeadline <= 0 {
		return fmt.Errorf("--filter-deadline must be positive, not %s", o.FilterDeadline)
	}
	if o.ConsoleIdle < time.Second || o.ConsoleIdle > 24*time.Hour {
		return fmt.Errorf("--console-grant-idle must be 1s to 24h, not %s", o.ConsoleIdle)
	}
	if o.MaxConns < 0 || o.MaxConnsPerIP < 0 {
		return fmt.Errorf("--max-conns and --max-conns-per-ip cannot be negative")
	}
	if o.MaxImportSize <= 0 {
		return fmt.Errorf("--max-import-size must be a positive number of bytes, not %d", o.MaxImportSize)
	}
	if o.AuditMaxSize <= 0 || o.AuditKeep < 0 {
		return fmt.Errorf("--audit-max-size must be a positive number of megabytes and --audit-keep not negative, not %d and %d", o.AuditMaxSize, o.AuditKeep)
	}
	if o.AutoCloseGrace < 0 {
		return fmt.Errorf("--auto-close-grace must not be negative, not %s", o.AutoCloseGrace)
	}
	if _, err := sandbox.ParseUIDs(o.NodeUIDs); err != nil {
		return fmt.Errorf("--node-uids: %w", err)
	}
	if _, err := cli.PortRange(o.ConsolePorts); err != nil {
		return fmt.Errorf("--console-ports: %w", err)
	}
	if _, err := api.ParseOrigins(o.AllowedOrigins); err != nil {
		return fmt.Errorf("--allowed-origins: %w", err)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("--tls-cert (LABTAP_TLS_CERT) and --tls-key (LABTAP_TLS_KEY) go together")
	}
	if o.TLSCert != "" && o.TLS == "auto" {
		return fmt.Errorf("--tls auto makes its own certificate: give it or --tls-cert/--tls-key, not both")
	}
	return nil
}

func parse(args []string) (options, error) { return parseTo(os.Stdout, args) }

// parseTo is parse printing help to stdout.
func parseTo(stdout io.Writer, args []string) (options, error) {
	var o options
	err := cli.Parse("controller", "The labtap controller: GNS3's /v2 API, projects on disk and an embedded local agent.\n\n"+
		"LABTAP_SECRET (a variable only, kept out of ps) is the secret shared with remote agents: set the same on each. "+
		"Deprecated: with --tls auto, agents join (agent --join) and are called over mutual TLS.",
		&o, map[string]string{"data_dir": server.DefaultDataDir(), "gns3_version": defaultGNS3Version,
			"version": "labtap controller " + version}, stdout, args)
	// A version set by hand is what every client gets; otherwise a GNS3
	// GUI of any 2.2 release gets its own.
	o.pinVersion = os.Getenv("LABTAP_GNS3_VERSION") != "" // empty counts as unset, as for every variable
	for _, a := range args {
		if a == "--gns3-version" || strings.HasPrefix(a, "--gns3-version=") {
			o.pinVersion = true
		}
	}
	return o, err
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	log := cli.Logger(o.LogFormat, o.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if limit, err := netguard.FileLimit(); err == nil {
		log.Info("open-file limit", "limit", limit)
	}
	if o.MaxConns == 0 {
		o.MaxConns = netguard.DefaultMaxConns()
	}
	projectsDir := filepath.Join(o.DataDir, "projects")
	if err := os.MkdirAll(projectsDir, 0o755); err != nil {
		return cli.FlagError("data-dir", "LABTAP_DATA_DIR", err)
	}
	audit, err := openAudit(o.DataDir, o.AuditMaxSize, o.AuditKeep)
	if err != nil {
		return cli.FlagError("data-dir", "LABTAP_DATA_DIR", err)
	}
	defer audit.Close()
	tcpLn, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return cli.FlagError("listen", "LABTAP_LISTEN", err)
	}
	// The profiles' listener is bound before anything starts, so an
	// address that cannot be bound ends the start-up with nothing running.
	var pln net.Listener
	if o.PprofListen != "" {
		if pln, err = net.Listen("tcp", o.PprofListen); err != nil {
			tcpLn.Close()
			return err
		}
	}
	// Past the caps, or out of descriptors, the API refuses or waits;
	// it never stops accepting.
	ln := netguard.Listen(tcpLn, netguard.Config{MaxConns: o.MaxConns, MaxPerIP: o.MaxConnsPerIP, Logger: log.With("component", "listener")})
	listenHost, listenPort := splitHostPort(ln.Addr())
	tlsOn, ca, err := serveTLS(o, listenHost, log)
	if err != nil {
		tcpLn.Close()
		return err
	}
	enroll, agentTLS, err := enrollment(ca, o)
	if err != nil {
		tcpLn.Close()
		return err
	}
	if os.Getenv("LABTAP_SECRET") != "" {
		log.Warn("LABTAP_SECRET is deprecated: one secret shared by every agent lets one stolen agent host pose as the controller to the others; start the controller with --tls auto and join each agent with its own certificate (agent --join)")
	}
	scheme := "http"
	if tlsOn != nil {
		scheme = "https"
	}
	log.Info("controller listening", "addr", ln.Addr().String(), "scheme", scheme, "data_dir", o.DataDir,
		"gns3_version", o.GNS3Version, "local_agent", o.LocalAgent, "auth", o.User != "" && o.Password != "",
		"version", version)
	warnIfOpen(log, tcpLn.Addr(), o.User != "" && o.Password != "")

	g, gctx := errgroup.WithContext(ctx)
	// Capture streams outlive gctx a little: at shutdown the local agent
	// closes its captures first, which ends their streams cleanly, and only
	// then are streams from other agents (whose captures go on) cut.
	streamCtx, cancelStreams := context.WithCancel(context.Background())
	defer cancelStreams()
	agentDone := make(chan struct{})
	// Notifications: projects left without listeners for the grace period
	// are closed if their auto_close says so.
	var projects *project.Service
	hub := notify.New(notify.Config{
		IdleGrace: o.AutoCloseGrace,
		OnIdle:    func(id string) { projects.AutoCloseIdle(gctx, id) },
	})
	defer hub.Close()
	events := &api.Events{Hub: hub, Version: o.GNS3Version}
	registry := compute.NewRegistry(compute.RegistryConfig{
		Client:        compute.NewClient(compute.ClientConfig{Retries: compute.DefaultRetries, TLS: agentTLS, Logger: log}),
		Path:          filepath.Join(o.DataDir, "computes.json"),
		Secret:        os.Getenv("LABTAP_SECRET"),
		TrustedAgents: o.TrustedAgents,
		OnChange:      events.ComputeChanged,
		Logger:        log.With("component", "computes"),
	})
	var enroller api.Enroller // a nil *compute.Enrollment would not be a nil Enroller
	if enroll != nil {
		registry.SetEnrollment(enroll)
		enroller = enroll
	}
	if !o.LocalAgent {
		close(agentDone)
	} else {
		agentLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		secret := randomSecret()
		// GNS3 reports its own compute with the controller's address, and
		// 0.0.0.0 as 127.0.0.1. Links from other agents reach the local
		// one there, so --advertise names it when the listen address will
		// not do.
		advertised := listenHost
		if ip := net.ParseIP(advertised); ip != nil && ip.IsUnspecified() {
			advertised = "127.0.0.1"
		}
		tunnelBind := ""
		if o.Advertise != "" {
			advertised = o.Advertise
			if net.ParseIP(o.Advertise) != nil {
				tunnelBind = o.Advertise
			}
		}
		consoleHost := listenHost
		if o.ConsoleHost != "" {
			consoleHost = o.ConsoleHost
		}
		consolePorts, _ := cli.PortRange(o.ConsolePorts) // checked by Validate
		uids, _ := sandbox.ParseUIDs(o.NodeUIDs)         // checked by Validate
		sb, err := sandbox.New(ctx, sandbox.Config{UIDs: uids, Logger: log.With("component", "local_agent")})
		if err != nil {
			agentLn.Close()
			return err
		}
		captureBudget, _ := cli.ByteSize(o.CaptureBudget) // checked by Validate
		g.Go(func() error {
			defer close(agentDone)
			return server.Run(gctx, server.Config{
				ComputeID:       project.LocalCompute,
				DataDir:         o.DataDir,
				ConsoleHost:     consoleHost,
				ConsolePorts:    consolePorts,
				ConsoleBind:     listenHost,
				VPCS:            o.VPCS,
				NoDocker:        !o.Docker,
				DockerInit:      o.DockerInit,
				DockerUnsafe:    o.DockerUnsafe,
				CloudUplink:     o.CloudUplink,
				Reached:         []string{listenHost, advertised},
				SoftwareVersion: version,
				TunnelBind:      tunnelBind,
				FilterDeadline:  o.FilterDeadline,
				QemuAccel:       o.QemuAccel,
				CaptureBudget:   captureBudget,
				ProtectedPorts:  []int{listenPort},
				Sandbox:         sb,
				Secret:          secret,
				// Closed from the start when there are users: the
				// controller grants them (api.Config.ConsolesOpen).
				ConsolesGated: o.User != "" && o.Password != "" && !o.ConsoleOpen,
				Logger:        log.With("component", "local_agent"),
			}, agentLn)
		})
		registry.Add(ctx, compute.Compute{
			ID: project.LocalCompute, Name: hostname(), Protocol: scheme, Host: advertised, Port: listenPort,
			User: o.User, URL: "http://" + agentLn.Addr().String(), Secret: secret,
		})
	}
	if err := registry.Load(ctx); err != nil {
		log.Error("load computes", "err", err)
	}
	symbolLib := symbols.New(filepath.Join(o.DataDir, "symbols"), log.With("component", "symbols"))
	// The local agent's images folder (the agent keeps it in the same
	// data directory): what include_images exports and imports install.
	localImages := ""
	if o.LocalAgent {
		localImages = filepath.Join(o.DataDir, "images")
	}
	store := &topology.Store{Dir: projectsDir, Version: o.GNS3Version}
	projects = project.NewService(project.Config{
		ProjectsDir: projectsDir,
		Computes:    registry.Agents, // the agent adapter: project.Service never sees the registry itself
		Events:      events,
		Store:       store,
		// Beside the projects, as GNS3 keeps them in its controller file.
		TemplatesFile: filepath.Join(o.DataDir, "templates.json"),
		Symbols:       symbolLib.Size,
		ImagesDir:     localImages,
		DockerUnsafe:  o.DockerUnsafe, // the embedded agent's flag: refused here as there
		Placement:     o.Placement,
		Logger:        log.With("component", "projects"),
	})
	if err := projects.Templates.Load(); err != nil {
		log.Error("load templates", "err", err)
	}
	// Agents that kept running while the controller was down still run
	// their labs and captures: projects opened at load (auto_open) and the
	// others they run are taken over as they are.
	running := registry.Agents.Running(ctx)
	for _, err := range projects.Load(ctx, running) {
		log.Error("load projects", "err", err)
	}
	for _, err := range projects.Adopt(ctx, running) {
		log.Error("adopt running projects", "err", err)
	}
	// Whole-project captures: ended, their files complete, before the
	// projects close.
	projectCaptures := labcapture.New(labcapture.Config{Projects: labcapture.ServiceProjects(projects), Logger: log.With("component", "project_captures")})
	g.Go(func() error {
		<-gctx.Done()
		projectCaptures.Close(context.WithoutCancel(gctx))
		return nil
	})
	reg := metrics.NewRegistry()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "labtap_notification_listeners",
			Help: "Listeners of the notification streams now (HTTP and WebSocket, every stream).",
		}, func() float64 { n, _ := hub.Stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "labtap_notification_listeners_dropped_total",
			Help: "Notification listeners dropped for falling behind.",
		}, func() float64 { _, d := hub.Stats(); return float64(d) }),
	)
	agents := &metrics.Agents{
		Computes: func() []string {
			var ids []string
			for _, c := range registry.List() {
				if c.Connected {
					ids = append(ids, c.ID)
				}
			}
			return ids
		},
		Fetch:  registry.Agents.Metrics,
		Logger: log.With("component", "metrics"),
	}
	// --- access: users, groups, roles and ACL of /v3/access ---
	accessSvc, err := openAccess(ctx, o, log)
	if err != nil {
		return err
	}
	if accessSvc != nil {
		defer accessSvc.Close()
		projects.SetQuotas(api.Quotas(accessSvc)) // quotas of users, groups and pools
	}
	// --- end access ---
	app, apiServer, err := api.New(api.Config{
		Access:          accessSvc, // nil: no /v3/access routes
		Projects:        projects,
		ProjectCaptures: projectCaptures,
		Enroll:          enroller,
		Computes:        registry,
		Agents:          registry.Agents,
		Symbols:         symbolLib,
		User:            o.User,
		Password:        o.Password,
		AllowedOrigins:  o.AllowedOrigins,
		MaxJSONBody:     o.MaxJSONBody,
		Hub:             hub,
		Load:            localLoad(registry),
		Version:         o.GNS3Version,
		PinVersion:      o.pinVersion,
		SettingsFile:    filepath.Join(o.DataDir, "settings.json"),
		// Who may reach node consoles' ports (api.Config.ConsolesOpen).
		ConsolesOpen:     o.ConsoleOpen,
		ConsoleGrantIdle: o.ConsoleIdle,
		// The import streams to disk: its bound is a disk's, not memory's.
		MaxImportSize: o.MaxImportSize,
		Context:       streamCtx,
		View:          web.New(web.Config{FilterDeadline: o.FilterDeadline, Tshark: web.LookTshark(), Logger: log.With("component", "web")}),
		Metrics:       promhttp.HandlerFor(prometheus.Gatherers{reg, agents}, promhttp.HandlerOpts{}),
		Requests:      metrics.NewHTTP(reg),
		Audit:         audit,
		Logger:        log.With("component", "api"),
	})
	if err != nil {
		return err
	}
	// TLS outermost: the API sees a TLS connection (Fiber's c.Protocol()
	// says https) that still reaches its socket for WatchGone.
	apiLn := api.QuietIdle(ln)
	if tlsOn != nil {
		apiLn = pki.Listen(apiLn, tlsOn)
	}
	g.Go(func() error { return app.Listener(apiLn) })
	if pln != nil {
		servePprof(gctx, g, pln, apiServer.Guard, log)
	}
	g.Go(func() error {
		<-gctx.Done()
		// Stops accepting at once, then waits for requests in flight.
		return app.ShutdownWithTimeout(15 * time.Second)
	})
	g.Go(func() error {
		<-gctx.Done()
		// The local agent closes its captures as it stops, which ends their
		// streams cleanly; once it has, and the relays have passed each
		// end on, the streams from other agents (whose captures go on) are
		// cut. Each wait is bounded, in case a client stops reading.
		select {
		case <-agentDone:
		case <-time.After(10 * time.Second):
		}
		wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := registry.Agents.StreamsEnded(wait, project.LocalCompute); err != nil {
			log.Warn("local capture streams still open at shutdown: cutting them", "err", err)
		}
		cancelStreams()
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		projects.Close() // its auto-starts
		return nil
	})
	g.Go(func() error { return registry.Health.Watch(gctx, projects.Reports) })
	err = g.Wait()
	// Every request has ended: the project files take in their journals.
	if err := store.Close(); err != nil {
		log.Error("write the project files whole at shutdown", "err", err)
	}
	log.Info("controller stopped")
	return err
}

// localLoad reports the host's load as the local agent last measured it
// (the controller and its local agent share the host), for stream pings.
func localLoad(r *compute.Registry) func() (float64, float64) {
	return func() (float64, float64) {
		c, ok := r.Get(project.LocalCompute)
		if !ok || c.CPUPercent == nil || c.MemoryPercent == nil {
			return 0, 0
		}
		return *c.CPUPercent, *c.MemoryPercent
	}
}

func splitHostPort(addr net.Addr) (string, int) {
	tcp := addr.(*net.TCPAddr)
	return tcp.IP.String(), tcp.Port
}

func randomSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "labtap"
	}
	return h
}

// warnIfOpen warns when the API runs without credentials on an address
// beyond loopback: open to everyone who can reach it.
func warnIfOpen(log *slog.Logger, addr net.Addr, auth bool) {
	a, ok := addr.(*net.TCPAddr)
	if !ok || auth || a.IP.IsLoopback() {
		return
	}
	log.Warn("no --user and --password: the API is open to anyone who can reach "+a.String()+"; every project, node and capture may be read and changed", "addr", a.String())
}
