package host

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// A runner node has one agent port per adapter, and link endpoints name
// them as adapter i, port 0.
func TestRunnerNodeHasOnePortPerAdapter(t *testing.T) {
	var env RunnerEnv
	h := New(Config{DataDir: t.TempDir(), Runners: map[string]RunnerFactory{
		"qemu": func(_ context.Context, e RunnerEnv) (node.Runner, error) {
			env = e
			return node.NewFake(e.Agent, e.OnStop), nil
		},
	}})
	t.Cleanup(func() { h.Close() })
	const pid, nid = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
	if err := h.OpenProject(proto.ProjectSpec{ProjectID: pid, Name: "p"}); err != nil {
		t.Fatal(err)
	}
	spec := proto.NodeSpec{NodeID: nid, NodeType: "qemu", Name: "vm", Adapters: []proto.AdapterSpec{
		{MACAddress: "0c:22:22:22:00:00", PortName: "Ethernet0"}, {MACAddress: "0c:22:22:22:00:01", PortName: "Ethernet1"},
	}}
	if _, err := h.CreateNode(t.Context(), pid, spec); err != nil {
		t.Fatal(err)
	}
	if len(env.Ports) != 2 || env.Ports[0] == env.Ports[1] || env.Agent != env.Ports[0] || !env.Ports[1].IsValid() {
		t.Fatalf("runner got ports %v (agent %v), want two distinct addresses", env.Ports, env.Agent)
	}
	link := func(id string, a, b proto.Endpoint) error {
		return h.PutLink(pid, proto.LinkSpec{LinkID: id, A: a, B: b})
	}
	far := proto.Endpoint{Tunnel: &proto.Tunnel{RemoteHost: "127.0.0.1", RemotePort: 9}}
	if err := link("33333333-3333-3333-3333-333333333333", proto.Endpoint{NodeID: nid, Adapter: 1}, far); err != nil {
		t.Fatalf("link on adapter 1: %v", err)
	}
	err := link("44444444-4444-4444-4444-444444444444", proto.Endpoint{NodeID: nid, Adapter: 0, Port: 1}, far)
	if pe, ok := errors.AsType[*proto.Error](err); !ok || pe.Code != proto.CodeNotFound {
		t.Fatalf("link on 0/1 of a node with adapters: %v, want not found", err)
	}
	err = link("55555555-5555-5555-5555-555555555555", proto.Endpoint{NodeID: nid, Adapter: 1}, far)
	if pe, ok := errors.AsType[*proto.Error](err); !ok || pe.Code != proto.CodeConflict {
		t.Fatalf("second link on adapter 1: %v, want conflict", err)
	}
}

// updatable is a fake node that takes a changed spec in place.
type updatable struct{ *node.Fake }

func (updatable) Update(context.Context, proto.NodeSpec, []netip.AddrPort) error { return nil }

// Run with -race: a node that stops by itself (its OnStop points its
// ports nowhere) while a PUT changes its adapters (which replaces its
// port list) must read the list under the lock that guards it.
func TestANodeStoppingByItselfWhileItsAdaptersChangeReadsItsPortsUnderTheLock(t *testing.T) {
	var fake *node.Fake
	h := New(Config{DataDir: t.TempDir(), Runners: map[string]RunnerFactory{
		"qemu": func(_ context.Context, e RunnerEnv) (node.Runner, error) {
			fake = node.NewFake(e.Agent, e.OnStop)
			return updatable{fake}, nil
		},
	}})
	t.Cleanup(func() { h.Close() })
	const pid, nid = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
	if err := h.OpenProject(proto.ProjectSpec{ProjectID: pid, Name: "p"}); err != nil {
		t.Fatal(err)
	}
	spec := func(adapters int) proto.NodeSpec {
		s := proto.NodeSpec{NodeID: nid, NodeType: "qemu", Name: "vm"}
		for i := range adapters {
			s.Adapters = append(s.Adapters, proto.AdapterSpec{PortName: fmt.Sprintf("Ethernet%d", i)})
		}
		return s
	}
	if _, err := h.CreateNode(t.Context(), pid, spec(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetNodeStatus(t.Context(), pid, nid, proto.StatusStarted); err != nil {
		t.Fatal(err)
	}
	const rounds = 50
	var wg sync.WaitGroup
	wg.Go(func() {
		for range rounds {
			fake.Stop(t.Context()) // by itself: OnStop runs
			if err := fake.Start(t.Context()); err != nil {
				t.Error(err)
			}
		}
	})
	for i := range rounds {
		if _, err := h.CreateNode(t.Context(), pid, spec(1+i%2)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
