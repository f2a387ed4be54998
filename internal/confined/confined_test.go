package confined

import (
	"errors"
	"os"
	"path/filepath"
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
		if data, err := Read(dir, p, 100); err == nil {
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
	if data, err := Read(dir, "secret", 100); err != nil || string(data) != "x" {
		t.Fatalf("inside: %q %v", data, err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "s" {
		t.Fatalf("the file outside was changed: %q", data)
	}
	for _, p := range []string{"", "/", ".", "a\\b", "a\x00"} {
		if _, err := Read(dir, p, 100); !errors.Is(err, ErrBadPath) {
			t.Errorf("Read(%q): %v", p, err)
		}
	}
	if err := Write(dir, "sub/startup.vpc", []byte("ip 10.0.0.1/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(dir, "/sub/./startup.vpc", 100); err != nil || string(data) != "ip 10.0.0.1/24\n" {
		t.Fatalf("read back %q %v", data, err)
	}
	if _, err := Read(dir, "sub", 100); !errors.Is(err, ErrIsDir) {
		t.Fatalf("directory: %v", err)
	}
	if _, err := Read(dir, "sub/startup.vpc", 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
