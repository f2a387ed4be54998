package project

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labtap/labtap/capspec"
)

// fixedQuotas gives every project the same quotas.
type fixedQuotas []Quota

func (q fixedQuotas) For(string) []Quota { return q }

// quotaOf is one quota over the fixture's project and more.
func quotaOf(scope string, max Usage, projects ...string) fixedQuotas {
	return fixedQuotas{{Scope: scope, Projects: projects, Max: max}}
}

func (f *fixture) nodeIDs(t *testing.T) []string {
	t.Helper()
	ns, err := f.svc.Nodes.List(f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.ID+"="+n.Status)
	}
	return ids
}

func TestQuotaNodesRefusedAtTheLimitChangesNothing(t *testing.T) {
	f := newFixture(t)
	max := Unlimited()
	max.Nodes = 2
	f.svc.SetQuotas(quotaOf("user alice", max, f.project.ID))
	f.node(t, "PC1")
	f.node(t, "PC2")
	before, calls, events := f.nodeIDs(t), len(f.computes.calls), len(f.events.actions())
	saved := f.store.Saved(f.project.ID)
	req := NewNodeCreate()
	req.ComputeID, req.Type, req.Name = "local", "vpcs", "PC3"
	_, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req)
	wantErr(t, err, ErrConflict, "quota exceeded: nodes 2/2 for user alice (this needs 1 more)")
	if after := f.nodeIDs(t); !slices.Equal(before, after) {
		t.Fatalf("nodes %v after the refusal, want %v", after, before)
	}
	if len(f.computes.calls) != calls || len(f.events.actions()) != events || f.store.Saved(f.project.ID) != saved {
		t.Fatalf("the refused create reached the compute (%v), sent events or saved", f.computes.calls[calls:])
	}
	// A switch is a node too; its running does not count.
	_, err = f.svc.Nodes.Create(t.Context(), f.project.ID, NodeCreate{ComputeID: "local", Type: TypeSwitch, Name: "SW1"})
	wantErr(t, err, ErrConflict, "quota exceeded: nodes 2/2 for user alice (this needs 1 more)")
}

func TestQuotaRunningNodesRefusedAtTheLimit(t *testing.T) {
	f := newFixture(t)
	max := Unlimited()
	max.Running = 1
	f.svc.SetQuotas(quotaOf("group class-a", max, f.project.ID))
	a, b := f.node(t, "PC1"), f.node(t, "PC2")
	sw := f.nodeOf(t, TypeSwitch, "SW1", nil) // runs whenever it exists: not counted
	if sw.Status != Started {
		t.Fatalf("switch %s", sw.Status)
	}
	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	before, calls := f.nodeIDs(t), len(f.computes.calls)
	_, err := f.svc.Nodes.Start(t.Context(), f.project.ID, b.ID)
	wantErr(t, err, ErrConflict, "quota exceeded: running nodes 1/1 for group class-a (this needs 1 more)")
	if err := f.svc.Nodes.StartAll(t.Context(), f.project.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("start all past the quota: %v, want a 409", err)
	}
	if after := f.nodeIDs(t); !slices.Equal(before, after) || f.computes.nodes[b.ID] != Stopped {
		t.Fatalf("nodes %v after the refusals, want %v; compute calls %v", after, before, f.computes.calls[calls:])
	}
	// Starting what runs adds nothing; stopping frees the place.
	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatalf("starting a started node: %v", err)
	}
	if _, err := f.svc.Nodes.Stop(t.Context(), f.project.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, b.ID); err != nil {
		t.Fatalf("start once a node stopped: %v", err)
	}
}

func TestQuotaRAMOfRunningQEMUNodes(t *testing.T) {
	computes := newFakeComputes()
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: qemuComputes{dockerComputes{computes}}})
	p, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	max := Unlimited()
	max.RAMMB = 768
	svc.SetQuotas(quotaOf("user alice", max, p.ID))
	var vms []Node
	for _, name := range []string{"R1", "R2"} {
		req := NewNodeCreate()
		req.ComputeID, req.Type, req.Name = "local", "qemu", name
		req.Properties = map[string]any{"ram": 512}
		n, err := svc.Nodes.Create(t.Context(), p.ID, req)
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, n)
	}
	if _, err := svc.Nodes.Start(t.Context(), p.ID, vms[0].ID); err != nil {
		t.Fatal(err)
	}
	calls := len(computes.calls)
	_, err = svc.Nodes.Start(t.Context(), p.ID, vms[1].ID)
	wantErr(t, err, ErrConflict, "quota exceeded: RAM 512/768 MB for user alice (this needs 512 more)")
	if n, _ := svc.Nodes.Get(p.ID, vms[1].ID); n.Status != Stopped || len(computes.calls) != calls {
		t.Fatalf("refused node is %s; compute calls %v", n.Status, computes.calls[calls:])
	}
	if u := svc.Usage([]string{p.ID}); u != (Usage{Nodes: 2, Running: 1, RAMMB: 512}) {
		t.Fatalf("usage %v", u)
	}
	// More RAM for the running VM is refused too; less passes.
	_, err = svc.Nodes.Update(t.Context(), p.ID, vms[0].ID, NodeUpdate{Properties: map[string]any{"ram": 1024}})
	wantErr(t, err, ErrConflict, "quota exceeded: RAM 512/768 MB for user alice (this needs 512 more)")
	if n, _ := svc.Nodes.Get(p.ID, vms[0].ID); ramOf(&n) != 512 {
		t.Fatalf("refused update left ram %v", n.Properties["ram"])
	}
	if _, err := svc.Nodes.Update(t.Context(), p.ID, vms[0].ID, NodeUpdate{Properties: map[string]any{"ram": 256}}); err != nil {
		t.Fatal(err)
	}
}

// heldCreates is fakeComputes whose first node creation waits until a
// second creation is about to count (counting), then until it reaches
// the compute too (second) or a moment has passed.
type heldCreates struct {
	*fakeComputes
	mu               sync.Mutex
	n                int
	counting, second chan struct{}
}

func (h *heldCreates) CreateNode(ctx context.Context, c, p string, n NodeSpec) (NodeRuntime, error) {
	h.mu.Lock()
	h.n++
	first := h.n == 1
	h.mu.Unlock()
	if first {
		<-h.counting
		select {
		case <-h.second:
		case <-time.After(100 * time.Millisecond): // the second waits for the quota lock
		}
	} else {
		close(h.second)
	}
	return h.fakeComputes.CreateNode(ctx, c, p, n)
}

// Two creates at the limit, in two projects of one quota, at once: one
// passes. The first waits in its compute call until the second is about
// to count: were the first not counted (claimed) from its own count on,
// the second would count 0 nodes too, and both would pass.
func TestQuotaConcurrentCreatesAtTheLimitOnePasses(t *testing.T) {
	computes := &heldCreates{fakeComputes: newFakeComputes(), counting: make(chan struct{}), second: make(chan struct{})}
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: computes})
	var pids []string
	for _, name := range []string{"lab1", "lab2"} {
		p, err := svc.CreateProject(t.Context(), ProjectCreate{Name: name, Settings: DefaultSettings()})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	max := Unlimited()
	max.Nodes = 1
	svc.SetQuotas(quotaOf("user alice", max, pids...))
	var counts atomic.Int32
	svc.core.hooks.beforeQuotaCount = func() {
		if counts.Add(1) == 2 {
			close(computes.counting)
		}
	}
	errs := make(chan error, 2)
	for _, pid := range pids {
		go func() {
			req := NewNodeCreate()
			req.ComputeID, req.Type, req.Name = "local", "vpcs", "PC1"
			_, err := svc.Nodes.Create(t.Context(), pid, req)
			errs <- err
		}()
	}
	passed := 0
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			passed++
		case !errors.Is(err, ErrConflict):
			t.Fatalf("create: %v", err)
		}
	}
	if u := svc.Usage(pids); passed != 1 || u.Nodes != 1 {
		t.Fatalf("%d creates passed, %d nodes; want 1", passed, u.Nodes)
	}
}

func TestQuotaCaptureBytesBudget(t *testing.T) {
	f := newFixture(t)
	a, b, c, d := f.node(t, "PC1"), f.node(t, "PC2"), f.node(t, "PC3"), f.node(t, "PC4")
	for _, n := range []Node{a, b, c, d} {
		if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, n.ID); err != nil {
			t.Fatal(err)
		}
	}
	l1, l2 := f.link(t, a, b), f.link(t, c, d)
	// A finished capture's file on the controller's disk counts.
	dir := filepath.Join(f.project.Path, "project-files", "captures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.pcap"), make([]byte, 200<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	max := Unlimited()
	max.CaptureBytes = 1 << 20
	f.svc.SetQuotas(quotaOf("user alice", max, f.project.ID))
	// A capture without a limit gets what is left.
	got, err := f.svc.Captures.Start(t.Context(), f.project.ID, l1.ID, capspec.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if spec := f.computes.captures[l1.ID]; spec.MaxBytes != 1<<20-200<<10 {
		t.Fatalf("capture sent with capture_max_bytes %d, want %d (link %+v)", spec.MaxBytes, 1<<20-200<<10, got.Capture)
	}
	// Nothing is left: the next is refused, unchanged.
	_, err = f.svc.Captures.Start(t.Context(), f.project.ID, l2.ID, capspec.Spec{})
	wantErr(t, err, ErrConflict, "quota exceeded: capture bytes 1048576/1048576 for user alice (this needs 131072 more)")
	if l, _ := f.svc.Links.Get(f.project.ID, l2.ID); l.Capture.Active || f.computes.captures[l2.ID].FileName != "" {
		t.Fatalf("refused capture runs: %+v", l.Capture)
	}
}

// A start admitted by a quota holds no lock while its compute starts the
// node: another start under the same quota goes on meanwhile, and the
// pending start counts, so a third past the limit is refused.
func TestQuotaStartsUnderOneQuotaRunAtOnce(t *testing.T) {
	f := newFixture(t)
	max := Unlimited()
	max.Running = 2
	f.svc.SetQuotas(quotaOf("user alice", max, f.project.ID))
	a, b, c := f.node(t, "A"), f.node(t, "B"), f.node(t, "C")
	aInCompute, release := make(chan struct{}), make(chan struct{})
	f.computes.onStatus = func(id, _ string) {
		if id == a.ID {
			close(aInCompute)
			<-release
		}
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := f.svc.Nodes.Start(context.Background(), f.project.ID, a.ID)
		aDone <- err
	}()
	eventually(t, aInCompute, "A's start reaching its compute")
	bDone := make(chan error, 1)
	go func() {
		_, err := f.svc.Nodes.Start(context.Background(), f.project.ID, b.ID)
		bDone <- err
	}()
	if err := eventually(t, bDone, "B's start while A's is in its compute's hands"); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Nodes.Start(t.Context(), f.project.ID, c.ID)
	wantErr(t, err, ErrConflict, "quota exceeded: running nodes 2/2 for user alice (this needs 1 more)")
	close(release)
	if err := eventually(t, aDone, "A's start"); err != nil {
		t.Fatal(err)
	}
	if u := f.svc.Usage([]string{f.project.ID}); u.Running != 2 {
		t.Fatalf("usage %+v once A started, want 2 running (A counted once)", u)
	}
}
