package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// TestCrossAgentLinkCarriesAndCapturesEveryFrame builds the xagent
// topology with two real agents (cloud on A, a link across the agents
// through a UDP tunnel on 127.0.0.1, cloud on B) and sends a few frames at
// a rate low enough for any machine: every frame reaches the sink through
// both agents' halves of the link, and with capture on, A's capture holds
// each of them byte for byte. Speed is the bench's business, not this test's.
func TestCrossAgentLinkCarriesAndCapturesEveryFrame(t *testing.T) {
	testenv.Long(t, "builds and runs two agents")
	agent := filepath.Join(t.TempDir(), "agent")
	if out, err := exec.Command("go", "build", "-o", agent, "../agent").CombinedOutput(); err != nil {
		t.Fatalf("go build agent: %v\n%s", err, out)
	}
	runtime.GOMAXPROCS(max(4, runtime.NumCPU())) // the generator and the sink hold a thread each, as in run

	b, err := newBench(config{agent: agent, topology: "xagent", reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if b.peer == nil {
		t.Fatal("the xagent topology started one agent")
	}
	total := 0
	for _, capture := range []bool{false, true} {
		r := b.one(spec{name: "tiny", size: 64, relay: true, capture: capture, rate: 2000, duration: 300 * time.Millisecond})
		if r.err != nil {
			t.Fatalf("capture %v: %v", capture, r.err)
		}
		total += r.sent
		if r.sent == 0 || r.received != r.sent {
			t.Errorf("capture %v: the sink received %d of %d frames", capture, r.received, r.sent)
		}
		if r.forwarded != int64(r.sent) {
			t.Errorf("capture %v: agent A's half forwarded %d of %d frames", capture, r.forwarded, r.sent)
		}
		if capture && (r.capture == nil || !r.capture.complete()) {
			t.Errorf("capture on: %s", r.captureSummary())
		}
	}
	// The frames crossed to the second agent: its half of the link,
	// tunnel to cloud 2, forwarded each of them.
	st, ok := b.peer.linkState(b.project, b.link)
	if !ok {
		t.Fatal("agent B has no half of the link")
	}
	if got := st.Directions[0].Forwarded; got != uint64(total) {
		t.Errorf("agent B's half forwarded %d frames, want %d", got, total)
	}
	if len(b.relayIn) != 2 || st.Ends[0].LocalPort != b.relayIn[1] {
		t.Errorf("agent B's half receives on port %d, want its reserved tunnel port (relay ports %v)", st.Ends[0].LocalPort, b.relayIn)
	}
}
