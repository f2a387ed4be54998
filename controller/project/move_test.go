package project

import (
	"errors"
	"testing"

	"github.com/labtap/labtap/capspec"
)

// A move that fails once the copy exists (its link cannot be wired on the
// new compute, or the project cannot be saved) leaves the node on its
// compute with its link wired there as before, and the stored project
// unchanged.
func TestAMoveThatFailsHalfwayLeavesTheNodeAndItsLinkWhereTheyWere(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(f *fixture)
	}{
		{"link refused by the new compute", func(f *fixture) { f.computes.failOn["put_link@remote"] = errors.New("refused") }},
		{"save failed", func(f *fixture) { f.store.fail = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a, b := f.node(t, "PC1"), f.node(t, "PC2")
			l := f.link(t, a, b)
			tc.fail(f)
			if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "remote"); err == nil {
				t.Fatal("move succeeded")
			}
			f.store.fail = false
			got, _ := f.svc.Nodes.Get(f.project.ID, a.ID)
			if got.ComputeID != "local" {
				t.Fatalf("node after a failed move is on %q", got.ComputeID)
			}
			gl, _ := f.svc.Links.Get(f.project.ID, l.ID)
			if !gl.Wired || gl.Tunnel != nil || len(gl.Computes) != 1 || gl.Computes[0] != "local" {
				t.Fatalf("link after a failed move: %+v", gl)
			}
			f.computes.mu.Lock()
			_, onLocal := f.computes.relays["local/"+l.ID]
			_, onRemote := f.computes.relays["remote/"+l.ID]
			f.computes.mu.Unlock()
			if !onLocal || onRemote {
				t.Fatalf("relays after a failed move: local %v, remote %v", onLocal, onRemote)
			}
			for _, n := range f.store.Saved(f.project.ID).Nodes {
				if n.ID == a.ID && n.ComputeID != "local" {
					t.Fatalf("stored node on %q", n.ComputeID)
				}
			}
		})
	}
}

// A moved node's link crosses computes through a tunnel; moved back, the
// link is on one compute again. A running VPCS and a capturing link refuse
// the move.
func TestAMovedNodesLinkIsTunnelledAndMovesBack(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "PC1"), f.node(t, "PC2")
	l := f.link(t, a, b)
	res, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "remote")
	if err != nil || res.Node.ComputeID != "remote" || res.From != "local" {
		t.Fatalf("move: %+v, %v", res, err)
	}
	gl, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if gl.Tunnel == nil || len(gl.Computes) != 2 {
		t.Fatalf("link across computes: %+v", gl)
	}
	if saved := f.store.Saved(f.project.ID); saved.Nodes[0].ComputeID != "remote" {
		t.Fatalf("stored node on %q", saved.Nodes[0].ComputeID)
	}
	if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "remote"); !errors.Is(err, ErrConflict) {
		t.Fatalf("move to its own compute: %v", err)
	}
	if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "nowhere"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("move to no compute: %v", err)
	}
	if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "local"); err != nil {
		t.Fatal(err)
	}
	gl, _ = f.svc.Links.Get(f.project.ID, l.ID)
	if gl.Tunnel != nil || len(gl.Computes) != 1 || gl.Computes[0] != "local" {
		t.Fatalf("link back on one compute: %+v", gl)
	}

	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "remote"); !errors.Is(err, ErrConflict) {
		t.Fatalf("move of a started node: %v", err)
	}
	if _, err := f.svc.Nodes.Stop(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Nodes.Move(t.Context(), f.project.ID, a.ID, "remote"); !errors.Is(err, ErrConflict) {
		t.Fatalf("move while capturing: %v", err)
	}
}

// placingComputes are fakeComputes whose two computes are connected and
// take every node: placement can run.
type placingComputes struct{ *fakeComputes }

func (placingComputes) Rooms() []ComputeRoom {
	types := []string{"vpcs", TypeSwitch, TypeHub, TypeCloud}
	return []ComputeRoom{{ID: "local", Connected: true, NodeTypes: types}, {ID: "remote", Connected: true, NodeTypes: types}}
}
func (placingComputes) Draining(string) bool { return false }

// Moving nodes off a compute leaves a started node there, unless asked to
// restart it: then it is stopped, moved and started on the other compute.
func TestMovingNodesOffAComputeRestartsStartedOnesOnlyWhenAsked(t *testing.T) {
	f := newFixture(t)
	f.svc = NewService(Config{ProjectsDir: t.TempDir(), Computes: placingComputes{f.computes}, Store: f.store, Events: f.events})
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	a, b := f.node(t, "PC1"), f.node(t, "PC2")
	f.link(t, a, b)
	if _, err := f.svc.Nodes.Start(t.Context(), p.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	rep := f.svc.Nodes.MoveOff(t.Context(), "local", false)
	if len(rep.Moved) != 1 || rep.Moved[0].NodeID != b.ID || rep.Moved[0].ComputeID != "remote" || len(rep.Left) != 1 || rep.Left[0].NodeID != a.ID {
		t.Fatalf("move off without restart: %+v", rep)
	}
	rep = f.svc.Nodes.MoveOff(t.Context(), "local", true)
	if len(rep.Moved) != 1 || rep.Moved[0].NodeID != a.ID || len(rep.Left) != 0 {
		t.Fatalf("move off with restart: %+v", rep)
	}
	got, _ := f.svc.Nodes.Get(p.ID, a.ID)
	if got.ComputeID != "remote" || got.Status != Started {
		t.Fatalf("restarted node: %s on %s", got.Status, got.ComputeID)
	}
}
