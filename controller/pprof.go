package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"golang.org/x/sync/errgroup"
)

// servePprof serves Go's profiles (net/http/pprof) on ln, a listener and
// mux of their own, so the API never shows them, until ctx ends. It is off
// unless --pprof-listen asks: the profiles name the code and its data, so
// guard (the API's Guard) puts them behind the API's credentials.
func servePprof(ctx context.Context, g *errgroup.Group, ln net.Listener, guard func(http.Handler) http.Handler, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: guard(mux), ReadHeaderTimeout: 10 * time.Second}
	log.Info("pprof listening", "addr", ln.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		return srv.Close()
	})
}
