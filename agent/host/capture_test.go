package host

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

const (
	testProject = "3f0c5a8e-1b2d-4c6e-8a9f-0123456789ab"
	testNodeA   = "aaaaaaaa-1b2d-4c6e-8a9f-0123456789ab"
	testNodeB   = "bbbbbbbb-1b2d-4c6e-8a9f-0123456789ab"
	testNodeC   = "cccccccc-1b2d-4c6e-8a9f-0123456789ab"
	testLink    = "11111111-1b2d-4c6e-8a9f-0123456789ab"
)

// linkedHost is a Host with two started fake nodes joined by a link.
func linkedHost(t *testing.T) *Host {
	t.Helper()
	h := New(Config{DataDir: t.TempDir(), Runners: map[string]RunnerFactory{
		"vpcs": func(ctx context.Context, env RunnerEnv) (node.Runner, error) {
			return node.NewFake(env.Agent, env.OnStop), nil
		},
	}})
	t.Cleanup(func() { h.Close() })
	if err := h.OpenProject(proto.ProjectSpec{ProjectID: testProject, Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{testNodeA, testNodeB} {
		if _, err := h.CreateNode(t.Context(), testProject, proto.NodeSpec{NodeID: id, NodeType: "vpcs", Name: id[:4]}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.SetNodeStatus(t.Context(), testProject, id, proto.StatusStarted); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.PutLink(testProject, proto.LinkSpec{LinkID: testLink, A: proto.Endpoint{NodeID: testNodeA}, B: proto.Endpoint{NodeID: testNodeB}}); err != nil {
		t.Fatal(err)
	}
	return h
}

// within fails the test when call does not return within a generous
// deadline: it was blocked.
func within(t *testing.T, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); call() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was blocked by a capture being closed", what)
	}
}

func TestASlowCaptureCloseBlocksNoOtherAgentCall(t *testing.T) {
	h := linkedHost(t)
	spec := proto.CaptureSpec{FileName: "slow.pcap"}
	if _, err := h.StartCapture(testProject, testLink, spec); err != nil {
		t.Fatal(err)
	}
	// The disk is slow: closing the capture's file waits for the test.
	entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, waitOnce, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // registered after linkedHost's Close: runs before it
	h.hooks.closing = func() { once.Do(func() { close(entered); <-release }) }
	h.hooks.nameBusy = func() { waitOnce.Do(func() { close(waiting) }) }
	stopped := make(chan proto.CaptureState, 1)
	go func() {
		st, err := h.StopCapture(testProject, testLink)
		if err != nil {
			t.Error(err)
		}
		stopped <- st
	}()
	<-entered

	// Every other call goes on meanwhile.
	within(t, "State", func() { h.State() })
	within(t, "Link", func() {
		if _, err := h.Link(testProject, testLink); err != nil {
			t.Error(err)
		}
	})
	within(t, "CreateNode", func() {
		if _, err := h.CreateNode(t.Context(), testProject, proto.NodeSpec{NodeID: testNodeC, NodeType: "vpcs", Name: "C"}); err != nil {
			t.Error(err)
		}
	})
	within(t, "ReserveTunnelPort", func() {
		if _, err := h.ReserveTunnelPort(testProject, "r1"); err != nil {
			t.Error(err)
		}
	})

	// A capture of the same file name waits for the close, and only it.
	started := make(chan error, 1)
	go func() {
		_, err := h.StartCapture(testProject, testLink, spec)
		started <- err
	}()
	select {
	case <-waiting:
	case err := <-started:
		t.Fatalf("a capture of the same name started while the file was being closed: %v", err)
	}
	within(t, "Capture", func() { h.Capture(testProject, testLink) })
	free()
	if st := <-stopped; st.Active || st.FileName != "slow.pcap" {
		t.Fatalf("stopped: %+v", st)
	}
	if err := <-started; err != nil {
		t.Fatalf("the capture of the same name, after the close: %v", err)
	}
	if st, _ := h.Capture(testProject, testLink); !st.Active {
		t.Fatalf("the new capture: %+v", st)
	}
}
