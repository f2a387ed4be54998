package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
)

// qemu_path runs only a QEMU the agent lists: an executable script, a
// shell or a link to one is refused, naming qemu_path; a listed binary by
// name or path works, and so does a path from another host to a binary
// of a listed name.
func TestSecurityQemuPathIsAListedBinary(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64")
	script := filepath.Join(t.TempDir(), "x.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nid\n"), 0o755)
	link := filepath.Join(t.TempDir(), "qemu-system-x86_64")
	os.Symlink("/bin/sh", link)
	for _, p := range []string{script, "/bin/sh", "sh", link, "/nonexistent/sh", "qemu-system-../../x"} {
		_, err := NewQemu(QemuConfig{NodeID: "n", Name: "r1", Dir: t.TempDir(), ImagesDir: t.TempDir(), Props: QemuProps{QemuPath: p}})
		if err == nil || !strings.Contains(err.Error(), "qemu_path") {
			t.Errorf("qemu_path %s: %v, want a refusal naming qemu_path", p, err)
		}
	}
	listed := QemuBinaries()
	for _, p := range []string{"qemu-system-x86_64", listed[0], "/opt/elsewhere/" + filepath.Base(listed[0])} {
		q, err := NewQemu(QemuConfig{NodeID: "n", Name: "r1", Dir: t.TempDir(), ImagesDir: t.TempDir(), Props: QemuProps{QemuPath: p}})
		if err != nil {
			t.Errorf("qemu_path %s: %v", p, err)
			continue
		}
		if got := q.Properties()["qemu_path"].(string); !strings.HasPrefix(filepath.Base(got), "qemu-system-") {
			t.Errorf("qemu_path %s resolved to %s", p, got)
		}
	}
}
