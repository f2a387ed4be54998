package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

func TestPprofIsOffUnlessAsked(t *testing.T) {
	t.Setenv("LABTAP_PPROF_LISTEN", "")
	if o, err := parse(nil); err != nil || o.PprofListen != "" {
		t.Fatalf("default: %q, %v", o.PprofListen, err)
	}
}

// The profiles answer on their own listener, and stop with the controller.
func TestPprofServesProfilesUntilTheControllerStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	g, gctx := errgroup.WithContext(ctx)
	servePprof(gctx, g, ln, func(h http.Handler) http.Handler { return h }, slog.New(slog.DiscardHandler))
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "servePprof") {
		t.Fatalf("%d: %.300s", resp.StatusCode, body)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("stopped with %v, want nil", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/"); err == nil {
		t.Fatal("still answering after the controller stopped")
	}
}
