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
//
// Every flag has an environment twin (LABTAP_LISTEN, LABTAP_DATA_DIR,
// LABTAP_GNS3_VERSION, LABTAP_ADVERTISE, LABTAP_LOCAL_AGENT, LABTAP_VPCS, LABTAP_USER,
// LABTAP_PASSWORD, LABTAP_MAX_JSON_BODY, LABTAP_AUTO_CLOSE_GRACE,
// LABTAP_LOG_LEVEL, LABTAP_LOG_FORMAT); a flag wins over its variable. LABTAP_SECRET is the secret shared with remote agents.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/server"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/symbols"
	"github.com/labtap/labtap/controller/topology"
	"github.com/labtap/labtap/controller/web"
	"github.com/labtap/labtap/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultGNS3Version is the GNS3 release whose GUI connects by default.
const defaultGNS3Version = "2.2.59"

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

// options are the controller's settings, from flags and environment.
type options struct {
	listen, dataDir, gns3Version, vpcs string
	advertise                          string
	user, password                     string
	maxJSONBody                        int
	autoCloseGrace                     time.Duration
	localAgent                         bool
	level                              slog.Level
	logFormat                          string
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", envOr("LABTAP_LISTEN", "127.0.0.1:3080"), "HTTP listen address of the /v2 API")
	fs.StringVar(&o.dataDir, "data-dir", envOr("LABTAP_DATA_DIR", server.DefaultDataDir()), "directory for projects, captures and symbols")
	fs.StringVar(&o.gns3Version, "gns3-version", envOr("LABTAP_GNS3_VERSION", defaultGNS3Version), "GNS3 version reported to clients; the GNS3 GUI needs its own x.y.z")
	fs.StringVar(&o.advertise, "advertise", envOr("LABTAP_ADVERTISE", ""), "address agents on other hosts reach this host's local agent at, for links to it (default: the listen host)")
	fs.StringVar(&o.vpcs, "vpcs", envOr("LABTAP_VPCS", "vpcs"), "vpcs executable of the local agent")
	localAgent, err := strconv.ParseBool(envOr("LABTAP_LOCAL_AGENT", "true"))
	if err != nil {
		return o, fmt.Errorf("LABTAP_LOCAL_AGENT: %w", err)
	}
	fs.BoolVar(&o.localAgent, "local-agent", localAgent, "run an embedded agent as compute \"local\"")
	fs.StringVar(&o.user, "user", envOr("LABTAP_USER", ""), "HTTP Basic user; with --password, turns authentication on")
	fs.StringVar(&o.password, "password", envOr("LABTAP_PASSWORD", ""), "HTTP Basic password (prefer LABTAP_PASSWORD: flags show in ps)")
	maxBody, err := strconv.Atoi(envOr("LABTAP_MAX_JSON_BODY", "1048576"))
	if err != nil {
		return o, fmt.Errorf("LABTAP_MAX_JSON_BODY: %w", err)
	}
	fs.IntVar(&o.maxJSONBody, "max-json-body", maxBody, "largest JSON request body, in bytes")
	grace, err := time.ParseDuration(envOr("LABTAP_AUTO_CLOSE_GRACE", "5s"))
	if err != nil {
		return o, fmt.Errorf("LABTAP_AUTO_CLOSE_GRACE: %w", err)
	}
	fs.DurationVar(&o.autoCloseGrace, "auto-close-grace", grace, "how long a project with auto_close stays opened after its last notification listener leaves")
	if err := o.level.UnmarshalText([]byte(envOr("LABTAP_LOG_LEVEL", "info"))); err != nil {
		return o, fmt.Errorf("LABTAP_LOG_LEVEL: %w", err)
	}
	fs.TextVar(&o.level, "log-level", o.level, "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", envOr("LABTAP_LOG_FORMAT", "text"), "log lines as text (key=value) or json (one object per line)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	log := newLogger(o.logFormat, o.level)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	listenHost, listenPort := splitHostPort(ln.Addr())
	projectsDir := filepath.Join(o.dataDir, "projects")
	if err := os.MkdirAll(projectsDir, 0o755); err != nil {
		return err
	}
	log.Info("controller listening", "addr", ln.Addr().String(), "data_dir", o.dataDir,
		"gns3_version", o.gns3Version, "local_agent", o.localAgent, "auth", o.user != "" && o.password != "",
		"version", version)

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
		IdleGrace: o.autoCloseGrace,
		OnIdle:    func(id string) { projects.AutoCloseIdle(gctx, id) },
	})
	defer hub.Close()
	events := &api.Events{Hub: hub, Version: o.gns3Version}
	registry := compute.NewRegistry(compute.RegistryConfig{
		Client:   compute.NewClient(compute.ClientConfig{Logger: log}),
		Path:     filepath.Join(o.dataDir, "computes.json"),
		Secret:   os.Getenv("LABTAP_SECRET"),
		OnChange: events.ComputeChanged,
		Logger:   log.With("component", "computes"),
	})
	if !o.localAgent {
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
		if o.advertise != "" {
			advertised = o.advertise
			if net.ParseIP(o.advertise) != nil {
				tunnelBind = o.advertise
			}
		}
		g.Go(func() error {
			defer close(agentDone)
			return server.Run(gctx, server.Config{
				Host: host.Config{
					ComputeID:       project.LocalCompute,
					DataDir:         o.dataDir,
					ConsoleHost:     listenHost,
					ConsoleBind:     listenHost,
					VPCS:            o.vpcs,
					SoftwareVersion: version,
					TunnelBind:      tunnelBind,
				},
				Secret: secret,
				Logger: log.With("component", "local_agent"),
			}, agentLn)
		})
		registry.Add(ctx, compute.Compute{
			ID: project.LocalCompute, Name: hostname(), Protocol: "http", Host: advertised, Port: listenPort,
			User: o.user, URL: "http://" + agentLn.Addr().String(), Secret: secret,
		})
	}
	if err := registry.Load(ctx); err != nil {
		log.Error("load computes", "err", err)
	}
	symbolLib := symbols.New(filepath.Join(o.dataDir, "symbols"), log.With("component", "symbols"))
	projects = project.NewService(project.Config{
		ProjectsDir: projectsDir,
		Computes:    registry,
		Events:      events,
		Store:       &topology.Store{Dir: projectsDir, Version: o.gns3Version},
		Symbols:     symbolLib.Size,
		Logger:      log.With("component", "projects"),
	})
	// Agents that kept running while the controller was down still run
	// their labs and captures: projects opened at load (auto_open) and the
	// others they run are taken over as they are.
	running := registry.Running(ctx)
	for _, err := range projects.Load(ctx, running) {
		log.Error("load projects", "err", err)
	}
	for _, err := range projects.Adopt(ctx, running) {
		log.Error("adopt running projects", "err", err)
	}
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
		Fetch:  registry.Metrics,
		Logger: log.With("component", "metrics"),
	}
	app, _, err := api.New(api.Config{
		Projects:    projects,
		Computes:    registry,
		Symbols:     symbolLib,
		User:        o.user,
		Password:    o.password,
		MaxJSONBody: o.maxJSONBody,
		Hub:         hub,
		Load:        localLoad(registry),
		Version:     o.gns3Version,
		Context:     streamCtx,
		View:        web.New(log.With("component", "web")),
		Metrics:     promhttp.HandlerFor(prometheus.Gatherers{reg, agents}, promhttp.HandlerOpts{}),
		Requests:    metrics.NewHTTP(reg),
		Logger:      log.With("component", "api"),
	})
	if err != nil {
		return err
	}
	g.Go(func() error { return app.Listener(ln) })
	g.Go(func() error {
		<-gctx.Done()
		go func() {
			select {
			case <-agentDone:
				// The local agent has written the end of its streams; give
				// the relays a moment to pass it on before cutting the rest.
				time.Sleep(time.Second)
			case <-time.After(10 * time.Second):
			}
			cancelStreams()
		}()
		// Stops accepting at once, then waits for requests in flight.
		return app.ShutdownWithTimeout(15 * time.Second)
	})
	g.Go(func() error { return registry.Watch(gctx, projects) })
	err = g.Wait()
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

// newLogger logs to stderr as text or JSON lines.
func newLogger(format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
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

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "labtap"
	}
	return h
}
