package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/cli"
	"github.com/labtap/labtap/internal/testenv"
)

// TestDocsWalkthroughsRunAsWritten runs every walkthrough of README.md and
// docs/*.md (the sh blocks marked <!-- walkthrough: NAME -->, see
// cli.Walkthroughs) as one bash script, against a controller of its own on
// an ephemeral port (LABTAP_URL, which the walkthroughs read; its data
// directory is LABTAP_DATA_DIR; with needs=users it has users, its super
// admin's LABTAP_USER and LABTAP_PASSWORD given to the script), from the
// repository's root: twice, since a walkthrough a reader runs again must
// not trip over what its first run made. A step that fails ends the script
// (they set -euo pipefail), and the test shows what it printed.
func TestDocsWalkthroughsRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the docs' walkthroughs against a real controller")
	}
	testenv.RequireTools(t, "bash", "curl", "jq", "vpcs", "capinfos")
	docs, _ := filepath.Glob("../docs/*.md")
	docs = append([]string{"../README.md"}, docs...)
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := cli.Walkthroughs(string(data))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		for _, w := range ws {
			t.Run(filepath.Base(doc)+"/"+w.Name, func(t *testing.T) {
				var env []string
				if slices.Contains(w.Needs, "docker") {
					testenv.Docker(t, frrImage)
					env = dockerInit(t)
				}
				if slices.Contains(w.Needs, "qemu") {
					tinyGuest(t)
				}
				var args, scriptEnv []string
				if slices.Contains(w.Needs, "users") {
					// A server with users: its super admin is admin, whose
					// password the script reads as the operator would.
					env = append(env, "LABTAP_PASSWORD=walkthrough-admin")
					args = append(args, "--user", "admin")
					scriptEnv = append(scriptEnv, "LABTAP_USER=admin", "LABTAP_PASSWORD=walkthrough-admin")
				}
				data := t.TempDir()
				c := startControllerWith(t, data, env, args...)
				for run := 1; run <= 2; run++ {
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
					cmd := exec.CommandContext(ctx, "bash", "-c", w.Script)
					cmd.Dir = ".."
					cmd.Env = append(append(os.Environ(), "LABTAP_URL="+c.url, "LABTAP_DATA_DIR="+data), scriptEnv...)
					start := time.Now()
					out, err := cmd.CombinedOutput()
					cancel()
					if err != nil {
						t.Fatalf("run %d of walkthrough %s of %s: %v after %v; it printed:\n%s\nthe script:\n%s", run, w.Name, doc, err, time.Since(start).Round(time.Millisecond), out, w.Script)
					}
					t.Logf("run %d: %v", run, time.Since(start).Round(time.Millisecond))
				}
			})
		}
	}
}
