package api

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// recordingAgents keeps what each compute was told.
type recordingAgents struct {
	mu    sync.Mutex
	calls map[string][]proto.ConsoleAccess
}

func (r *recordingAgents) ConsoleAccess(_ context.Context, computeID string, a proto.ConsoleAccess) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[computeID] = append(r.calls[computeID], a)
	return nil
}

// take returns the calls made since the last take.
func (r *recordingAgents) take() map[string][]proto.ConsoleAccess {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = map[string][]proto.ConsoleAccess{}
	return c
}

func TestConsoleGrantsAreBatchedRenewedAndRevokedWithTheAccess(t *testing.T) {
	ctx := t.Context()
	svc, err := access.Open(ctx, access.Config{Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	alice, err := svc.CreateUser(ctx, access.UserCreate{Username: "alice", Password: "alice-password"})
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for _, r := range svc.Roles() {
		if r.Name == "User" {
			user = r.ID
		}
	}
	const p = "11111111-1111-4111-8111-111111111111"
	ace, err := svc.CreateACE(ctx, access.ACESpec{Type: access.ACEUser, Path: "/projects/" + p, UserID: alice.ID, RoleID: user, Propagate: true, Allowed: true})
	if err != nil {
		t.Fatal(err)
	}
	agents := &recordingAgents{calls: map[string][]proto.ConsoleAccess{}}
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	g := &consoleGrants{ctx: ctx, agents: agents, svc: svc, idle: time.Hour, log: slog.New(slog.DiscardHandler),
		now: func() time.Time { return now }, grants: map[grantKey]*grantState{},
		computes: func() []string { return []string{"local", "agent1"} }, restated: now}
	nodes := []project.Node{
		{ID: "22222222-2222-4222-8222-222222222222", ProjectID: p, ComputeID: "local"},
		{ID: "33333333-3333-4333-8333-333333333333", ProjectID: p, ComputeID: "local"},
		{ID: "44444444-4444-4444-8444-444444444444", ProjectID: p, ComputeID: "agent1"},
	}
	addr := netip.MustParseAddr("192.0.2.7")

	// One read: one call per compute, every node in it.
	g.read(ctx, alice, addr, nodes)
	calls := agents.take()
	if len(calls["local"]) != 1 || len(calls["local"][0].Grants) != 2 || len(calls["agent1"]) != 1 || len(calls["agent1"][0].Grants) != 1 {
		t.Fatalf("first read: %+v, want one call per compute with its nodes", calls)
	}
	if gr := calls["local"][0]; !*gr.Gated || gr.Grants[0].Address != "192.0.2.7" || gr.Grants[0].TTLSeconds != 3600 {
		t.Fatalf("grant: %+v", gr)
	}
	// Read again while fresh: no call.
	now = now.Add(5 * time.Second)
	g.read(ctx, alice, addr, nodes)
	if calls := agents.take(); len(calls) != 0 {
		t.Fatalf("a fresh read called the agents: %+v", calls)
	}
	// A sweep with nothing changed tells nobody (the restatement, every
	// consoleRestate, is not due).
	g.sweep(ctx)
	if calls := agents.take(); len(calls) != 0 {
		t.Fatalf("a quiet sweep called the agents: %+v", calls)
	}
	// When it is due, every agent hears its whole table, the gate closed.
	now = now.Add(consoleRestate)
	g.sweep(ctx)
	calls = agents.take()
	if len(calls["local"]) != 1 || len(calls["local"][0].Grants) != 2 || len(calls["agent1"]) != 1 || !*calls["agent1"][0].Gated {
		t.Fatalf("the restatement: %+v", calls)
	}
	// With what is left of the grant since the last read, not a new hour.
	if ttl := calls["local"][0].Grants[0].TTLSeconds; ttl != 3600-int(consoleRestate/time.Second) {
		t.Fatalf("the restatement's ttl_s: %d", ttl)
	}
	// Past a quarter of the idle time, a read renews the grants.
	now = now.Add(16 * time.Minute)
	g.read(ctx, alice, addr, nodes[:1])
	if calls := agents.take(); len(calls["local"]) != 1 || len(calls["local"][0].Grants) != 1 {
		t.Fatalf("a renewing read: %+v", calls)
	}

	// The ACE removed: the next sweep revokes every grant of hers.
	if err := svc.DeleteACE(ctx, ace.ID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	g.sweep(ctx)
	calls = agents.take()
	var revoked []string
	for _, cs := range calls {
		for _, c := range cs {
			for _, r := range c.Revoke {
				revoked = append(revoked, r.NodeID)
			}
		}
	}
	slices.Sort(revoked)
	if len(revoked) != 3 || revoked[0] != nodes[0].ID || revoked[2] != nodes[2].ID {
		t.Fatalf("revoked %q after the ACE went, want the three nodes (calls %+v)", revoked, calls)
	}
	// A read without the privilege grants nothing.
	g.read(ctx, alice, addr, nodes)
	if calls := agents.take(); len(calls) != 0 || len(g.grants) != 0 {
		t.Fatalf("a read without Node.Console: calls %+v, grants %d", calls, len(g.grants))
	}
}

func TestConsoleGrantsIdleOutWithoutRevocation(t *testing.T) {
	ctx := t.Context()
	agents := &recordingAgents{calls: map[string][]proto.ConsoleAccess{}}
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	// No access database: the one user (Config.User) may open every console.
	g := &consoleGrants{ctx: ctx, agents: agents, idle: time.Hour, log: slog.New(slog.DiscardHandler),
		now: func() time.Time { return now }, grants: map[grantKey]*grantState{},
		computes: func() []string { return []string{"local"} }, restated: now}
	admin := access.User{Username: "admin", Active: true, Superadmin: true}
	g.read(ctx, admin, netip.MustParseAddr("192.0.2.8"), []project.Node{{ID: "n1", ProjectID: "p1", ComputeID: "local"}})
	agents.take()
	now = now.Add(time.Hour)
	g.sweep(ctx)
	calls := agents.take()
	if len(g.grants) != 0 {
		t.Fatalf("a grant idle for an hour is kept")
	}
	// The restatement is due: the agent hears its gate is closed, and of no
	// grant; nothing is revoked (open connections stay).
	if len(calls["local"]) != 1 || len(calls["local"][0].Revoke) != 0 || len(calls["local"][0].Grants) != 0 || !*calls["local"][0].Gated {
		t.Fatalf("after idling out: %+v, want one restatement with nothing revoked", calls)
	}
}
