// The testprogress command reads `go test -json` on its standard input and
// prints what a person watching a long run needs: a line per package as it
// finishes (and per test that took a while, so a slow package is not
// silent), the whole output of every failed test, and at the end every
// skipped test with the reason it gave. It exits 1 if anything failed or
// the input held no result. scripts/test runs the tests through it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// slowTest is how long a test runs before it earns a progress line.
const slowTest = 5 * time.Second

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type skip struct{ pkg, test, why string }

type pkgState struct {
	tests, skipped, failed int
	output                 map[string][]string // per test, until it ends
}

func main() {
	ok, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// report reads events from r and writes the progress to w; ok is false if
// a test or package failed or no package ended.
func report(r io.Reader, w io.Writer) (ok bool, err error) {
	pkgs := map[string]*pkgState{}
	var skips []skip
	var failed []string
	ended := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // build errors and the like come as plain text
			continue
		}
		p := pkgs[e.Package]
		if p == nil {
			p = &pkgState{output: map[string][]string{}}
			pkgs[e.Package] = p
		}
		switch e.Action {
		case "output":
			p.output[e.Test] = append(p.output[e.Test], e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				ended++
				status := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "none"}[e.Action]
				if e.Action == "fail" {
					failed = append(failed, e.Package)
					if p.tests == 0 { // a build failure or a crash outside tests
						fmt.Fprint(w, strings.Join(p.output[""], ""))
					}
				}
				fmt.Fprintf(w, "%s %-50s %6.1fs  %d tests, %d skipped, %d failed\n", status, e.Package, e.Elapsed, p.tests, p.skipped, p.failed)
				continue
			}
			if strings.Contains(e.Test, "/") { // subtests are reported with their parent
				if e.Action == "fail" {
					delete(p.output, e.Test) // kept in the parent's output
				}
				continue
			}
			p.tests++
			out := p.output[e.Test]
			delete(p.output, e.Test)
			switch e.Action {
			case "skip":
				p.skipped++
				skips = append(skips, skip{e.Package, e.Test, skipReason(out)})
			case "fail":
				p.failed++
				failed = append(failed, e.Package+" "+e.Test)
				fmt.Fprintf(w, "--- FAIL %s %s (%.1fs)\n%s", e.Package, e.Test, e.Elapsed, strings.Join(out, ""))
			case "pass":
				if time.Duration(e.Elapsed*float64(time.Second)) >= slowTest {
					fmt.Fprintf(w, "     %s %s %.1fs\n", e.Package, e.Test, e.Elapsed)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if len(skips) > 0 {
		fmt.Fprintf(w, "\n%d tests skipped:\n", len(skips))
		slices.SortFunc(skips, func(a, b skip) int { return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test) })
		for _, s := range skips {
			fmt.Fprintf(w, "  %s %s: %s\n", s.pkg, s.test, s.why)
		}
	}
	// The totals, as the plain closing line CI reads ("N passed, N failed").
	var tests, skipped, failedTests int
	for _, p := range pkgs {
		tests, skipped, failedTests = tests+p.tests, skipped+p.skipped, failedTests+p.failed
	}
	defer fmt.Fprintf(w, "\ntests: %d passed, %d failed, %d skipped\n", tests-skipped-failedTests, failedTests, skipped)
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFAILED:\n  %s\n", strings.Join(failed, "\n  "))
		return false, nil
	}
	return ended > 0, nil
}

// skipReason finds what a skipped test said: the output lines between its
// "=== RUN" and "--- SKIP" lines.
func skipReason(out []string) string {
	var why []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		// "file_test.go:12: reason"
		if i := strings.Index(t, ".go:"); i >= 0 {
			if j := strings.Index(t[i:], ": "); j >= 0 {
				t = t[i+j+2:]
			}
		}
		why = append(why, t)
	}
	if len(why) == 0 {
		return "(no reason given)"
	}
	return strings.Join(why, " ")
}
