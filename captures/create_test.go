package captures

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

func TestCreateNeverOverwritesAFile(t *testing.T) {
	root, dir := openRoot(t)
	path := filepath.Join(dir, "taken.pcap")
	if err := os.WriteFile(path, []byte("someone's capture"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Create(root, "taken.pcap", Options{})
	if err == nil {
		c.Close()
		t.Fatal("Create of an existing file succeeded")
	}
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create of an existing file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "someone's capture" {
		t.Fatalf("the existing file now holds %q", got)
	}
}

// Create answers only once the file and its directory are synced, and
// fails when either sync fails: a sync's error must reach the caller,
// which is so only if Create waited for it. Each failing sync returns
// only once the other one has returned, so that a Create that answered
// after the first sync alone would answer success.
func TestCreateFailsWhenItsFileOrItsDirectoryCannotBeMadeDurable(t *testing.T) {
	for _, failing := range []string{"file", "directory"} {
		t.Run(failing, func(t *testing.T) {
			root, dir := openRoot(t)
			fault := errors.New("injected fsync failure")
			other := make(chan struct{})
			opts := Options{Sync: func(f *os.File) error {
				fi, err := f.Stat()
				if err != nil {
					return err
				}
				if fi.IsDir() == (failing == "directory") {
					select { // bounded: a Create that syncs one after the other gets here first
					case <-other:
					case <-time.After(5 * time.Second):
					}
					return fault
				}
				defer close(other)
				return f.Sync()
			}}
			c, err := Create(root, "x.pcap", opts)
			if err == nil {
				c.Close()
				t.Fatal("Create succeeded though a sync failed")
			}
			if !errors.Is(err, fault) {
				t.Fatalf("Create: %v, want the sync's error", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "x.pcap")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a failed Create left its file: %v", err)
			}
		})
	}
}

// A Ring's file takes no record on disk before its Created hook releases
// it: the owner's mark of the file (for a repair after a crash) is made
// before any record can be torn by one. In a synctest bubble, the records
// wait fifty flush intervals of the bubble's clock, which passes only once
// every goroutine of the ring is blocked: an ungated writer has written
// them by then, however loaded the machine.
func TestARingFileWritesNoRecordBeforeItIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root, dir := openRoot(t)
		released := make(chan func(), 1)
		r, err := CreateRing(root, "gated.pcap", Options{FlushInterval: time.Millisecond, Pool: NewPool(DefaultQueueBytes, 0)}, Limits{},
			RingHooks{Created: func(name string, release func()) { released <- release }})
		if err != nil {
			t.Fatal(err)
		}
		release := <-released
		defer r.Close() // a failure ends the ring too: the bubble's goroutines must end
		defer release()
		path := filepath.Join(dir, "gated.pcap")
		for i := range 10 {
			r.WritePackets(AtoB, [][]byte{numbered(i, 100)})
		}
		time.Sleep(50 * time.Millisecond)
		if fi, err := os.Stat(path); err != nil {
			t.Fatal(err)
		} else if fi.Size() != 24 {
			t.Fatalf("before its release the file holds %d bytes, want its 24-byte header alone", fi.Size())
		}
		release()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if got := sequenceOf(t, "pcap", data); len(got) != 10 {
			t.Fatalf("the file holds records %v, want the 10 written", got)
		}
	})
}
