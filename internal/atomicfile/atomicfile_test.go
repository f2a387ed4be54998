package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.json")
	for _, data := range []string{"one", "two, longer"} {
		if err := Write(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != data {
			t.Fatalf("read %q, wrote %q", got, data)
		}
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600 whatever the umask", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "sub", TempPattern(p))); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// Two writers of one file each have a temporary file of their own: the
// file ends as one of them wrote it, whole. (A fixed temporary name, which
// image uploads had, let one writer's data end in the other's file.)
func TestConcurrentWritersNeverMix(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	contents := make([][]byte, 8)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
	}
	for range 5 {
		var wg sync.WaitGroup
		for i := range contents {
			wg.Go(func() {
				f, err := CreateIn(root, "disk.img", 0o644)
				if err != nil {
					t.Error(err)
					return
				}
				for off := 0; off < len(contents[i]); off += 64 << 10 {
					f.Write(contents[i][off : off+64<<10])
				}
				if err := f.Commit(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := root.ReadFile("disk.img")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) || len(got) != 1<<20 {
			t.Fatalf("the file mixes writers or is cut: %d bytes starting %q", len(got), got[:4])
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root.Name()))
	if len(entries) != 1 {
		t.Fatalf("entries left: %v", entries)
	}
}

// Aborting, or failing, leaves the file as it was; a link at the name is
// replaced, never followed.
func TestAbortLeavesTheFileAndALinkIsReplacedNotFollowed(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, "f", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := CreateIn(root, "f", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("new"))
	f.Abort()
	f.Abort() // twice is harmless
	if err := f.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	if got, _ := root.ReadFile("f"); string(got) != "old" {
		t.Fatalf("aborted write changed the file: %q", got)
	}
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	for _, name := range []string{"link", "fifo"} {
		if err := WriteIn(root, name, []byte("mine"), 0o644); err != nil {
			t.Fatal(name, err)
		}
		if st, _ := os.Lstat(filepath.Join(dir, name)); !st.Mode().IsRegular() {
			t.Fatalf("%s is %v", name, st.Mode())
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep" {
		t.Fatalf("the link was followed: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("entries: %v", entries)
	}
}
