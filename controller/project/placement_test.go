package project

import (
	"errors"
	"github.com/labtap/labtap/capspec"
	"testing"
)

func TestFilterSide(t *testing.T) {
	vpcs := func(compute, status string) *Node { return &Node{Type: "vpcs", ComputeID: compute, Status: status} }
	sw := func(compute string) *Node { return &Node{Type: TypeSwitch, ComputeID: compute, Status: Started} }
	tests := []struct {
		name    string
		nodes   []*Node
		capture Capture
		want    int
	}{
		{"nothing started: the first endpoint", []*Node{vpcs("a", Stopped), vpcs("b", Stopped)}, Capture{}, 0},
		{"where a capture would start: the started node", []*Node{vpcs("a", Stopped), vpcs("b", Started)}, Capture{}, 1},
		{"where a capture would start: local first", []*Node{vpcs("r", Started), vpcs("local", Started)}, Capture{}, 1},
		{"where a capture would start: an always-running node", []*Node{vpcs("local", Started), sw("r")}, Capture{}, 1},
		{"while capturing: the capture side, whatever the rest says", []*Node{vpcs("local", Started), sw("r")}, Capture{State: capspec.State{Active: true}, Side: 0}, 0},
		{"a stopped capture no longer decides", []*Node{vpcs("a", Stopped), vpcs("b", Started)}, Capture{Side: 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := filterSide(tt.nodes, tt.capture); got != tt.want {
				t.Fatalf("filterSide = %d, want %d", got, tt.want)
			}
		})
	}
}

func remoteNode(t *testing.T, f *fixture, name string) Node {
	t.Helper()
	req := NewNodeCreate()
	req.ComputeID, req.Type, req.Name = "remote", "vpcs", name
	n, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestALinkAcrossComputesIsTwoRelaysJoinedByATunnel(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), remoteNode(t, f, "B")
	l, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{
		Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: b.ID}},
		Filters:   map[string][]any{"delay": {10.0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := f.computes.relays["local/"+l.ID], f.computes.relays["remote/"+l.ID]
	ta, tb := ra.B.Tunnel, rb.A.Tunnel
	if ra.A.NodeID != a.ID || rb.B.NodeID != b.ID || ta == nil || tb == nil {
		t.Fatalf("relays: %+v / %+v", ra, rb)
	}
	// Each side sends to the other's reserved port on the other's host.
	if ta.RemoteHost != "192.0.2.2" || tb.RemoteHost != "192.0.2.1" || ta.RemotePort != tb.LocalPort || tb.RemotePort != ta.LocalPort {
		t.Fatalf("tunnel ends do not face each other: %+v / %+v", ta, tb)
	}
	// The filters act once: on the first side (nothing started).
	if ra.Filters.Delay == nil || rb.Filters.Delay != nil {
		t.Fatalf("filters on both sides or none: %+v / %+v", ra.Filters, rb.Filters)
	}
	// A capture on B's side pulls the filters over.
	f.svc.Nodes.Start(t.Context(), f.project.ID, b.ID)
	got, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{})
	if err != nil || got.Capture.ComputeID != "remote" {
		t.Fatalf("capture: %+v, %v", got.Capture, err)
	}
	ra, rb = f.computes.relays["local/"+l.ID], f.computes.relays["remote/"+l.ID]
	if ra.Filters.Delay != nil || rb.Filters.Delay == nil {
		t.Fatalf("filters did not move to the capture side: %+v / %+v", ra.Filters, rb.Filters)
	}
	// Suspend acts on both sides.
	yes := true
	f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{Suspend: &yes})
	if !f.computes.relays["local/"+l.ID].Suspend || !f.computes.relays["remote/"+l.ID].Suspend {
		t.Fatal("suspend did not reach both relays")
	}
	if err := f.svc.Links.Delete(t.Context(), f.project.ID, l.ID); err != nil {
		t.Fatal(err)
	}
	if len(f.computes.relays) != 0 {
		t.Fatalf("relays left after deletion: %v", f.computes.relays)
	}
}

func TestAHalfBuiltCrossComputeLinkIsRolledBack(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), remoteNode(t, f, "B")
	f.computes.failOn["put_link@remote"] = &Error{Kind: ErrConflict, Msg: "remote agent refuses"}
	_, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: b.ID}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v", err)
	}
	if len(f.computes.relays) != 0 || len(f.computes.reserved) != 0 {
		t.Fatalf("left behind: relays %v, reservations %v", f.computes.relays, f.computes.reserved)
	}
	if links, _ := f.svc.Links.List(f.project.ID); len(links) != 0 {
		t.Fatalf("links: %v", links)
	}
	delete(f.computes.failOn, "put_link@remote")
	f.link(t, a, b) // nothing was left reserved
}

func TestAFailedFilterChangeLeavesEveryRelayAsTheLinkSays(t *testing.T) {
	failure := &Error{Kind: ErrConflict, Msg: "injected"}
	for _, step := range []string{
		"check_filters@local", "check_filters@remote",
		"put_link@local", "put_link@remote",
		"put_link_applied@local", "put_link_applied@remote",
	} {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t)
			a, b := f.node(t, "A"), remoteNode(t, f, "B")
			l, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{
				Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: b.ID}},
				Filters:   map[string][]any{"delay": {10.0}},
			})
			if err != nil {
				t.Fatal(err)
			}
			// Suspend and a bpf filter: a change both relays take.
			f.computes.mu.Lock()
			f.computes.failOn[step] = failure
			f.computes.mu.Unlock()
			yes := true
			_, err = f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{
				Suspend: &yes, Filters: map[string][]any{"bpf": {"icmp"}, "packet_loss": {50.0}},
			})
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("UpdateLink with %s failing = %v", step, err)
			}
			f.computes.mu.Lock()
			delete(f.computes.failOn, step)
			f.computes.mu.Unlock()
			got, _ := f.svc.Links.Get(f.project.ID, l.ID)
			if got.Suspend || got.Filters["packet_loss"] != nil || got.Filters["delay"] == nil {
				t.Fatalf("the link after a failed change: suspend %v, filters %v", got.Suspend, got.Filters)
			}
			for _, c := range []string{"local", "remote"} {
				r := f.computes.relays[c+"/"+l.ID]
				if r.Suspend || r.Filters.PacketLoss != nil || len(r.Filters.BPF) != 0 {
					t.Fatalf("the %s relay after a failed change: suspend %v, filters %+v", c, r.Suspend, r.Filters)
				}
			}
			if r := f.computes.relays["local/"+l.ID]; r.Filters.Delay == nil {
				t.Fatalf("the filtering relay lost its delay: %+v", r.Filters)
			}
		})
	}
}
