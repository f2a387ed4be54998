package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// steadyRun is an on-1500-steady run at 100k frames/s for 5 s whose
// generator sent sent frames, every one delivered and captured.
func steadyRun(sent int, p pause) result {
	r := result{spec: spec{name: "on-1500-steady", size: 1500, relay: true, capture: true, rate: 100_000, duration: 5 * time.Second},
		sent: sent, received: sent, rate: 100_781, emitted: int64(sent), forwarded: int64(sent), due: 500_000, pause: p}
	r.capture = &captureCheck{records: sent, agentFrames: uint64(sent)}
	return r
}

// The run the hub bench printed as "100781 frames/s loss 0.00% ... capture
// complete (112416 records)": its generator paused 3.9 s and the run ended
// on time. Its capture holds every frame the link carried, but the run is
// not the steady 5 s it was asked to be: the bench says so in its line,
// and the steady goal is not met by it. A run that sent its 499,9xx
// frames is met as before.
func TestASteadyRunCutShortIsNotCalledMet(t *testing.T) {
	p := pause{at: 1115 * time.Millisecond, length: 3885 * time.Millisecond, waited: 3800 * time.Millisecond}
	short, whole := steadyRun(112_416, p), steadyRun(499_990, pause{length: 80 * time.Microsecond})

	if !short.cutShort() || whole.cutShort() {
		t.Fatalf("cutShort: 112416 of 500000 sent %v, 499990 sent %v", short.cutShort(), whole.cutShort())
	}
	if line := short.shortSummary(); !strings.Contains(line, "RUN CUT SHORT") || !strings.Contains(line, "112416 of the 500000") || !strings.Contains(line, "3.885s at 1.115s") {
		t.Errorf("the short run's line says %q", line)
	}
	if line := whole.shortSummary(); line != "" {
		t.Errorf("the whole run's line says %q", line)
	}

	verdict := func(rs ...result) string {
		var w bytes.Buffer
		goals(&w, map[string][]result{"on-1500-steady": rs}, func(a, b string) []float64 { return nil }, func(result) bool { return true })
		return w.String()
	}
	if v := verdict(whole, whole); !strings.Contains(v, "MET ") || strings.Contains(v, "NOT MET") {
		t.Errorf("two whole runs: %s", v)
	}
	if v := verdict(whole, short); !strings.Contains(v, "NOT MET") || !strings.Contains(v, "1 runs CUT SHORT") {
		t.Errorf("a whole and a short run: %s", v)
	}
}

// Missing frames are told as gaps of consecutive sequence numbers, with
// the time into the run they were sent: a queue that filled while the
// capture's writer waited at the start is one gap early on.
func TestCaptureGapsSayWhereFramesAreMissing(t *testing.T) {
	s := &sent{sends: []sendRec{{0, 1000}, {100, 1000 + uint64(time.Millisecond)}, {200, 1000 + uint64(2*time.Millisecond)}}}
	var g gaps
	for _, seq := range []int{5, 120, 121, 122, 123, 250} {
		g.add(seq, s)
	}
	if g.n != 3 || g.first != (gap{lo: 5, hi: 5}) || g.longest != (gap{lo: 120, hi: 123, at: time.Millisecond}) {
		t.Fatalf("gaps %+v", g)
	}
	if got, want := g.String(), "missing in 3 gaps: first 1 frames from seq 5, sent 0s-0s into the run; longest 4 frames from seq 120, sent 1ms-1ms into the run"; got != want {
		t.Errorf("gaps say %q, want %q", got, want)
	}
	var one gaps // gaps of one frame each: the longest is one of them
	one.add(7, s)
	one.add(9, s)
	if one.longest != (gap{lo: 7, hi: 7}) {
		t.Errorf("gaps of one frame each: longest %+v", one.longest)
	}
}

// A capture that dropped frames says whether the agent's pool refused
// memory meanwhile: none refused, its own queue was full.
func TestIncompleteCaptureSaysWhetherThePoolRefused(t *testing.T) {
	r := result{capture: &captureCheck{records: 10, agentFrames: 10, dropped: 5, missing: 5, poolRefused: 0}}
	if got := r.captureSummary(); !strings.Contains(got, "CAPTURE INCOMPLETE") || !strings.Contains(got, "pool refused 0 blocks") {
		t.Errorf("summary %q", got)
	}
	r.capture.poolRefused = -1 // unknown: not said
	if got := r.captureSummary(); strings.Contains(got, "pool refused") {
		t.Errorf("summary with the pool unknown %q", got)
	}
}
