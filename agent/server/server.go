// Package server assembles a whole agent, its state and its HTTP API, and
// runs it on a listener. The agent command runs one; so does the
// controller, as its embedded local agent, which it then reaches over HTTP
// like any other.
package server

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
)

// Config configures an agent.
type Config struct {
	Host host.Config
	// Secret, when set, is required on every API call.
	Secret string
	Logger *slog.Logger
}

// Run serves the agent on ln until ctx is done, then stops its captures,
// relays and nodes (capture files stay valid) and returns.
func Run(ctx context.Context, cfg Config, ln net.Listener) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Host.Logger == nil {
		cfg.Host.Logger = cfg.Logger
	}
	h := host.New(cfg.Host)
	// Say at start what this agent cannot run, and why (no Engine, no
	// privileges): docker is then left out of its node types.
	go func() {
		if why := h.DockerUnavailable(); why != "" {
			cfg.Logger.Warn("docker nodes unavailable", "why", why)
		} else {
			cfg.Logger.Info("docker nodes available")
		}
	}()
	handler := api.NewHandler(h, api.Config{Secret: cfg.Secret, Logger: cfg.Logger})
	err := api.Serve(ctx, ln, handler, func() { h.Close() })
	h.Close()
	return err
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
