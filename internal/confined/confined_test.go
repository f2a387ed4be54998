package confined

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Nothing outside the directory is read or written, however the path is
// spelled, links included.
func TestPathsStayInsideTheDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	os.MkdirAll(dir, 0o755)
	secret := filepath.Join(base, "secret")
	os.WriteFile(secret, []byte("s"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "link"))
	os.Symlink(base, filepath.Join(dir, "up"))
	// Links that lead out are refused.
	for _, p := range []string{"link", "up/secret"} {
		if data, err := Read(t.Context(), dir, p, 100); err == nil {
			t.Errorf("Read(%q) = %q", p, data)
		}
	}
	if err := Write(dir, "up/secret", []byte("x"), 0o644); err == nil {
		t.Error("wrote through a link to a directory outside")
	}
	// ".." stops at the directory: these name files inside it.
	for _, p := range []string{"../secret", "a/../../secret", "/../secret", "./../node/../secret", "link"} {
		if err := Write(dir, p, []byte("x"), 0o644); err != nil {
			t.Errorf("Write(%q): %v", p, err)
		}
	}
	if data, err := Read(t.Context(), dir, "secret", 100); err != nil || string(data) != "x" {
		t.Fatalf("inside: %q %v", data, err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "s" {
		t.Fatalf("the file outside was changed: %q", data)
	}
	for _, p := range []string{"", "/", ".", "a\\b", "a\x00"} {
		if _, err := Read(t.Context(), dir, p, 100); !errors.Is(err, ErrBadPath) {
			t.Errorf("Read(%q): %v", p, err)
		}
	}
	if err := Write(dir, "sub/startup.vpc", []byte("ip 10.0.0.1/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(t.Context(), dir, "/sub/./startup.vpc", 100); err != nil || string(data) != "ip 10.0.0.1/24\n" {
		t.Fatalf("read back %q %v", data, err)
	}
	if _, err := Read(t.Context(), dir, "sub", 100); !errors.Is(err, ErrIsDir) {
		t.Fatalf("directory: %v", err)
	}
	if _, err := Read(t.Context(), dir, "sub/startup.vpc", 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// What is not a regular file is refused without blocking: a FIFO (whose
// open used to wait for a writer for ever), a device, a link even when it
// stays inside the directory. A read past its deadline answers ErrTimeout.
func TestSecurityOnlyRegularFilesAreOpened(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "file"), []byte("data"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("file", filepath.Join(dir, "inside"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	for _, name := range []string{"pipe", "inside", "zero"} {
		if data, err := Read(t.Context(), dir, name, 100); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Read(%q) = %q, %v; want ErrNotRegular", name, data, err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR} {
		if f, err := OpenFile(root, "pipe", flag, 0); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenFile(pipe, %#x) = %v, %v; want ErrNotRegular", flag, f, err)
		}
	}
	if _, err := Open(root, "."); !errors.Is(err, ErrBadPath) {
		t.Errorf("Open(.) = %v", err)
	}
	if data, err := Read(t.Context(), dir, "file", 100); err != nil || string(data) != "data" {
		t.Fatalf("Read(file) = %q, %v", data, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Read(ctx, dir, "file", 100); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	// Writing replaces the FIFO; nothing blocks.
	if err := Write(dir, "pipe", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(filepath.Join(dir, "pipe")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("pipe after Write: %v %v", st, err)
	}
}
