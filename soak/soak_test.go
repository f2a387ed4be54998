package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// TestSoakSmoke is a one-minute soak (scripts/soak runs the long one):
// ten VPCS, the agent killed three times and the controller once, every
// check of the full run.
func TestSoakSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller and an agent for a minute")
	}
	testenv.RequireTools(t, "vpcs", "capinfos")
	bin := t.TempDir()
	for _, pkg := range []string{"../controller", "../agent"} {
		if out, err := exec.Command("go", "build", "-o", bin+"/", pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	s, err := newSoak(config{
		controller: filepath.Join(bin, "controller"), agent: filepath.Join(bin, "agent"),
		duration: time.Minute, nodes: 10, workers: 8, agentEvery: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.cleanup()
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
}
