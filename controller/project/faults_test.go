package project

import (
	"errors"
	"strings"
	"testing"

	"github.com/labtap/labtap/capspec"
)

// capturingPair is a fixture with two started nodes on compute local, a
// link between them and a capture running on it.
func capturingPair(t *testing.T) (*fixture, Node, Node, Link) {
	t.Helper()
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	for _, n := range []Node{a, b} {
		if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, n.ID); err != nil {
			t.Fatal(err)
		}
	}
	l := f.link(t, a, b)
	l, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{})
	if err != nil || !l.Capture.Active {
		t.Fatalf("capture: %+v, %v", l.Capture, err)
	}
	return f, a, b, l
}

func (f *fixture) lastLinkEvent(t *testing.T) Link {
	t.Helper()
	f.events.mu.Lock()
	defer f.events.mu.Unlock()
	for i := len(f.events.events) - 1; i >= 0; i-- {
		if e := f.events.events[i]; e.Action == LinkUpdated {
			return *e.Link
		}
	}
	t.Fatal("no link.updated")
	return Link{}
}

// lastEvent returns the last event announced.
func (f *fixture) lastEvent(t *testing.T) Event {
	t.Helper()
	f.events.mu.Lock()
	defer f.events.mu.Unlock()
	if len(f.events.events) == 0 {
		t.Fatal("no event")
	}
	return f.events.events[len(f.events.events)-1]
}

func TestAStaleNodeReportDoesNotUndoALaterStart(t *testing.T) {
	f, a, _, l := capturingPair(t)
	before := len(f.events.actions())
	// The compute reported A stopped, but A runs (started again since):
	// what the compute says now wins, and nothing changes.
	f.svc.Reports.NodeChanged(t.Context(), "local", f.project.ID, a.ID, NodeRuntime{Status: Stopped})
	n, _ := f.svc.Nodes.Get(f.project.ID, a.ID)
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if n.Status != Started || !got.Capture.Active || len(f.events.actions()) != before {
		t.Fatalf("node %s, capture %+v, events %v", n.Status, got.Capture, f.events.actions()[before:])
	}
}

func TestANodeThatDiedStopsTheCapturesThatNeedIt(t *testing.T) {
	f, a, _, l := capturingPair(t)
	f.computes.mu.Lock()
	f.computes.nodes[a.ID] = Stopped // VPCS died
	f.computes.mu.Unlock()
	f.svc.Reports.NodeChanged(t.Context(), "local", f.project.ID, a.ID, NodeRuntime{Status: Stopped})
	n, _ := f.svc.Nodes.Get(f.project.ID, a.ID)
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if n.Status != Stopped || got.Capture.Active || got.Capture.FileName == "" {
		t.Fatalf("node %s, capture %+v", n.Status, got.Capture)
	}
}

func TestACaptureThatEndedByItselfIsReportedOnlyFromItsCompute(t *testing.T) {
	f, _, _, l := capturingPair(t)
	f.svc.Reports.CaptureEnded(t.Context(), "remote", f.project.ID, l.ID, capspec.State{Err: "not this one"})
	if got, _ := f.svc.Links.Get(f.project.ID, l.ID); !got.Capture.Active {
		t.Fatal("a report from another compute ended the capture")
	}
	f.svc.Reports.CaptureEnded(t.Context(), "local", f.project.ID, l.ID, capspec.State{Err: "no space left on device"})
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if got.Capture.Active || got.Capture.ComputeID != "" || got.Capture.FilePath == "" {
		t.Fatalf("after the capture ended: %+v", got.Capture)
	}
	if ev := f.lastLinkEvent(t); ev.Capture.Active {
		t.Fatalf("link.updated says %+v", ev.Capture)
	}
	// Then, in words, why: a GNS3 client shows it in its log pane.
	if ev := f.lastEvent(t); ev.Action != LogWarning || !strings.Contains(ev.Message, "no space left on device") || !strings.Contains(ev.Message, got.Capture.FileName) {
		t.Fatalf("last event %+v, want a log.warning naming the file and the reason", ev)
	}
}

func TestACaptureThatReachedItsLimitSaysWhyAtInfoAndKeepsItsCounts(t *testing.T) {
	f, _, _, l := capturingPair(t)
	final := capspec.State{FileName: l.Capture.FileName, FilePath: l.Capture.FilePath, Frames: 812, Bytes: 131000, Files: 1,
		Limit: "it reached capture_max_bytes (131072 bytes)"}
	f.svc.Reports.CaptureEnded(t.Context(), "local", f.project.ID, l.ID, final)
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if got.Capture.Active || got.Capture.Frames != 812 || got.Capture.Bytes != 131000 || got.Capture.Limit == "" {
		t.Fatalf("after the capture reached its limit: %+v", got.Capture)
	}
	if ev := f.lastLinkEvent(t); ev.Capture.Active {
		t.Fatalf("link.updated says %+v", ev.Capture)
	}
	if ev := f.lastEvent(t); ev.Action != LogInfo || !strings.Contains(ev.Message, "capture_max_bytes") || !strings.Contains(ev.Message, got.Capture.FileName) {
		t.Fatalf("last event %+v, want a log.info naming the file and the limit", ev)
	}
}

func TestALinkReadWithCountsShowsWhatItsCaptureWroteSoFar(t *testing.T) {
	f, _, _, l := capturingPair(t)
	if before, _ := f.svc.Links.Get(f.project.ID, l.ID); before.Capture.Frames != 0 {
		t.Fatalf("counts at start: %+v", before.Capture)
	}
	got, err := f.svc.Captures.LinkWithCounts(t.Context(), f.project.ID, l.ID)
	if err != nil || !got.Capture.Active || got.Capture.Frames != 7 {
		t.Fatalf("LinkWithCounts: %+v, %v", got.Capture, err)
	}
	if kept, _ := f.svc.Links.Get(f.project.ID, l.ID); kept.Capture.Frames != 7 {
		t.Fatalf("the counts were not kept: %+v", kept.Capture)
	}
}

func TestACaptureThatBeganItsNextFileShowsIt(t *testing.T) {
	f, _, _, l := capturingPair(t)
	f.svc.Reports.CaptureRotated(t.Context(), "local", f.project.ID, l.ID, capspec.State{Active: true, FileName: "x-00002.pcap", FilePath: "/captures/x-00002.pcap", Files: 2})
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if !got.Capture.Active || got.Capture.FileName != "x-00002.pcap" || got.Capture.Files != 2 {
		t.Fatalf("after the next file began: %+v", got.Capture)
	}
	if ev := f.lastLinkEvent(t); ev.Capture.FileName != "x-00002.pcap" {
		t.Fatalf("link.updated says %+v", ev.Capture)
	}
}

func TestACutOffComputeLosesItsCapturesAndTakesThemBackWhenItAnswers(t *testing.T) {
	f, _, _, l := capturingPair(t)
	path := l.Capture.FilePath
	f.svc.Reports.ComputeLost(t.Context(), "local")
	if got, _ := f.svc.Links.Get(f.project.ID, l.ID); got.Capture.Active {
		t.Fatal("the capture of a lost compute still shows")
	}
	if ev := f.lastLinkEvent(t); ev.Capture.Active {
		t.Fatalf("link.updated says %+v", ev.Capture)
	}
	if ev := f.lastEvent(t); ev.Action != LogWarning || !strings.Contains(ev.Message, "compute local cannot be reached") {
		t.Fatalf("last event %+v, want a log.warning saying the compute is lost", ev)
	}
	// It was cut off, not restarted: it still runs the relay and writes
	// the file.
	f.svc.Reports.ComputeBack(t.Context(), "local", []Running{{ComputeID: "local", ProjectID: f.project.ID, Links: []RunningLink{
		{ID: l.ID, Capture: &capspec.State{FilePath: path}},
	}}})
	got, _ := f.svc.Links.Get(f.project.ID, l.ID)
	if !got.Capture.Active || got.Capture.ComputeID != "local" || got.Capture.FilePath != path {
		t.Fatalf("after the compute came back: %+v", got.Capture)
	}
	if ev := f.lastLinkEvent(t); !ev.Capture.Active {
		t.Fatalf("link.updated says %+v", ev.Capture)
	}
	// A compute that restarted runs nothing: the capture stays over.
	f.svc.Reports.ComputeLost(t.Context(), "local")
	f.computes.mu.Lock()
	f.computes.nodes, f.computes.links = map[string]string{}, map[string]Wiring{} // forgotten, as by a restart
	f.computes.mu.Unlock()
	f.svc.Reports.ComputeBack(t.Context(), "local", nil)
	if got, _ := f.svc.Links.Get(f.project.ID, l.ID); got.Capture.Active {
		t.Fatalf("a restarted compute's capture came back: %+v", got.Capture)
	}
	f.computes.mu.Lock()
	_, ok := f.computes.links[l.ID]
	f.computes.mu.Unlock()
	if !ok {
		t.Fatal("the link was not set up again on the restarted compute")
	}
}

func TestANameARunningRingWritesIsAConflictWithoutReachingTheCompute(t *testing.T) {
	f := newFixture(t)
	a, b, c, d := f.node(t, "A"), f.node(t, "B"), f.node(t, "C"), f.node(t, "D")
	for _, n := range []Node{a, b, c, d} {
		if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, n.ID); err != nil {
			t.Fatal(err)
		}
	}
	ringLink, other := f.link(t, a, b), f.link(t, c, d)
	ring, err := f.svc.Captures.Start(t.Context(), f.project.ID, ringLink.ID, capspec.Spec{FileName: "ring.pcap", MaxBytes: capspec.MinMaxBytes, RingFiles: 3})
	if err != nil || !ring.Capture.Active {
		t.Fatalf("the ring: %+v, %v", ring.Capture, err)
	}
	for _, spec := range []capspec.Spec{
		{FileName: "ring.pcap"},       // the ring's own name
		{FileName: "ring-00001.pcap"}, // its first file
		{FileName: "ring-00042.pcap"}, // a file it will write
		{FileName: "ring-00002.pcap", RingFiles: 2, MaxBytes: capspec.MinMaxBytes}, // a ring named after one of its files
	} {
		_, err := f.svc.Captures.Start(t.Context(), f.project.ID, other.ID, spec)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), ringLink.ID) {
			t.Fatalf("capture named %s beside the running ring: %v, want a conflict naming link %s", spec.FileName, err, ringLink.ID)
		}
	}
	// Nothing reached the compute: only the ring's capture runs there.
	f.computes.mu.Lock()
	n := len(f.computes.captures)
	f.computes.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d captures on the compute, want the ring alone", n)
	}
	// A name the ring never writes is fine: ring-1.pcap is not ring-00001.
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, other.ID, capspec.Spec{FileName: "ring-1.pcap"}); err != nil {
		t.Fatal(err)
	}
}

func TestARingWhoseFilesWouldBeAnotherCapturesFileIsAConflict(t *testing.T) {
	f := newFixture(t)
	a, b, c, d := f.node(t, "A"), f.node(t, "B"), f.node(t, "C"), f.node(t, "D")
	for _, n := range []Node{a, b, c, d} {
		if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, n.ID); err != nil {
			t.Fatal(err)
		}
	}
	first, second := f.link(t, a, b), f.link(t, c, d)
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, first.ID, capspec.Spec{FileName: "cap-00003.pcap"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Captures.Start(t.Context(), f.project.ID, second.ID, capspec.Spec{FileName: "cap.pcap", MaxBytes: capspec.MinMaxBytes, RingFiles: 5})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a ring whose third file is a running capture's: %v", err)
	}
}
