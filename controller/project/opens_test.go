package project

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// TestAProjectFileWithoutAQemuNodesDefaultsOpens: a .gns3 (GNS3's own, or
// written by hand) may leave out properties GNS3 fills in, boot_priority
// among them; the project opens with the defaults of each kind filled in,
// as a new node gets them.
func TestAProjectFileWithoutAQemuNodesDefaultsOpens(t *testing.T) {
	f := &fixture{computes: newFakeComputes(), store: &failingStore{}, events: &recorder{}}
	f.svc = NewService(Config{ProjectsDir: t.TempDir(), Computes: qemuComputes{dockerComputes{f.computes}}, Store: f.store, Events: f.events})
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	q := f.nodeOf(t, TypeQemu, "R1", map[string]any{"kernel_image": "vmlinuz"})
	if err := f.svc.CloseProject(t.Context(), p.ID); err != nil {
		t.Fatal(err)
	}
	snap := f.store.Saved(p.ID)
	for i := range snap.Nodes {
		snap.Nodes[i].Properties = map[string]any{"kernel_image": "vmlinuz"} // nothing else
	}
	if _, err := f.svc.OpenProject(t.Context(), p.ID); err != nil {
		t.Fatalf("a QEMU node with only its kernel_image: %v", err)
	}
	n, err := f.svc.Nodes.Get(p.ID, q.ID)
	if err != nil || n.Properties["boot_priority"] != "c" || n.Properties["ram"] == nil {
		t.Fatalf("the node opened without its defaults: %v %v", n.Properties, err)
	}
}

// TestAProjectWithThousandsOfVPCSOpens: VPCS takes one byte of its MAC
// from the agent, so past 255 VPCS of a project the bytes are shared again
// (with a warning) rather than the project refusing to open or to take one
// more node.
func TestAProjectWithThousandsOfVPCSOpens(t *testing.T) {
	f := newFixture(t)
	first := f.node(t, "PC1")
	if err := f.svc.CloseProject(t.Context(), f.project.ID); err != nil {
		t.Fatal(err)
	}
	snap := f.store.Saved(f.project.ID)
	for i := 2; i <= 3000; i++ {
		n := first
		n.ID, n.Name, n.Properties = newID(), fmt.Sprintf("PC%d", i), maps.Clone(first.Properties)
		snap.Nodes = append(snap.Nodes, n)
	}
	if _, err := f.svc.OpenProject(t.Context(), f.project.ID); err != nil {
		t.Fatalf("3,000 VPCS: %v", err)
	}
	more := f.node(t, "PC3001")
	warned := false
	for _, e := range f.events.events {
		warned = warned || e.Action == LogWarning && strings.HasPrefix(e.Message, "PC3001 has the MAC address of PC")
	}
	if !warned {
		t.Error("no warning that PC3001 shares a MAC address")
	}
	uses := map[int]int{}
	all, err := f.svc.Nodes.List(f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		if n.MACIndex < 0 || n.MACIndex > 254 {
			t.Fatalf("%s has MAC index %d", n.Name, n.MACIndex)
		}
		uses[n.MACIndex]++
	}
	if len(uses) != 255 || more.MACIndex < 0 {
		t.Fatalf("%d MAC indexes used, want all 255 (new node: %d)", len(uses), more.MACIndex)
	}
	for i, c := range uses {
		if c < 11 || c > 12 {
			t.Fatalf("MAC index %d is used %d times: not spread evenly", i, c)
		}
	}
}
