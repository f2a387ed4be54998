package host

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"

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
func linkedHost(t testing.TB) *Host {
	h, _ := linkedFakes(t)
	return h
}

// linkedFakes is linkedHost, with its fake nodes by id.
func linkedFakes(t testing.TB) (*Host, map[string]*node.Fake) {
	t.Helper()
	var mu sync.Mutex
	fakes := map[string]*node.Fake{}
	h := New(Config{DataDir: t.TempDir(), Runners: map[string]RunnerFactory{
		"vpcs": func(ctx context.Context, env RunnerEnv) (node.Runner, error) {
			f := node.NewFake(env.Agent, env.OnStop)
			mu.Lock()
			fakes[env.Spec.NodeID] = f
			mu.Unlock()
			return f, nil
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
	mu.Lock()
	defer mu.Unlock()
	return h, fakes
}

// send sends n frames of size bytes from A to B and waits for each.
func send(t *testing.T, fakes map[string]*node.Fake, n, size int) {
	t.Helper()
	for i := range n {
		sendFrom(t, fakes, i, size)
	}
}

// sendFrom sends frame i, size bytes, from A to B.
func sendFrom(t *testing.T, fakes map[string]*node.Fake, i, size int) {
	t.Helper()
	frame := make([]byte, size)
	binary.BigEndian.PutUint32(frame[14:], uint32(i))
	if err := fakes[testNodeA].Send(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := fakes[testNodeB].Recv(10 * time.Second); err != nil {
		t.Fatalf("frame %d did not cross the link: %v", i, err)
	}
}

// nextEvent waits for the next event of kind.
func nextEvent(t *testing.T, events <-chan proto.Event, kind string) proto.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event", kind)
		}
	}
}

func TestACaptureStopsAtItsLimitAndSaysWhy(t *testing.T) {
	h, fakes := linkedFakes(t)
	events, cancel := h.Events.Subscribe()
	defer cancel()
	st, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "limit.pcap", MaxBytes: capspec.MinMaxBytes})
	if err != nil {
		t.Fatal(err)
	}
	send(t, fakes, 200, 1000) // 200 kB through a 128 KiB capture
	ev := nextEvent(t, events, proto.EventCaptureEnded)
	if ev.LinkID != testLink || ev.Capture == nil || ev.Capture.Active || !strings.Contains(ev.Capture.Limit, "capture_max_bytes") || ev.Capture.Err != "" {
		t.Fatalf("capture.ended %+v", ev.Capture)
	}
	info, err := os.Stat(st.FilePath)
	if err != nil || info.Size() > capspec.MinMaxBytes || info.Size() < capspec.MinMaxBytes-1100 {
		t.Fatalf("the file: %v, %v", info, err)
	}
	if now, _ := h.Captures.State(testProject, testLink); now.Active || now.Frames != ev.Capture.Frames || now.Frames == 0 {
		t.Fatalf("the capture after its limit: %+v", now)
	}
}

func TestARingCaptureAnnouncesEachFileAndKeepsTheNewest(t *testing.T) {
	h, fakes := linkedFakes(t)
	// The second file is slow to make (a loaded machine, a slow disk): the
	// first one fills meanwhile and frames are dropped, counted. The ring
	// goes on once it is made.
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	h.hooks.creating = func(name string) {
		if name == "ring-00002.pcap" {
			<-release
		}
	}
	events, cancel := h.Events.Subscribe()
	defer cancel()
	st, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "ring.pcap", MaxBytes: capspec.MinMaxBytes, RingFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.FileName != "ring-00001.pcap" {
		t.Fatalf("first file %s", st.FileName)
	}
	sent := 0
	sendOne := func() { sendFrom(t, fakes, sent, 1000); sent++ }
	for range 200 { // 200 kB: the first file fills, then frames find no file
		sendOne()
	}
	free()
	// Frames keep coming until the fourth file begins: how many the ring
	// dropped depends on the machine's load.
	for {
		cs, err := h.Captures.State(testProject, testLink)
		if err != nil {
			t.Fatal(err)
		}
		if cs.Files >= 4 {
			break
		}
		if sent == 2000 { // 2 MB: 15 files' worth
			t.Fatalf("%d frames sent, %d files begun", sent, cs.Files)
		}
		sendOne()
	}
	// Each new file is announced, as the capture is when the event goes
	// out (two files may begin between two events: the later one is said).
	for last := "ring-00001.pcap"; last != "ring-00004.pcap"; {
		ev := nextEvent(t, events, proto.EventCaptureRotated)
		if ev.Capture.FileName <= last || !ev.Capture.Active {
			t.Fatalf("capture.rotated %+v after %s", ev.Capture, last)
		}
		last = ev.Capture.FileName
	}
	final, err := h.Captures.Stop(testProject, testLink)
	if err != nil {
		t.Fatal(err)
	}
	if final.Frames+final.Dropped != uint64(sent) || final.Dropped == 0 || final.Files != 4 || final.FileName != "ring-00004.pcap" {
		t.Fatalf("final state %+v, %d frames sent", final, sent)
	}
	entries, _ := os.ReadDir(filepath.Dir(st.FilePath))
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") { // the files' notes (capturefiles.go)
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{"ring-00003.pcap", "ring-00004.pcap"}) {
		t.Fatalf("files left %v, want the newest two and no mark", names)
	}
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
		t.Fatalf("%s was blocked", what)
	}
}

func TestASlowCaptureCloseBlocksNoOtherAgentCall(t *testing.T) {
	h := linkedHost(t)
	spec := proto.CaptureSpec{FileName: "slow.pcap"}
	if _, err := h.Captures.Start(testProject, testLink, spec); err != nil {
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
		st, err := h.Captures.Stop(testProject, testLink)
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
		_, err := h.Captures.Start(testProject, testLink, spec)
		started <- err
	}()
	select {
	case <-waiting:
	case err := <-started:
		t.Fatalf("a capture of the same name started while the file was being closed: %v", err)
	}
	within(t, "Capture", func() { h.Captures.State(testProject, testLink) })
	free()
	if st := <-stopped; st.Active || st.FileName != "slow.pcap" {
		t.Fatalf("stopped: %+v", st)
	}
	if err := <-started; err != nil {
		t.Fatalf("the capture of the same name, after the close: %v", err)
	}
	if st, _ := h.Captures.State(testProject, testLink); !st.Active || st.FileName != "slow-2.pcap" {
		t.Fatalf("the new capture, which may not overwrite slow.pcap: %+v", st)
	}
}

func TestACaptureNeverOverwritesAnotherCapturesFiles(t *testing.T) {
	h, fakes := linkedFakes(t)
	capture := func(spec proto.CaptureSpec, want string) proto.CaptureState {
		t.Helper()
		st, err := h.Captures.Start(testProject, testLink, spec)
		if err != nil {
			t.Fatal(err)
		}
		if st.FileName != want {
			t.Fatalf("capture of %s writes %s, want %s", spec.FileName, st.FileName, want)
		}
		send(t, fakes, 3, 100)
		if st, err = h.Captures.Stop(testProject, testLink); err != nil || st.Frames != 3 {
			t.Fatalf("stop: %+v, %v", st, err)
		}
		return st
	}
	ring := proto.CaptureSpec{FileName: "r.pcap", MaxBytes: capspec.MinMaxBytes, RingFiles: 2}
	first := capture(ring, "r-00001.pcap")
	before, err := os.ReadFile(first.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	capture(ring, "r-2-00001.pcap")                                        // a ring's files are not another ring's
	capture(proto.CaptureSpec{FileName: "r-00001.pcap"}, "r-00001-2.pcap") // nor a file's
	capture(proto.CaptureSpec{FileName: "r-2.pcap"}, "r-2.pcap")           // no file has that name
	capture(ring, "r-3-00001.pcap")                                        // r-2.pcap is a file now
	if after, err := os.ReadFile(first.FilePath); err != nil || !slices.Equal(after, before) {
		t.Fatalf("the first capture's file changed: %v", err)
	}

	// Running captures hold their names, and a ring the names of its files
	// to come.
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	busy := map[string]*hostCapture{
		"q.pcap":       {spec: proto.CaptureSpec{FileName: "q.pcap", RingFiles: 3}},
		"s-00007.pcap": {spec: proto.CaptureSpec{FileName: "s-00007.pcap"}},
	}
	for _, tc := range []struct {
		name string
		ring bool
		want string
	}{
		{"q-00002.pcap", false, "q-00002-2.pcap"},
		{"q.pcap", false, "q-2.pcap"},
		{"s.pcap", true, "s-2.pcap"},
		{"s.pcap", false, "s.pcap"},
		{"s-00007.pcap", false, "s-00007-2.pcap"},
	} {
		if got, err := uniqueName(root, busy, tc.name, tc.ring); err != nil || got != tc.want {
			t.Errorf("uniqueName(%s, ring %v) = %s, %v; want %s", tc.name, tc.ring, got, err, tc.want)
		}
	}
}

// A ring's new-file hook runs on the ring's goroutine, which starts with
// the first file: it can run before Captures.Start has published the capture
// (c.tap). Here the second file begins (capture_max_seconds) while
// Captures.Start is held between the two; the hook must wait for the
// capture, not read a nil one.
func TestARingsFirstRotationBeforeTheCaptureIsPublishedWaitsForIt(t *testing.T) {
	h := linkedHost(t)
	events, cancel := h.Events.Subscribe()
	defer cancel()
	entered := make(chan struct{})
	var once sync.Once
	h.hooks.began = func() { once.Do(func() { close(entered) }) }
	h.hooks.ringMade = func() {
		select {
		case <-entered: // the ring began its second file: now publish
		case <-time.After(30 * time.Second):
			t.Error("the ring did not begin its second file within 30 s")
		}
	}
	st, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "early.pcap", MaxSeconds: 1, RingFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	if st.FileName != "early-00001.pcap" && st.FileName != "early-00002.pcap" {
		t.Fatalf("started %+v", st)
	}
	ev := nextEvent(t, events, proto.EventCaptureRotated)
	if ev.Capture == nil || !ev.Capture.Active || ev.Capture.FileName < "early-00002.pcap" {
		t.Fatalf("capture.rotated %+v", ev.Capture)
	}
	if _, err := h.Captures.Stop(testProject, testLink); err != nil {
		t.Fatal(err)
	}
}

func TestTheCapturesMemoryIsWhatTheirPoolHolds(t *testing.T) {
	h, fakes := linkedFakes(t)
	const bound = 64 << 20
	h.Captures.pool = captures.NewPool(bound, time.Hour) // its own, kept an hour: nothing trims it meanwhile
	if m := h.Captures.Memory(); m != (CaptureMemory{Max: bound}) {
		t.Fatalf("before any capture: %+v", m)
	}
	if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "memory.pcap"}); err != nil {
		t.Fatal(err)
	}
	send(t, fakes, 10, 100) // each frame crossed the link: the capture has queued it
	if m := h.Captures.Memory(); m.Allocated < 2<<20 || m.InUse > m.Allocated || m.Max != bound || m.Refused != 0 {
		t.Fatalf("while a capture writes: %+v", m)
	}
	if _, err := h.Captures.Stop(testProject, testLink); err != nil {
		t.Fatal(err)
	}
	if m := h.Captures.Memory(); m.Allocated < 2<<20 || m.Max != bound {
		t.Fatalf("after the capture: %+v (the pool keeps its free regions for an hour)", m)
	}
}

// A start answers only once the capture's file is durable: when the sync
// of its folder fails (returning only after the file's own sync, so that a
// start that answered after the file's sync alone would answer success),
// the start fails with the agent's internal error, nothing runs on the
// link, no file or mark is left, and the name is free for the next start.
func TestACaptureWhoseFileCannotBeMadeDurableFailsAndLeavesNothing(t *testing.T) {
	h, fakes := linkedFakes(t)
	fault := errors.New("injected fsync failure")
	fileSynced := make(chan struct{})
	var once sync.Once
	h.hooks.sync = func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			defer once.Do(func() { close(fileSynced) })
			return f.Sync()
		}
		select {
		case <-fileSynced:
		case <-time.After(5 * time.Second):
		}
		return fault
	}
	_, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "durable.pcap"})
	var perr *proto.Error
	if !errors.As(err, &perr) || perr.Code != proto.CodeInternal || !strings.Contains(perr.Message, fault.Error()) {
		t.Fatalf("start with a failing fsync: %v, want an internal error saying why", err)
	}
	if st, err := h.Captures.State(testProject, testLink); err != nil || st.Active {
		t.Fatalf("after the failed start the link's capture is %+v, %v", st, err)
	}
	dir := filepath.Join(h.cfg.DataDir, "projects", testProject, "project-files", "captures")
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("the failed start left %v in the captures folder", names)
	}
	send(t, fakes, 3, 100) // the link forwards, with no capture
	h.hooks.sync = nil
	st, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "durable.pcap"})
	if err != nil || !st.Active || filepath.Base(st.FilePath) != "durable.pcap" {
		t.Fatalf("the next start: %+v, %v; want durable.pcap, running", st, err)
	}
}

// A capture's file takes no record before its .writing mark is durable
// (captures.RingHooks.Created): a crash then leaves either a header alone
// or a marked file, which the next open repairs. Here making the mark is
// slow: frames cross the link meanwhile, and the file holds its header
// alone until the mark is made; then the records come.
func TestACapturesRecordsWaitForItsWritingMark(t *testing.T) {
	h, fakes := linkedFakes(t)
	entered, unblock := make(chan struct{}), make(chan struct{})
	var enterOnce, unblockOnce sync.Once
	free := func() { unblockOnce.Do(func() { close(unblock) }) }
	t.Cleanup(free) // registered after linkedFakes' Close: runs before it
	h.hooks.marking = func(name string) {
		if name == "marked.pcap" {
			enterOnce.Do(func() { close(entered) })
			<-unblock
		}
	}
	st, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "marked.pcap"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the capture's file was not marked within 30 s")
	}
	const n, size = 10, 100
	send(t, fakes, n, size) // each frame crossed the link: the capture has queued it
	mark := st.FilePath + writingSuffix
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the mark exists before it was made: %v", err)
	}
	// A record waits two flush intervals at most before it is written:
	// watch a hundred. A loaded machine can only make this pass wrongly,
	// never fail wrongly; captures' TestARingFileWritesNoRecordBeforeItIsReleased
	// shows the gate itself on a synctest clock.
	for range 100 {
		fi, err := os.Stat(st.FilePath)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 24 {
			t.Fatalf("while its mark is being made the file holds %d bytes, want its 24-byte header alone", fi.Size())
		}
		time.Sleep(captures.DefaultFlushInterval)
	}
	free()
	want := int64(24 + n*(16+size))
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Stat(st.FilePath)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after its mark the file holds %d bytes, want %d", fi.Size(), want)
		}
		time.Sleep(captures.DefaultFlushInterval)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the records were written and the mark is not there: %v", err)
	}
	final, err := h.Captures.Stop(testProject, testLink)
	if err != nil || final.Frames != n {
		t.Fatalf("stop: %+v, %v", final, err)
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the mark outlived the capture's clean end: %v", err)
	}
}
