package project

import (
	"errors"
	"fmt"
	"github.com/labtap/labtap/capspec"
	"reflect"
	"testing"
)

func TestNormalizeFilters(t *testing.T) {
	tests := []struct {
		name string
		in   map[string][]any
		want map[string][]any
	}{
		{"GNS3's own example, minus the unknown type",
			map[string][]any{"delay": {0.0, 50.0}, "packet_loss": {" 10\n"}, "corrupt": {12.7}, "frequency_drop": {true}, "bpf": {"\n host 1.2.3.4 \n"}},
			map[string][]any{"bpf": {"host 1.2.3.4"}, "corrupt": {12}, "frequency_drop": {1}, "packet_loss": {10}, "delay": {0, 50}}},
		{"a zero single value turns the filter off", map[string][]any{"packet_loss": {0.0}, "frequency_drop": {0.0}}, map[string][]any{}},
		{"an empty list turns the filter off", map[string][]any{"delay": {}}, map[string][]any{}},
		{"a delay of 0 with no jitter is off", map[string][]any{"delay": {0.0, 0.0}}, map[string][]any{}},
		{"a jitter-only delay is kept (GNS3 drops it)", map[string][]any{"delay": {0.0, 20.0}}, map[string][]any{"delay": {0, 20}}},
		{"an empty bpf is off", map[string][]any{"bpf": {"  \n "}}, map[string][]any{}},
		{"drop everything", map[string][]any{"frequency_drop": {-1.0}}, map[string][]any{"frequency_drop": {-1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalizeFilters(tt.in)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("normalizeFilters = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	bad := []map[string][]any{
		{"latency": {3.0}},                  // not in the catalogue (GNS3 stores it)
		{"packet_loss": {150.0}},            // out of range
		{"packet_loss": {-1.0}},             // out of range
		{"frequency_drop": {-2.0}},          // out of range
		{"delay": {50.0, 10.0, 1.0}},        // too many values
		{"delay": {"fast"}},                 // not a number
		{"corrupt": {nil}},                  // null (GNS3 crashes)
		{"bpf": {42.0}},                     // not text
		{"delay": {40000.0}},                // out of range
		{"packet_loss": {map[string]any{}}}, // an object
	}
	for _, in := range bad {
		if got, err := normalizeFilters(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("normalizeFilters(%v) = %v, %v; want invalid", in, got, err)
		}
	}
}

func TestActiveFiltersSplitBPFLinesAndSkipBlankOnes(t *testing.T) {
	a := activeFilters(map[string][]any{"bpf": {"icmp\n\n  tcp port 22 \n"}, "delay": {50}, "packet_loss": {5}})
	if !reflect.DeepEqual(a.BPF, []string{"icmp", "tcp port 22"}) || *a.Delay != [2]int{50, 0} || *a.PacketLoss != 5 || a.Corrupt != nil {
		t.Fatalf("activeFilters = %+v", a)
	}
}

func TestUpdateLinkReplacesFiltersAndChangesNothingWhenRefused(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	l := f.link(t, a, b)
	up := func(u LinkUpdate) (Link, error) { return f.svc.Links.Update(t.Context(), f.project.ID, l.ID, u) }
	got, err := up(LinkUpdate{Filters: map[string][]any{"delay": {100.0}, "packet_loss": {5.0}}})
	if err != nil || len(got.Filters) != 2 || f.computes.links[l.ID].Filters.Delay == nil {
		t.Fatalf("set filters: %+v, %v", got.Filters, err)
	}
	// Filters replace, never merge.
	got, _ = up(LinkUpdate{Filters: map[string][]any{"corrupt": {30.0}}})
	if want := map[string][]any{"corrupt": {30}}; !reflect.DeepEqual(got.Filters, want) {
		t.Fatalf("filters after a second PUT %v, want %v", got.Filters, want)
	}
	if w := f.computes.links[l.ID].Filters; w.Delay != nil || w.Corrupt == nil || *w.Corrupt != 30 {
		t.Fatalf("the relay got %+v", w)
	}
	// A refused update changes nothing, even its valid parts (GNS3
	// applies the steps before the failing one).
	yes := true
	before, _ := f.svc.Links.Get(f.project.ID, l.ID)
	_, err = up(LinkUpdate{Suspend: &yes, Labels: []Endpoint{{NodeID: "00000000-0000-4000-8000-000000000009"}}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("label for an unknown node: %v", err)
	}
	_, err = up(LinkUpdate{Suspend: &yes, Filters: map[string][]any{"packet_loss": {101.0}}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("out-of-range filter: %v", err)
	}
	after, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if !reflect.DeepEqual(before, after) || f.computes.links[l.ID].Suspend {
		t.Fatalf("a refused update changed the link: %+v", after)
	}
	// A refusal from the agent (a BPF that does not compile) changes nothing.
	f.computes.failOn["put_link"] = &Error{Kind: ErrInvalid, Msg: "syntax error in filter expression"}
	if _, err := up(LinkUpdate{Filters: map[string][]any{"bpf": {"icmp and and"}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad bpf: %v", err)
	}
	delete(f.computes.failOn, "put_link")
	if after, _ := f.svc.Links.Get(f.project.ID, l.ID); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused bpf changed the link: %+v", after.Filters)
	}
	// Suspend reaches the relay; the filters stay as they were.
	f.events.events = nil
	got, err = up(LinkUpdate{Suspend: &yes})
	if err != nil || !got.Suspend || !f.computes.links[l.ID].Suspend || got.Filters["corrupt"] == nil {
		t.Fatalf("suspend: %+v, %v", got, err)
	}
	if fmt.Sprint(f.events.actions()) != "[link.updated]" {
		t.Fatalf("events %v", f.events.actions())
	}
}

func TestCloseAndReopenRebuildTheProjectFromItsFile(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	l := f.link(t, a, b)
	yes := true
	if _, err := f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{Suspend: &yes, Filters: map[string][]any{"delay": {20.0}}}); err != nil {
		t.Fatal(err)
	}
	f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID)
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.CloseProject(t.Context(), f.project.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Nodes.Get(f.project.ID, a.ID)
	wantErr(t, err, ErrForbidden, "The project is not opened")
	_, err = f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{})
	wantErr(t, err, ErrForbidden, "The project is not opened")
	if st, _ := f.svc.ProjectStats(f.project.ID); st != (Stats{}) {
		t.Fatalf("stats of a closed project %+v", st)
	}
	nodes, _ := f.svc.Nodes.List(f.project.ID)
	links, _ := f.svc.Links.List(f.project.ID)
	if len(nodes) != 2 || len(links) != 1 || links[0].Capture.Active {
		t.Fatalf("closed project lists %d nodes, %d links (%+v)", len(nodes), len(links), links)
	}
	// Forget the compute side, as a restarted agent would.
	f.computes.nodes, f.computes.links = map[string]string{}, map[string]Wiring{}
	p, err := f.svc.OpenProject(t.Context(), f.project.ID)
	if err != nil || p.Status != Opened {
		t.Fatalf("open: %+v, %v", p, err)
	}
	re, _ := f.svc.Links.Get(f.project.ID, l.ID)
	w := f.computes.links[l.ID]
	// suspend is restored (GNS3 forgets it), filters too; captures are not.
	if !re.Suspend || !w.Suspend || w.Filters.Delay == nil || re.Capture.Active || re.Capture.FileName != "" || len(f.computes.nodes) != 2 {
		t.Fatalf("reopened link %+v, relay %+v", re, w)
	}
	if n, _ := f.svc.Nodes.Get(f.project.ID, a.ID); n.Status != Stopped || n.Name != "A" {
		t.Fatalf("reopened node %+v", n)
	}
}

func TestOpenDropsLinksWhoseEndpointsAreGone(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	f.link(t, a, b)
	f.svc.CloseProject(t.Context(), f.project.ID)
	snap := f.store.Saved(f.project.ID)
	snap.Nodes = snap.Nodes[:1] // node B vanished from the file
	p, err := f.svc.OpenProject(t.Context(), f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	if links, _ := f.svc.Links.List(p.ID); len(links) != 0 {
		t.Fatalf("a link with a missing endpoint survived: %+v", links)
	}
}

func TestFailedOpenLeavesTheProjectClosedAndTheComputesClean(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	f.link(t, a, b)
	f.svc.CloseProject(t.Context(), f.project.ID)
	f.computes.failOn["put_link"] = &Error{Kind: ErrConflict, Msg: "agent down"}
	_, err := f.svc.OpenProject(t.Context(), f.project.ID)
	wantErr(t, err, ErrConflict, "agent down")
	if p, _ := f.svc.Project(f.project.ID); p.Status != Closed {
		t.Fatalf("status %s after a failed open", p.Status)
	}
}

func TestLoadListsStoredProjectsClosedAndOpensAutoOpenOnes(t *testing.T) {
	f := newFixture(t)
	f.node(t, "A")
	auto, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "auto", Settings: Settings{AutoOpen: true}})
	if err != nil {
		t.Fatal(err)
	}
	// A new controller on the same store.
	svc := NewService(Config{ProjectsDir: f.svc.core.cfg.ProjectsDir, Computes: f.computes, Store: f.store})
	if errs := svc.Load(t.Context(), nil); len(errs) != 0 {
		t.Fatal(errs)
	}
	p, _ := svc.Project(f.project.ID)
	a, _ := svc.Project(auto.ID)
	if p.Status != Closed || a.Status != Opened {
		t.Fatalf("after load: %s %s, want closed and opened", p.Status, a.Status)
	}
	if nodes, _ := svc.Nodes.List(p.ID); len(nodes) != 1 {
		t.Fatalf("the closed project lists %d nodes", len(nodes))
	}
}

func TestLoadTakesOverTheCapturesOfAutoOpenProjects(t *testing.T) {
	f, _, _, l := capturingPair(t)
	auto := true
	if _, err := f.svc.UpdateProject(t.Context(), f.project.ID, ProjectUpdate{SettingsUpdate: SettingsUpdate{AutoOpen: &auto}}); err != nil {
		t.Fatal(err)
	}
	// A new controller on the same store, the compute still running the
	// link and writing its capture. (Opened by Load, the project was
	// skipped by Adopt, and its capture was lost.)
	running := []Running{{ComputeID: "local", ProjectID: f.project.ID, Links: []RunningLink{
		{ID: l.ID, Capture: &capspec.State{FilePath: l.Capture.FilePath}},
	}}}
	svc := NewService(Config{ProjectsDir: f.svc.core.cfg.ProjectsDir, Computes: f.computes, Store: f.store})
	if errs := svc.Load(t.Context(), running); len(errs) != 0 {
		t.Fatal(errs)
	}
	got, err := svc.Links.Get(f.project.ID, l.ID)
	if err != nil || !got.Capture.Active || got.Capture.ComputeID != "local" || got.Capture.FilePath != l.Capture.FilePath {
		t.Fatalf("after load: %+v, %v; want the running capture taken over", got.Capture, err)
	}
}

func TestUpdateNodeFollowsGNS3RenameAndLabelRules(t *testing.T) {
	f := newFixture(t)
	a := f.node(t, "PC1")
	f.node(t, "PC2")
	// GNS3 frees the node's own name first: PC1 renamed to the taken PC2
	// gets the first free number, which is its own.
	name, x := "PC2", 40
	n, err := f.svc.Nodes.Update(t.Context(), f.project.ID, a.ID, NodeUpdate{Name: &name, X: &x})
	if err != nil || n.Name != "PC1" || n.X != 40 {
		t.Fatalf("rename to a taken name: %+v, %v", n, err)
	}
	name = "Edge Router"
	n, err = f.svc.Nodes.Update(t.Context(), f.project.ID, a.ID, NodeUpdate{Name: &name})
	if err != nil || n.Name != "EdgeRouter" || string(n.Label["text"]) != `"EdgeRouter"` || string(n.Label["x"]) != "null" {
		t.Fatalf("renamed node %+v, %v", n, err)
	}
	lbl := Label{"text": []byte(`"ignored"`), "x": []byte("5"), "y": []byte("7")}
	n, _ = f.svc.Nodes.Update(t.Context(), f.project.ID, a.ID, NodeUpdate{Label: lbl})
	if len(n.Label) != 3 || string(n.Label["text"]) != `"EdgeRouter"` || string(n.Label["y"]) != "7" {
		t.Fatalf("label %v: stored as given but for its text", n.Label)
	}
	console := n.Console + 1
	if _, err := f.svc.Nodes.Update(t.Context(), f.project.ID, a.ID, NodeUpdate{Console: &console}); !errors.Is(err, ErrConflict) {
		t.Fatalf("console change: %v", err)
	}
	same := n.Console
	if _, err := f.svc.Nodes.Update(t.Context(), f.project.ID, a.ID, NodeUpdate{Console: &same}); err != nil {
		t.Fatalf("the same console: %v", err)
	}
}

func TestUpdateProject(t *testing.T) {
	f := newFixture(t)
	zoom, name := 150, "renamed"
	p, err := f.svc.UpdateProject(t.Context(), f.project.ID, ProjectUpdate{Name: &name, SettingsUpdate: SettingsUpdate{Zoom: &zoom}})
	if err != nil || p.Settings.Zoom != 150 || p.Name != "renamed" || p.Filename != "lab.gns3" {
		t.Fatalf("update: %+v, %v", p, err)
	}
	if snap := f.store.Saved(p.ID); snap.Project.Settings.Zoom != 150 {
		t.Fatal("update not saved")
	}
	f.store.fail = true
	zoom = 10
	if _, err := f.svc.UpdateProject(t.Context(), f.project.ID, ProjectUpdate{SettingsUpdate: SettingsUpdate{Zoom: &zoom}}); err == nil {
		t.Fatal("an update that cannot be saved succeeded")
	}
	if p, _ := f.svc.Project(f.project.ID); p.Settings.Zoom != 150 {
		t.Fatalf("a failed update stayed: zoom %d", p.Settings.Zoom)
	}
}

func TestBuiltinTemplatesHaveGNS3sIDs(t *testing.T) {
	// The ids GNS3 clients know.
	want := map[string]string{"vpcs": "19021f99-e36f-394d-b4a1-8aaa902ab9cc"}
	for _, tpl := range builtinTemplates() {
		if id, ok := want[tpl.Type]; ok && tpl.ID != id {
			t.Errorf("%s template id %s, want %s", tpl.Type, tpl.ID, id)
		}
	}
	f := newFixture(t)
	n, err := f.svc.Templates.CreateNode(t.Context(), f.project.ID, want["vpcs"], FromTemplate{X: 10, Y: 20, ComputeID: "local"})
	if err != nil || n.Name != "PC1" || n.TemplateID != want["vpcs"] || n.Symbol != ":/symbols/vpcs_guest.svg" || n.X != 10 {
		t.Fatalf("node from template: %+v, %v", n, err)
	}
	_, err = f.svc.Templates.CreateNode(t.Context(), f.project.ID, want["vpcs"], FromTemplate{})
	wantErr(t, err, ErrNotFound, "Compute ID None doesn't exist")
	_, err = f.svc.Templates.CreateNode(t.Context(), f.project.ID, "nope", FromTemplate{ComputeID: "local"})
	wantErr(t, err, ErrNotFound, "Template nope doesn't exist")
}
