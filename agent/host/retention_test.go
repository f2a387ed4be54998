package host

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/proto"
)

// lockedBuffer is a log destination the test reads while the agent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTheCaptureDiskBudgetRemovesTheOldestStoppedFilesFirstNeverARunningOne:
// two stopped captures and a running one over the budget: the oldest
// stopped file goes first (logged, counted), then the next; the running
// one stays however large, and once running ones alone hold the budget a
// new capture is refused with a 409 that says why.
func TestTheCaptureDiskBudgetRemovesTheOldestStoppedFilesFirstNeverARunningOne(t *testing.T) {
	h, fakes := linkedFakes(t)
	var logs lockedBuffer
	h.Captures.log = slog.New(slog.NewTextHandler(&logs, nil))
	dir := filepath.Join(h.cfg.DataDir, "projects", testProject, "project-files", "captures")
	capture := func(name string, frames int) {
		t.Helper()
		if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: name}); err != nil {
			t.Fatal(err)
		}
		send(t, fakes, frames, 100)
		waitCaptured(t, h, uint64(frames))
	}
	stop := func() {
		t.Helper()
		if _, err := h.Captures.Stop(testProject, testLink); err != nil {
			t.Fatal(err)
		}
	}
	capture("old.pcap", 10) // 24 + 10*116 = 1,184 bytes each
	stop()
	capture("newer.pcap", 10)
	stop()
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "old.pcap"), past, past)
	os.Chtimes(filepath.Join(dir, "newer.pcap"), past.Add(time.Minute), past.Add(time.Minute))
	h.Captures.retention.budget = 3000
	capture("running.pcap", 10)
	// 3,552 bytes over 3,000: the oldest stopped file goes, and only it.
	h.Captures.enforceBudget()
	if names := fileNames(t, dir); strings.Join(names, " ") != "newer.pcap running.pcap" {
		t.Fatalf("after the first sweep the folder holds %v, want newer.pcap and running.pcap", names)
	}
	if r := h.Captures.Retention(); r.FilesRemoved != 1 || r.BytesRemoved != 1184 {
		t.Fatalf("counted %+v, want one file of 1,184 bytes", r)
	}
	if !strings.Contains(logs.String(), "capture file removed") || !strings.Contains(logs.String(), "file=old.pcap") {
		t.Fatalf("no log line says old.pcap was removed:\n%s", logs.String())
	}
	// The running capture grows past the budget on its own: the stopped
	// file goes, the running one stays, and a new capture is refused.
	send(t, fakes, 30, 100)
	waitCaptured(t, h, 40)
	err := h.Captures.admit(testProject, 0)
	if !isCode(err, proto.CodeConflict) || !strings.Contains(err.Error(), "running captures alone") {
		t.Fatalf("a new capture while running ones hold the budget: %v, want a conflict saying why", err)
	}
	if names := fileNames(t, dir); strings.Join(names, " ") != "running.pcap" {
		t.Fatalf("the folder holds %v, want running.pcap alone", names)
	}
	// Stopped, it is the oldest stopped file like any other: the next
	// capture makes room by removing it.
	stop()
	if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "next.pcap"}); err != nil {
		t.Fatalf("a capture once the running one stopped: %v", err)
	}
	if names := fileNames(t, dir); strings.Join(names, " ") != "next.pcap" {
		t.Fatalf("the folder holds %v, want next.pcap alone", names)
	}
}

// TestAProjectsCaptureDiskBudgetRemovesItsOwnOldestStoppedFilesOnly: a
// project's budget (capture_disk_budget, sent with the capture's start)
// removes that project's oldest stopped files, never another project's
// (older though they are) nor a running file, and refuses a capture with
// a 409 once the project's running captures alone hold it.
func TestAProjectsCaptureDiskBudgetRemovesItsOwnOldestStoppedFilesOnly(t *testing.T) {
	h, fakes := linkedFakes(t)
	var logs lockedBuffer
	h.Captures.log = slog.New(slog.NewTextHandler(&logs, nil))
	dir := filepath.Join(h.cfg.DataDir, "projects", testProject, "project-files", "captures")
	const other = "9a1b2c3d-4e5f-4a6b-8c7d-0123456789ab"
	otherDir := filepath.Join(h.cfg.DataDir, "projects", other, "project-files", "captures")
	if err := os.MkdirAll(otherDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Another project's file, older than all and large: no budget of its
	// project's, and the agent has none.
	if err := os.WriteFile(filepath.Join(otherDir, "theirs.pcap"), make([]byte, 50000), 0o644); err != nil {
		t.Fatal(err)
	}
	oldest := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(otherDir, "theirs.pcap"), oldest, oldest)
	capture := func(name string, frames int, budget int64) {
		t.Helper()
		if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: name, ProjectBudget: budget}); err != nil {
			t.Fatal(err)
		}
		send(t, fakes, frames, 100)
		waitCaptured(t, h, uint64(frames))
	}
	stop := func() {
		t.Helper()
		if _, err := h.Captures.Stop(testProject, testLink); err != nil {
			t.Fatal(err)
		}
	}
	capture("old.pcap", 10, 0) // 1,184 bytes each
	stop()
	capture("newer.pcap", 10, 0)
	stop()
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "old.pcap"), past, past)
	os.Chtimes(filepath.Join(dir, "newer.pcap"), past.Add(time.Minute), past.Add(time.Minute))
	capture("running.pcap", 10, 3000)
	// 3,552 bytes over the project's 3,000: its oldest stopped file goes,
	// and only it; the other project's stays.
	h.Captures.enforceBudget()
	if names := fileNames(t, dir); strings.Join(names, " ") != "newer.pcap running.pcap" {
		t.Fatalf("after the first sweep the folder holds %v, want newer.pcap and running.pcap", names)
	}
	if names := fileNames(t, otherDir); strings.Join(names, " ") != "theirs.pcap" {
		t.Fatalf("the other project's folder holds %v, want theirs.pcap untouched", names)
	}
	if !strings.Contains(logs.String(), "file=old.pcap") || !strings.Contains(logs.String(), "budget_of=project") {
		t.Fatalf("no log line says old.pcap was removed for the project's budget:\n%s", logs.String())
	}
	// The running capture grows past the budget on its own: the stopped
	// file goes, the running one stays, and a new capture is refused.
	send(t, fakes, 30, 100)
	waitCaptured(t, h, 40)
	err := h.Captures.admit(testProject, 3000)
	if !isCode(err, proto.CodeConflict) || !strings.Contains(err.Error(), "capture_disk_budget") {
		t.Fatalf("a new capture while the project's running ones hold its budget: %v, want a conflict saying why", err)
	}
	if names := fileNames(t, dir); strings.Join(names, " ") != "running.pcap" {
		t.Fatalf("the folder holds %v, want running.pcap alone", names)
	}
	if names := fileNames(t, otherDir); strings.Join(names, " ") != "theirs.pcap" {
		t.Fatalf("the other project's folder holds %v, want theirs.pcap untouched", names)
	}
}

// fileNames lists a captures folder's capture files (not their notes or
// marks).
func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if isCaptureFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}
