package host

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// hold returns a hook that blocks its first caller until the test releases
// it (or ends), and a channel closed once it is entered.
func hold(t *testing.T) (hook func(), entered <-chan struct{}, release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	var once, freeOnce sync.Once
	release = func() { freeOnce.Do(func() { close(out) }) }
	t.Cleanup(release) // registered after the host's Close: runs before it
	return func() { once.Do(func() { close(in); <-out }) }, in, release
}

// otherCallsGoOn checks that calls needing the agent's state, on the open
// test project and its link, are not blocked.
func otherCallsGoOn(t *testing.T, h *Host, why string) {
	t.Helper()
	within(t, "State "+why, func() { h.State() })
	within(t, "Metrics "+why, func() { h.Metrics() })
	within(t, "Link "+why, func() {
		if _, err := h.Link(testProject, testLink); err != nil {
			t.Error(err)
		}
	})
	within(t, "Capture "+why, func() {
		if _, err := h.Captures.State(testProject, testLink); err != nil {
			t.Error(err)
		}
	})
	within(t, "CreateNode "+why, func() {
		if _, err := h.CreateNode(t.Context(), testProject, proto.NodeSpec{NodeID: testNodeC, NodeType: "vpcs", Name: "C"}); err != nil {
			t.Error(err)
		}
	})
	within(t, "ReserveTunnelPort "+why, func() {
		if _, err := h.ReserveTunnelPort(testProject, "r1"); err != nil {
			t.Error(err)
		}
	})
}

func TestASlowRepairOfAnOpeningProjectBlocksNoOtherAgentCall(t *testing.T) {
	h := linkedHost(t)
	const other = "22222222-1b2d-4c6e-8a9f-0123456789ab"
	// A capture the agent died writing, in another project.
	dir := filepath.Join(h.cfg.DataDir, "projects", other, "project-files", "captures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "crash.pcap")
	header := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	if err := os.WriteFile(name, append(header, 1, 2, 3), 0o644); err != nil { // a torn record
		t.Fatal(err)
	}
	if err := os.WriteFile(name+".writing", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The disk is slow: the repair waits for the test.
	hook, entered, release := hold(t)
	h.hooks.repairing = hook
	opened := make(chan error, 1)
	go func() { opened <- h.OpenProject(proto.ProjectSpec{ProjectID: other, Name: "other"}) }()
	<-entered

	otherCallsGoOn(t, h, "while a project is repaired")

	release()
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(name); err != nil || info.Size() != int64(len(header)) {
		t.Fatalf("the torn record was not cut: %v, %v", info, err)
	}
	if _, err := os.Stat(name + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("the mark of the repaired capture: %v", err)
	}
}

// startNamingHeld starts a capture of the test link whose naming (the
// read of the captures folder: a slow disk) waits for release; it returns
// once the naming is held, with the channel Captures.Start's error comes on.
func startNamingHeld(t *testing.T, h *Host, file string) (started <-chan error, release func()) {
	t.Helper()
	hook, entered, release := hold(t)
	h.hooks.naming = hook
	done := make(chan error, 1)
	go func() {
		_, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: file})
		done <- err
	}()
	<-entered
	return done, release
}

func TestASlowCaptureNamingBlocksNoOtherAgentCall(t *testing.T) {
	h := linkedHost(t)
	started, release := startNamingHeld(t, h, "slow.pcap")

	otherCallsGoOn(t, h, "while a capture is named")

	release()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if st, err := h.Captures.State(testProject, testLink); err != nil || !st.Active || st.FileName != "slow.pcap" {
		t.Fatalf("the capture: %+v, %v", st, err)
	}
}

func TestACaptureStartRacingALinkDeleteLeavesNoCapture(t *testing.T) {
	h := linkedHost(t)
	started, release := startNamingHeld(t, h, "gone.pcap")
	within(t, "DeleteLink while a capture of the link is named", func() {
		if err := h.DeleteLink(testProject, testLink); err != nil {
			t.Error(err)
		}
	})
	release()
	if err := <-started; err == nil {
		t.Fatal("a capture started on a link deleted while it was named")
	}
	if st := h.State(); len(st.Projects) != 1 || len(st.Projects[0].Links) != 0 {
		t.Fatalf("state after the delete: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DataDir, "projects", testProject, "project-files", "captures", "gone.pcap")); !os.IsNotExist(err) {
		t.Fatalf("a file was made for the capture of a deleted link: %v", err)
	}
}

// slowStart is a node whose start waits for its hook: a VM or a container
// that takes seconds to boot.
type slowStart struct {
	*node.Fake
	starting func()
}

func (s slowStart) Start(ctx context.Context) error {
	s.starting()
	return s.Fake.Start(ctx)
}

func TestASlowNodeStartBlocksNoCallOnTheRestOfItsProject(t *testing.T) {
	h := linkedHost(t)
	hook, entered, release := hold(t)
	h.runners["slow"] = func(ctx context.Context, env RunnerEnv) (node.Runner, error) {
		return slowStart{Fake: node.NewFake(env.Agent, env.OnStop), starting: hook}, nil
	}
	const slow, link = "dddddddd-1b2d-4c6e-8a9f-0123456789ab", "22222222-1b2d-4c6e-8a9f-0123456789ab"
	if _, err := h.CreateNode(t.Context(), testProject, proto.NodeSpec{NodeID: slow, NodeType: "slow", Name: "D"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := h.SetNodeStatus(t.Context(), testProject, slow, proto.StatusStarted)
		started <- err
	}()
	<-entered

	otherCallsGoOn(t, h, "while a node starts")
	within(t, "PutLink to the starting node while it starts", func() {
		if err := h.PutLink(testProject, proto.LinkSpec{LinkID: link, A: proto.Endpoint{NodeID: testNodeC}, B: proto.Endpoint{NodeID: slow}}); err != nil {
			t.Error(err)
		}
	})
	within(t, "Node while it starts", func() {
		if st, err := h.Node(testProject, slow); err != nil || st.Status != proto.StatusStopped {
			t.Errorf("the starting node: %+v, %v", st, err)
		}
	})
	within(t, "SetNodeStatus of another node while one starts", func() {
		if _, err := h.SetNodeStatus(t.Context(), testProject, testNodeA, proto.StatusStopped); err != nil {
			t.Error(err)
		}
	})

	release()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if st, err := h.Node(testProject, slow); err != nil || st.Status != proto.StatusStarted {
		t.Fatalf("the node once started: %+v, %v", st, err)
	}
}

func TestAHostNameLookupForANewTunnelBlocksNoOtherAgentCall(t *testing.T) {
	h := linkedHost(t)
	if _, err := h.CreateNode(t.Context(), testProject, proto.NodeSpec{NodeID: testNodeC, NodeType: "vpcs", Name: "C"}); err != nil {
		t.Fatal(err)
	}
	// The name server is slow: the lookup waits for the test.
	hook, entered, release := hold(t)
	h.hooks.resolving = hook
	const link = "22222222-1b2d-4c6e-8a9f-0123456789ab"
	put := make(chan error, 1)
	go func() {
		put <- h.PutLink(testProject, proto.LinkSpec{LinkID: link, A: proto.Endpoint{NodeID: testNodeC},
			B: proto.Endpoint{Tunnel: &proto.Tunnel{RemoteHost: "localhost", RemotePort: 9}}})
	}()
	<-entered

	otherCallsGoOn(t, h, "while a tunnel's host is looked up")

	release()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if _, err := h.Link(testProject, link); err != nil {
		t.Fatalf("the tunnel's link: %v", err)
	}
}
