package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
)

// TestItReportsARealRunsPackagesFailuresAndSkips runs go test -json on a
// small module made for the test, with a test that passes, one that
// fails and one that skips, and reads the report.
func TestItReportsARealRunsPackagesFailuresAndSkips(t *testing.T) {
	testenv.Long(t, "runs go test on a module of its own")
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"a/a_test.go": `package a
import "testing"
func TestPasses(t *testing.T) {}
func TestFails(t *testing.T) { t.Log("what went wrong"); t.Fail() }
func TestSkips(t *testing.T) { t.Skip("needs a thing it lacks") }
`,
		"b/b_test.go": "package b\nimport \"testing\"\nfunc TestB(t *testing.T) {}\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, _ := cmd.Output() // fails: one test fails
	var got strings.Builder
	ok, err := report(strings.NewReader(string(out)), &got)
	if err != nil {
		t.Fatal(err)
	}
	text := got.String()
	if ok {
		t.Errorf("a run with a failed test reported ok:\n%s", text)
	}
	for _, want := range []string{
		"FAIL example.com/m/a", "3 tests, 1 skipped, 1 failed",
		"ok   example.com/m/b", "--- FAIL example.com/m/a TestFails", "what went wrong",
		"1 tests skipped:", "example.com/m/a TestSkips: needs a thing it lacks",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
}
