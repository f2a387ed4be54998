package project

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// eventually fails the test if ch is not ready within a generous deadline:
// what it waits for is an event, the deadline only stops a hang.
func eventually[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

func TestStartsOfDifferentNodesOfAProjectRunAtOnce(t *testing.T) {
	// Each start is an agent call that waits for a process: one project's
	// starts used to queue behind each other on the project's lock.
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
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
	close(release)
	if err := eventually(t, aDone, "A's start"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []Node{a, b} {
		if got, _ := f.svc.Nodes.Get(f.project.ID, n.ID); got.Status != Started {
			t.Fatalf("%s is %s, want started", n.Name, got.Status)
		}
	}
}

func TestStartAllStartsManyNodesAtOnce(t *testing.T) {
	f := newFixture(t)
	const nodes = 12
	for i := range nodes {
		f.node(t, "PC"+string(rune('A'+i)))
	}
	// Every start waits in the compute until all have arrived: StartAll
	// ends only if they all run at once.
	var arrived atomic.Int32
	all := make(chan struct{})
	f.computes.onStatus = func(string, string) {
		if arrived.Add(1) == nodes {
			close(all)
		}
		<-all
	}
	done := make(chan error, 1)
	go func() { done <- f.svc.Nodes.StartAll(context.Background(), f.project.ID) }()
	if err := eventually(t, done, "StartAll of nodes that wait for each other"); err != nil {
		t.Fatal(err)
	}
	list, _ := f.svc.Nodes.List(f.project.ID)
	for _, n := range list {
		if n.Status != Started {
			t.Fatalf("%s is %s after StartAll", n.Name, n.Status)
		}
	}
}

func TestANodeDeletedWhileItStartsEndsConsistent(t *testing.T) {
	// The delete waits for the start in progress, then removes the node
	// everywhere: no started node left on the compute, none in the
	// project or its file, and the events in the order things happened.
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	f.link(t, a, b)
	inCompute, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.computes.onStatus = func(id, _ string) {
		if id == a.ID {
			once.Do(func() { close(inCompute) })
			<-release
		}
	}
	started := make(chan error, 1)
	go func() {
		_, err := f.svc.Nodes.Start(context.Background(), f.project.ID, a.ID)
		started <- err
	}()
	eventually(t, inCompute, "the start reaching its compute")
	waiting := reachesTheLock(f.svc)
	deleted := make(chan error, 1)
	go func() { deleted <- f.svc.Nodes.Delete(context.Background(), f.project.ID, a.ID) }()
	eventually(t, waiting, "the delete waiting for the project")
	select {
	case err := <-deleted:
		t.Fatalf("the delete ended (%v) while the node's start was in its compute", err)
	default:
	}
	close(release)
	if err := eventually(t, started, "the start"); err != nil {
		t.Fatal(err)
	}
	if err := eventually(t, deleted, "the delete"); err != nil {
		t.Fatal(err)
	}

	if _, err := f.svc.Nodes.Get(f.project.ID, a.ID); err == nil {
		t.Fatal("the deleted node is still in the project")
	}
	f.computes.mu.Lock()
	_, onCompute := f.computes.nodes[a.ID]
	links := len(f.computes.links)
	f.computes.mu.Unlock()
	if onCompute || links != 0 {
		t.Fatalf("on the compute after the delete: node %v, %d links", onCompute, links)
	}
	snap := f.store.Saved(f.project.ID)
	if snap == nil || len(snap.Nodes) != 1 || snap.Nodes[0].ID != b.ID || len(snap.Links) != 0 {
		t.Fatalf("saved project after the delete: %+v", snap)
	}
	acts := f.events.actions()
	up, gone := slices.Index(acts, NodeUpdated), slices.Index(acts, NodeDeleted)
	if up < 0 || gone < up {
		t.Fatalf("events %v: want the start's node.updated before node.deleted", acts)
	}
	// A start after the delete finds no node.
	if _, err := f.svc.Nodes.Start(context.Background(), f.project.ID, a.ID); err == nil {
		t.Fatal("the deleted node started")
	}
}
