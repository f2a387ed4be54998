package host

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/labtap/labtap/captures"

	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/proto"
)

// TestCaptureFilesListSendAndDeleteRunningAndStoppedFiles: a project's
// captures folder lists its running file (with its link and counts now)
// and, once stopped, the same file with its records and times; both are
// sent as valid captures; a running file cannot be deleted, a stopped one
// can, with its note.
func TestCaptureFilesListSendAndDeleteRunningAndStoppedFiles(t *testing.T) {
	h, fakes := linkedFakes(t)
	if _, err := h.Captures.Start(testProject, testLink, proto.CaptureSpec{FileName: "kept.pcap"}); err != nil {
		t.Fatal(err)
	}
	send(t, fakes, 5, 100)
	waitCaptured(t, h, 5)
	list, err := h.Captures.Files(testProject)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].FileName != "kept.pcap" || !list[0].Running || list[0].LinkID != testLink {
		t.Fatalf("while running: %+v, want kept.pcap running on link %s", list, testLink)
	}
	if err := h.Captures.DeleteFile(testProject, "kept.pcap"); !isCode(err, proto.CodeConflict) {
		t.Fatalf("delete a running capture's file: %v, want a conflict", err)
	}
	if n := readRecords(t, h, "kept.pcap"); n != 5 {
		t.Fatalf("the running file sent holds %d records, want 5", n)
	}
	if _, err := h.Captures.Stop(testProject, testLink); err != nil {
		t.Fatal(err)
	}
	list, err = h.Captures.Files(testProject)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("stopped: %+v, want one file", list)
	}
	got := list[0]
	if got.Running || got.LinkID != testLink || got.Records != 5 || got.FirstTime == nil || got.LastTime == nil || got.LastTime.Before(*got.FirstTime) || got.Format != "pcap" {
		t.Fatalf("stopped: %+v, want 5 records of link %s with their times", got, testLink)
	}
	if n := readRecords(t, h, "kept.pcap"); n != 5 {
		t.Fatalf("the stopped file sent holds %d records, want 5", n)
	}
	if err := h.Captures.DeleteFile(testProject, "kept.pcap"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.cfg.DataDir, "projects", testProject, "project-files", "captures")
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("after delete the folder holds %v, want nothing (file and note gone)", left)
	}
	if err := h.Captures.DeleteFile(testProject, "kept.pcap"); !isCode(err, proto.CodeNotFound) {
		t.Fatalf("delete it again: %v, want not found", err)
	}
}

// TestCaptureFileNamesFromClientsNeverLeaveTheFolder: a name that is not
// a plain capture file name is refused before any file is touched.
func TestCaptureFileNamesFromClientsNeverLeaveTheFolder(t *testing.T) {
	h := linkedHost(t)
	secret := filepath.Join(h.cfg.DataDir, "projects", testProject, "secret.pcap")
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../secret.pcap", "..", ".meta.pcap", "a/b.pcap", "x.txt", "kept.pcap.meta", "", string(bytes.Repeat([]byte("a"), 300)) + ".pcap"} {
		if _, _, err := h.Captures.OpenFile(testProject, name); !isCode(err, proto.CodeInvalid) {
			t.Errorf("open %q: %v, want invalid", name, err)
		}
		if err := h.Captures.DeleteFile(testProject, name); !isCode(err, proto.CodeInvalid) {
			t.Errorf("delete %q: %v, want invalid", name, err)
		}
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatalf("the file outside the folder: %v", err)
	}
	if _, err := h.Captures.Files("../" + testProject); !isCode(err, proto.CodeInvalid) {
		t.Errorf("list a project id that is a path: %v, want invalid", err)
	}
}

func isCode(err error, code proto.Code) bool {
	pe, ok := errors.AsType[*proto.Error](err)
	return ok && pe.Code == code
}

// waitCaptured waits until the link's capture has n frames on disk.
func waitCaptured(t *testing.T, h *Host, n uint64) {
	t.Helper()
	waitUntil(t, func() bool {
		st, err := h.Captures.State(testProject, testLink)
		return err == nil && st.Frames >= n
	})
}

// readRecords reads a capture file as the file route sends it.
func readRecords(t *testing.T, h *Host, name string) int {
	t.Helper()
	size, body, err := h.Captures.OpenFile(testProject, name)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("read %d bytes of %d: %v", len(b), size, err)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, _, err := r.ReadPacketData(); err != nil {
			if err != io.EOF {
				t.Fatalf("record %d: %v", n+1, err)
			}
			return n
		}
		n++
	}
}

// waitUntil polls cond until it holds, for up to 30 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(captures.DefaultFlushInterval)
	}
}
