package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/labtap/labtap/capspec"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeComputes is a compute "local" (and "remote") kept in memory, whose
// state tests assert on.
type fakeComputes struct {
	mu       sync.Mutex
	nodes    map[string]string // node id → status
	specs    map[string]NodeSpec
	links    map[string]Wiring
	captures map[string]capspec.Spec // link id → running capture
	failOn   map[string]error        // operation name → error to return
	reserved map[string]int          // compute/reservation id → port
	relays   map[string]Wiring       // compute/link id → relay
	calls    []string
	// onStatus, when set, runs as SetNodeStatus is called, before the
	// fake takes its lock: tests hold a start there.
	onStatus func(nodeID, status string)
}

func newFakeComputes() *fakeComputes {
	return &fakeComputes{
		nodes: map[string]string{}, specs: map[string]NodeSpec{}, links: map[string]Wiring{}, captures: map[string]capspec.Spec{},
		failOn: map[string]error{},
	}
}

func (f *fakeComputes) op(name string) error {
	f.calls = append(f.calls, name)
	return f.failOn[name]
}

func (f *fakeComputes) Exists(id string) bool { return id == "local" || id == "remote" }
func (f *fakeComputes) NodeTypes(id string) []string {
	return []string{"vpcs", TypeSwitch, TypeHub, TypeCloud}
}
func (f *fakeComputes) CloseProject(context.Context, string, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op("close_project")
}
func (f *fakeComputes) OpenProject(context.Context, string, ProjectRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op("open")
}

func (f *fakeComputes) CreateNode(_ context.Context, c, p string, n NodeSpec) (NodeRuntime, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("create_node"); err != nil {
		return NodeRuntime{}, err
	}
	if hasPortsMapping(n.Type) { // run by the agent itself, always started
		if old, ok := f.specs[n.ID]; ok && (len(old.Ports) != len(n.Ports) || n.Type != TypeSwitch) {
			return NodeRuntime{}, &Error{Kind: ErrConflict, Msg: "node exists with other ports"}
		}
		f.nodes[n.ID] = Started
		f.specs[n.ID] = n
		return NodeRuntime{Status: Started, ConsoleType: "none"}, nil
	}
	f.nodes[n.ID] = Stopped
	return NodeRuntime{Status: Stopped, Console: 5000 + len(f.nodes), ConsoleHost: "127.0.0.1", ConsoleType: "telnet"}, nil
}

func (f *fakeComputes) SetNodeStatus(_ context.Context, c, p, id, status string) (NodeRuntime, error) {
	if f.onStatus != nil {
		f.onStatus(id, status)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("status_" + status); err != nil {
		return NodeRuntime{}, err
	}
	f.nodes[id] = status
	return NodeRuntime{Status: status, Console: 5001, ConsoleHost: "127.0.0.1", ConsoleType: "telnet", CommandLine: "vpcs " + status}, nil
}

func (f *fakeComputes) Node(_ context.Context, c, p, id string) (NodeRuntime, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	status, ok := f.nodes[id]
	if !ok {
		return NodeRuntime{}, &Error{Kind: ErrNotFound, Msg: "no such node"}
	}
	return NodeRuntime{Status: status, Console: 5001, ConsoleHost: "127.0.0.1", ConsoleType: "telnet", CommandLine: "vpcs " + status}, nil
}

func (f *fakeComputes) DeleteNode(_ context.Context, c, p, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, id)
	delete(f.specs, id)
	return f.op("delete_node")
}

func (f *fakeComputes) PutLink(_ context.Context, c, p string, w Wiring) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("put_link"); err != nil {
		return err
	}
	if err := f.failOn["put_link@"+c]; err != nil {
		return err
	}
	f.links[w.LinkID] = w
	if f.relays == nil {
		f.relays = map[string]Wiring{}
	}
	f.relays[c+"/"+w.LinkID] = w
	// A call that timed out after the compute applied it.
	if err := f.failOn["put_link_applied@"+c]; err != nil {
		delete(f.failOn, "put_link_applied@"+c)
		return err
	}
	return nil
}

func (f *fakeComputes) CheckFilters(_ context.Context, c, dlt string, bpf []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("check_filters"); err != nil {
		return err
	}
	return f.failOn["check_filters@"+c]
}

func (f *fakeComputes) DeleteLink(_ context.Context, c, p, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, id)
	delete(f.relays, c+"/"+id)
	delete(f.captures, id)
	return f.op("delete_link")
}

func (f *fakeComputes) StartCapture(_ context.Context, c, p, l string, req capspec.Spec) (capspec.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("start_capture"); err != nil {
		return capspec.State{}, err
	}
	f.captures[l] = req
	return capspec.State{Active: true, FileName: req.FileName, FilePath: "/captures/" + req.FileName, Spec: req, Files: 1}, nil
}

func (f *fakeComputes) StopCapture(_ context.Context, c, p, l string) (capspec.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	req := f.captures[l]
	delete(f.captures, l)
	return capspec.State{FileName: req.FileName, FilePath: "/captures/" + req.FileName, Spec: req, Files: 1}, f.op("stop_capture")
}

func (f *fakeComputes) CaptureState(_ context.Context, c, p, l string) (capspec.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	req, ok := f.captures[l]
	if !ok {
		return capspec.State{}, errorf(ErrNotFound, "no capture on link %s", l)
	}
	return capspec.State{Active: true, FileName: req.FileName, FilePath: "/captures/" + req.FileName, Spec: req, Files: 1, Frames: 7}, nil
}

func (f *fakeComputes) ReserveTunnelPort(_ context.Context, c, p, id string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("reserve"); err != nil {
		return 0, err
	}
	if f.reserved == nil {
		f.reserved = map[string]int{}
	}
	if port, ok := f.reserved[c+"/"+id]; ok {
		return port, nil
	}
	f.reserved[c+"/"+id] = 30000 + len(f.reserved)
	return f.reserved[c+"/"+id], nil
}

func (f *fakeComputes) ReleaseTunnelPort(_ context.Context, c, p, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reserved, c+"/"+id)
	return f.op("release")
}

func (f *fakeComputes) TunnelHost(c string) string {
	return map[string]string{"local": "192.0.2.1", "remote": "192.0.2.2"}[c]
}

func (f *fakeComputes) NodeFile(context.Context, string, string, string, string) ([]byte, error) {
	return nil, errorf(ErrNotFound, "no files here")
}

func (f *fakeComputes) WriteNodeFile(context.Context, string, string, string, string, []byte) error {
	return nil
}

func (f *fakeComputes) ResetConsole(context.Context, string, string, string) error { return nil }

func (f *fakeComputes) CaptureStream(context.Context, string, string, string) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("pcap")), nil
}

func (f *fakeComputes) CaptureFile(context.Context, string, string, string) (CaptureFile, error) {
	return CaptureFile{Name: "a.pcap", Size: 4, Body: io.NopCloser(strings.NewReader("pcap"))}, nil
}

// recorder keeps events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) actions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Action)
	}
	return out
}

// failingStore fails every Save once fail is set.
type failingStore struct {
	MemoryStore
	fail bool
}

func (s *failingStore) Save(snap *Snapshot) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.MemoryStore.Save(snap)
}

type fixture struct {
	svc      *Service
	computes *fakeComputes
	store    *failingStore
	events   *recorder
	project  Project
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{computes: newFakeComputes(), store: &failingStore{}, events: &recorder{}}
	f.svc = NewService(Config{ProjectsDir: t.TempDir(), Computes: f.computes, Store: f.store, Events: f.events})
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	return f
}

func (f *fixture) node(t *testing.T, name string) Node {
	t.Helper()
	return f.nodeOf(t, "vpcs", name, nil)
}

func (f *fixture) nodeOf(t *testing.T, typ, name string, props map[string]any) Node {
	t.Helper()
	req := NewNodeCreate()
	req.ComputeID, req.Type, req.Name = "local", typ, name
	if props != nil {
		req.Properties = props
	}
	n, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) link(t *testing.T, a, b Node) Link {
	t.Helper()
	l, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: b.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func wantErr(t *testing.T, err, kind error, msg string) {
	t.Helper()
	if !errors.Is(err, kind) || err.Error() != msg {
		t.Fatalf("error = %v (%T), want %v %q", err, err, kind, msg)
	}
}

func TestCreateNodeNamesAndSavesIt(t *testing.T) {
	f := newFixture(t)
	a := f.node(t, "PC 1")
	b := f.node(t, "PC1")
	if a.Name != "PC1" || b.Name != "PC2" {
		t.Fatalf("names %q, %q; want PC1, PC2", a.Name, b.Name)
	}
	if a.MACIndex == b.MACIndex {
		t.Fatal("two nodes of a project share a MAC index")
	}
	if a.Status != Stopped || a.Console == 0 || a.Width != 65 || a.Height != 59 || string(a.Label["y"]) != "-40" {
		t.Fatalf("node %+v", a)
	}
	if snap := f.store.Saved(f.project.ID); snap == nil || len(snap.Nodes) != 2 {
		t.Fatalf("saved snapshot %+v, want 2 nodes", snap)
	}
	_, err := f.svc.Nodes.Create(t.Context(), f.project.ID, NodeCreate{ComputeID: "nowhere", Type: "vpcs", Name: "x"})
	wantErr(t, err, ErrNotFound, "Compute ID nowhere doesn't exist")
	_, err = f.svc.Nodes.Create(t.Context(), "missing", NodeCreate{ComputeID: "local", Type: "vpcs", Name: "x"})
	wantErr(t, err, ErrNotFound, "Project ID missing doesn't exist")
}

func TestNodeThatCannotBeSavedIsRolledBack(t *testing.T) {
	f := newFixture(t)
	f.store.fail = true
	req := NewNodeCreate()
	req.ComputeID, req.Type, req.Name = "local", "vpcs", "PC1"
	if _, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req); !errors.Is(err, ErrInternal) {
		t.Fatalf("CreateNode with a full disk: %v, want a 500 (GNS3's)", err)
	}
	nodes, _ := f.svc.Nodes.List(f.project.ID)
	if len(nodes) != 0 || len(f.computes.nodes) != 0 {
		t.Fatalf("after a failed save: %d nodes here, %d on the compute", len(nodes), len(f.computes.nodes))
	}
	// The name was not kept either (GNS3 keeps it).
	f.store.fail = false
	if n := f.node(t, "PC1"); n.Name != "PC1" {
		t.Fatalf("name %q, want PC1", n.Name)
	}
}

func TestLinkChecksInGNS3Order(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.node(t, "A"), f.node(t, "B"), f.node(t, "C")
	f.link(t, a, b)
	tests := []struct {
		name string
		eps  []Endpoint
		kind error
		msg  string
	}{
		{"unknown node", []Endpoint{{NodeID: "00000000-0000-4000-8000-000000000000"}}, ErrNotFound,
			"Node ID 00000000-0000-4000-8000-000000000000 doesn't exist"},
		{"unknown port", []Endpoint{{NodeID: c.ID, Adapter: 0, Port: 1}}, ErrNotFound, "Port 0/1 for C not found"},
		{"port used", []Endpoint{{NodeID: c.ID}, {NodeID: a.ID}}, ErrConflict, "Port is already used"},
		{"same node twice", []Endpoint{{NodeID: c.ID}, {NodeID: c.ID}}, ErrConflict, "Cannot connect to itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.computes.links)
			_, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: tt.eps})
			wantErr(t, err, tt.kind, tt.msg)
			links, _ := f.svc.Links.List(f.project.ID)
			if len(links) != 1 || len(f.computes.links) != before {
				t.Fatalf("a refused link changed state: %d links", len(links))
			}
		})
	}
	if _, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: make([]Endpoint, 3)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("three endpoints: %v, want invalid", err)
	}
	// A half link is kept, not wired, and reserves nothing.
	half, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: c.ID}}})
	if err != nil || half.Wired || len(f.computes.links) != 1 {
		t.Fatalf("half link: %+v, %v", half, err)
	}
}

func TestFailedWiringLeavesNoLink(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	f.computes.failOn["put_link"] = &Error{Kind: ErrConflict, Msg: "agent says no"}
	_, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: b.ID}}})
	wantErr(t, err, ErrConflict, "agent says no")
	if links, _ := f.svc.Links.List(f.project.ID); len(links) != 0 {
		t.Fatalf("%d links after a failed creation", len(links))
	}
	delete(f.computes.failOn, "put_link")
	f.link(t, a, b) // the ports were not left reserved
}

func TestCaptureLifecycle(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "PC1"), f.node(t, "PC2")
	l := f.link(t, a, b)
	_, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{})
	wantErr(t, err, ErrConflict, "Cannot capture because there is no running device on this link")

	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	name := "PC1_0-0_to_PC2_0-0.pcap"
	want := Capture{State: capspec.State{Active: true, FileName: name, FilePath: "/captures/" + name, Files: 1,
		Spec: capspec.Spec{FileName: name, DataLinkType: "DLT_EN10MB", Format: "pcap"}}, ComputeID: "local", Side: 1}
	if got.Capture != want || f.computes.captures[l.ID].DataLinkType != "DLT_EN10MB" {
		t.Fatalf("capture %+v, want %+v", got.Capture, want)
	}
	_, err = f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{DataLinkType: "DLT_C_HDLC"})
	wantErr(t, err, ErrConflict, "Packet capture is already active on this link")

	// Stopping the other node leaves the capture running.
	f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID)
	f.svc.Nodes.Stop(t.Context(), f.project.ID, a.ID)
	if l, _ := f.svc.Links.Get(f.project.ID, l.ID); !l.Capture.Active {
		t.Fatal("stopping the other node stopped the capture")
	}
	// Stopping the capture side stops it, announced before the node.
	f.events.events = nil
	f.svc.Nodes.Stop(t.Context(), f.project.ID, b.ID)
	after, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if after.Capture.Active || after.Capture.ComputeID != "" || after.Capture.FileName != want.FileName || len(f.computes.captures) != 0 {
		t.Fatalf("after the capture node stopped: %+v", after.Capture)
	}
	if got := fmt.Sprint(f.events.actions()); got != "[link.updated node.updated]" {
		t.Fatalf("events %s, want link.updated then node.updated", got)
	}
	// Stop when not capturing is fine.
	if _, err := f.svc.Captures.Stop(t.Context(), f.project.ID, l.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCaptureFileNamesAreSanitised(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "PC1"), f.node(t, "PC2")
	l := f.link(t, a, b)
	f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID)
	got, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{FileName: "../../../etc/cron.d/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Capture.FileName != "etccrondx.pcap" || f.computes.captures[l.ID].FileName != "etccrondx.pcap" {
		t.Fatalf("file name %q", got.Capture.FileName)
	}
	f.svc.Captures.Stop(t.Context(), f.project.ID, l.ID)
	_, err = f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{FileName: "../.."})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a name with nothing usable: %v, want invalid", err)
	}
}

func TestDeleteNodeDeletesItsLinksFirst(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	f.link(t, a, b)
	f.events.events = nil
	if err := f.svc.Nodes.Delete(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.events.actions()); got != "[link.deleted node.deleted]" {
		t.Fatalf("events %s", got)
	}
	if links, _ := f.svc.Links.List(f.project.ID); len(links) != 0 || len(f.computes.links) != 0 {
		t.Fatal("the node's link survived it")
	}
	err := f.svc.Nodes.Delete(t.Context(), f.project.ID, a.ID)
	wantErr(t, err, ErrNotFound, "Node ID "+a.ID+" doesn't exist")
}

func TestProjectNamesAreUnique(t *testing.T) {
	f := newFixture(t)
	_, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	wantErr(t, err, ErrConflict, `Project "lab" already exists`)
	// The same id returns the existing project.
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{ID: f.project.ID, Name: "other"})
	if err != nil || p.Name != "lab" {
		t.Fatalf("same id: %+v, %v", p, err)
	}
}

func TestProjectPathMustStayInsideTheProjectsDirectory(t *testing.T) {
	f := newFixture(t)
	dir := f.svc.core.cfg.ProjectsDir
	for _, path := range []string{"/tmp/outside", dir + "-evil", dir + "/../victim", dir} {
		_, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "p-" + path, Path: path})
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("path %q: %v, want forbidden", path, err)
		}
	}
	if _, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "inside", Path: dir + "/mine"}); err != nil {
		t.Fatalf("a path inside: %v", err)
	}
}

func TestDeletingAProjectOutsideTheProjectsDirectoryIsRefusedAndLeavesItOpen(t *testing.T) {
	// Such a project comes from a file opened from elsewhere, or from a
	// projects directory that moved since; the API cannot create one.
	f := newFixture(t)
	f.node(t, "PC1") // opens the project on its compute
	st, err := f.svc.core.lookup(f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	st.mu.Lock()
	st.p.Path = elsewhere
	st.mu.Unlock()
	f.computes.mu.Lock()
	f.computes.calls = nil
	f.computes.mu.Unlock()

	err = f.svc.DeleteProject(t.Context(), f.project.ID)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "not in the default project directory") {
		t.Fatalf("DeleteProject: %v, want the conflict", err)
	}
	f.computes.mu.Lock()
	calls := f.computes.calls
	f.computes.mu.Unlock()
	if len(calls) != 0 {
		t.Fatalf("a refused delete called the computes: %v", calls)
	}
	if p, err := f.svc.Project(f.project.ID); err != nil || p.Status != Opened {
		t.Fatalf("after the refusal: %+v, %v; want it still opened", p, err)
	}
	f.node(t, "PC2") // and still usable
}

func TestAChangeWaitingBehindACloseOrADeleteDoesNotUndoIt(t *testing.T) {
	for _, end := range []string{"close", "delete"} {
		t.Run(end, func(t *testing.T) {
			f := newFixture(t)
			pc := f.node(t, "PC1")
			st, err := f.svc.core.lookup(f.project.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The test is the close or the delete: it holds the project's
			// lock while a node start arrives and waits for it, then ends
			// the project as CloseProject or DeleteProject do, and lets go.
			st.ops.Lock()
			waiting := reachesTheLock(f.svc)
			created := make(chan error, 1)
			go func() {
				_, err := f.svc.Nodes.Start(context.Background(), f.project.ID, pc.ID)
				created <- err
			}()
			<-waiting
			if end == "close" {
				st.mu.Lock()
				st.p.Status = Closed
				st.mu.Unlock()
			} else {
				f.svc.core.mu.Lock()
				delete(f.svc.core.projects, f.project.ID)
				f.svc.core.mu.Unlock()
			}
			f.computes.mu.Lock()
			f.computes.calls = nil
			f.computes.mu.Unlock()
			st.ops.Unlock()

			err = <-created
			want := map[string]error{"close": ErrForbidden, "delete": ErrNotFound}[end]
			if !errors.Is(err, want) {
				t.Fatalf("StartNode after the %s: %v, want %v", end, err, want)
			}
			f.computes.mu.Lock()
			defer f.computes.mu.Unlock()
			if len(f.computes.calls) != 0 {
				t.Fatalf("the compute was called after the %s: %v", end, f.computes.calls)
			}
		})
	}
}

func TestAnUpdateWaitingBehindADeleteDoesNotWriteTheProjectBack(t *testing.T) {
	f := newFixture(t)
	st, err := f.svc.core.lookup(f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.ops.Lock() // the test is the delete, as in the test above
	waiting := reachesTheLock(f.svc)
	updated := make(chan error, 1)
	go func() {
		name := "renamed"
		_, err := f.svc.UpdateProject(context.Background(), f.project.ID, ProjectUpdate{Name: &name})
		updated <- err
	}()
	<-waiting
	f.svc.core.mu.Lock()
	delete(f.svc.core.projects, f.project.ID)
	f.svc.core.mu.Unlock()
	f.store.Remove(&f.project)
	st.ops.Unlock()
	if err := <-updated; !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpdateProject after the delete: %v, want not found", err)
	}
	if _, err := f.store.Load(&f.project); err == nil {
		t.Fatal("the deleted project's file was written back")
	}
}

// reachesTheLock returns a channel closed once a change has found its
// project and waits for the project's lock.
func reachesTheLock(svc *Service) <-chan struct{} {
	reached := make(chan struct{})
	var once sync.Once
	svc.core.hooks.beforeOpsLock = func() { once.Do(func() { close(reached) }) }
	return reached
}

func TestConcurrentLinksCannotShareAPort(t *testing.T) {
	// GNS3 checks "port used" before an awaited compute call and marks it
	// after, so two requests at once can wire one port twice (7.6).
	f := newFixture(t)
	a := f.node(t, "A")
	others := []Node{f.node(t, "B"), f.node(t, "C"), f.node(t, "D"), f.node(t, "E")}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for _, o := range others {
		wg.Go(func() {
			_, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: a.ID}, {NodeID: o.ID}}})
			if err == nil {
				ok.Add(1)
			} else if !errors.Is(err, ErrConflict) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || len(f.computes.links) != 1 {
		t.Fatalf("%d links created on one port (%d on the compute), want 1", ok.Load(), len(f.computes.links))
	}
}

func TestAFailedLinkDeletionKeepsTheLinkAndItsPorts(t *testing.T) {
	// GNS3 removes the link before the compute calls; when one fails the
	// ports stay marked used with no link to free them (7.7).
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	l := f.link(t, a, b)
	f.computes.failOn["delete_link"] = &Error{Kind: ErrConflict, Msg: "agent busy"}
	err := f.svc.Links.Delete(t.Context(), f.project.ID, l.ID)
	wantErr(t, err, ErrConflict, "agent busy")
	if _, err := f.svc.Links.Get(f.project.ID, l.ID); err != nil {
		t.Fatalf("the link is gone after a failed deletion: %v", err)
	}
	delete(f.computes.failOn, "delete_link")
	if err := f.svc.Links.Delete(t.Context(), f.project.ID, l.ID); err != nil {
		t.Fatal(err)
	}
	f.link(t, a, b) // the ports are free
}

func TestStopCaptureClearsTheLinkEvenWhenTheComputeFails(t *testing.T) {
	// 7.12: GNS3 leaves capturing true with no way out.
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	l := f.link(t, a, b)
	f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID)
	f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{})
	f.computes.failOn["stop_capture"] = &Error{Kind: ErrConflict, Msg: "agent lost"}
	got, err := f.svc.Captures.Stop(t.Context(), f.project.ID, l.ID)
	if err != nil || got.Capture.Active || got.Capture.FileName == "" {
		t.Fatalf("stop with a failing compute: %+v, %v", got.Capture, err)
	}
	delete(f.computes.failOn, "stop_capture")
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{}); err != nil {
		t.Fatalf("a new capture after the failed stop: %v", err)
	}
}

// A node's properties are merged by each update: keys under the request
// body limit each, added one update at a time, grew a node (its project
// file, every node.updated) without bound. Their whole is bounded.
func TestNodePropertiesAreBoundedAcrossUpdates(t *testing.T) {
	f := newFixture(t)
	n := f.node(t, "PC1")
	chunk := strings.Repeat("x", 600<<10)
	var err error
	for i := range 4 {
		_, err = f.svc.Nodes.Update(t.Context(), f.project.ID, n.ID, NodeUpdate{Properties: map[string]any{fmt.Sprintf("k%d", i): chunk}})
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2.4 MB of properties in 600 KB updates: %v, want ErrTooLarge", err)
	}
	got, _ := f.svc.Nodes.Get(f.project.ID, n.ID)
	if b, _ := json.Marshal(got.Properties); len(b) > MaxNodeProperties {
		t.Fatalf("the node kept %d bytes of properties", len(b))
	}
	req := NewNodeCreate()
	req.ComputeID, req.Type, req.Name = "local", "vpcs", "PC2"
	req.Properties = map[string]any{"a": chunk, "b": chunk}
	if _, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a node created with 1.2 MB of properties: %v", err)
	}
}

// A link change made on its computes stays made when its save fails, and
// answers the failure, with no link.updated: a client told "updated" would
// think it on disk.
func TestALinkChangeThatCannotBeSavedAnswersTheFailure(t *testing.T) {
	f := newFixture(t)
	l := f.link(t, f.node(t, "A"), f.node(t, "B"))
	before := len(f.events.actions())
	f.store.fail = true
	yes := true
	if _, err := f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{Suspend: &yes}); !errors.Is(err, ErrInternal) {
		t.Fatalf("Links.Update with a full disk: %v, want a 500 (GNS3's)", err)
	}
	if got := f.events.actions()[before:]; slices.Contains(got, LinkUpdated) {
		t.Fatalf("events after a failed save: %v", got)
	}
	if cur, err := f.svc.Links.Get(f.project.ID, l.ID); err != nil || !cur.Suspend {
		t.Fatalf("the link as kept: %+v, %v (its computes suspended it)", cur, err)
	}
}
