// The agent command runs a labtap compute agent: it runs lab nodes (VPCS,
// and the cloud, hub and switch nodes it implements itself), relays their
// frames between UDP tunnel ends through each link's filters, and writes
// link captures, all driven by a labtap controller over HTTP.
//
// Usage:
//
//	agent [--listen 127.0.0.1:3081] [--data-dir DIR] [--compute-id ID] [--advertise HOST]
//	      [--controller http://[user:password@]host:3080] [--tunnel-bind IP]
//	      [--socket-buffer BYTES] [--udp-gro=false] [--capture-direct-io=false]
//
// Every flag has an environment twin (LABTAP_LISTEN, LABTAP_DATA_DIR,
// LABTAP_COMPUTE_ID, LABTAP_ADVERTISE, LABTAP_CONTROLLER, LABTAP_TUNNEL_BIND,
// LABTAP_VPCS, LABTAP_SOCKET_BUFFER, LABTAP_UDP_GRO, LABTAP_CAPTURE_DIRECT_IO,
// LABTAP_LOG_LEVEL, LABTAP_LOG_FORMAT); a flag wins over its
// variable. LABTAP_SECRET, when set, is the shared secret the controller
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
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	listen := fs.String("listen", envOr("LABTAP_LISTEN", "127.0.0.1:3081"), "HTTP listen address of the agent API")
	dataDir := fs.String("data-dir", envOr("LABTAP_DATA_DIR", server.DefaultDataDir()), "directory for project files and captures")
	computeID := fs.String("compute-id", envOr("LABTAP_COMPUTE_ID", hostname()), "the id the controller knows this agent by")
	advertise := fs.String("advertise", envOr("LABTAP_ADVERTISE", ""), "address the controller and other agents reach this host on (default: the listen host)")
	controllerURL := fs.String("controller", envOr("LABTAP_CONTROLLER", ""), "register with the controller at this URL (http://[user:password@]host:port)")
	tunnelBind := fs.String("tunnel-bind", envOr("LABTAP_TUNNEL_BIND", ""), "IP address the ends of tunnels to other agents bind to (default: the listen host)")
	vpcs := fs.String("vpcs", envOr("LABTAP_VPCS", "vpcs"), "vpcs executable")
	socketBuffer := fs.Int("socket-buffer", envInt("LABTAP_SOCKET_BUFFER", bridge.DefaultBufferBytes),
		"receive and send buffer of each relay UDP socket, in bytes (capped by net.core.rmem_max unless root)")
	udpGRO := fs.Bool("udp-gro", envOr("LABTAP_UDP_GRO", "true") != "false",
		"take runs of datagrams a peer sent with UDP GSO in one piece (UDP_GRO); false for measurements")
	directIO := fs.Bool("capture-direct-io", envOr("LABTAP_CAPTURE_DIRECT_IO", "true") != "false",
		"write captures' full blocks with direct I/O (O_DIRECT) where the file system allows it; false writes through the page cache")
	var level slog.Level
	if err := level.UnmarshalText([]byte(envOr("LABTAP_LOG_LEVEL", "info"))); err != nil {
		return fmt.Errorf("LABTAP_LOG_LEVEL: %w", err)
	}
	fs.TextVar(&level, "log-level", level, "debug, info, warn or error")
	logFormat := fs.String("log-format", envOr("LABTAP_LOG_FORMAT", "text"), "log lines as text (key=value) or json (one object per line)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", *logFormat)
	}
	opts := &slog.HandlerOptions{Level: level}
	log := slog.New(slog.NewTextHandler(os.Stderr, opts))
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	bindHost, _, _ := net.SplitHostPort(ln.Addr().String())
	consoleHost := *advertise
	if consoleHost == "" {
		consoleHost = bindHost
	}
	if ip := net.ParseIP(consoleHost); ip != nil && ip.IsUnspecified() && *controllerURL != "" {
		ln.Close()
		return errors.New("--controller needs --advertise when listening on every address: the controller must know where to reach this agent")
	}
	secret := os.Getenv("LABTAP_SECRET")
	log.Info("agent listening", "addr", ln.Addr().String(), "compute_id", *computeID,
		"data_dir", *dataDir, "console_host", consoleHost, "secret", secret != "", "version", version,
		"socket_buffer", *socketBuffer)
	if ip := net.ParseIP(bindHost); secret == "" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("the agent API is reachable beyond this host without a shared secret: anyone who reaches it can run programs here; set LABTAP_SECRET on the agent and its controller")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *controllerURL != "" {
		_, portStr, _ := net.SplitHostPort(ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		go func() {
			err := server.Register(ctx, server.Registration{
				Controller: *controllerURL, ComputeID: *computeID, Name: *computeID,
				Host: consoleHost, Port: port, Logger: log,
			})
			if err != nil && ctx.Err() == nil {
				log.Error("register with the controller", "err", err)
			}
		}()
	}
	return server.Run(ctx, server.Config{
		Host: host.Config{
			ComputeID:        *computeID,
			DataDir:          *dataDir,
			ConsoleHost:      consoleHost,
			ConsoleBind:      bindHost,
			VPCS:             *vpcs,
			SoftwareVersion:  version,
			SocketBuffer:     *socketBuffer,
			NoUDPGRO:         !*udpGRO,
			BufferedCaptures: !*directIO,
			TunnelBind:       *tunnelBind,
			Logger:           log,
		},
		Secret: secret,
		Logger: log,
	}, ln)
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "agent"
	}
	return h
}
