package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
)

// newTestQemu is a QEMU node on an images folder and a node folder of
// the test's; nothing runs.
func newTestQemu(t *testing.T, props QemuProps) (*Qemu, string) {
	t.Helper()
	testenv.RequireTools(t, "qemu-system-x86_64", "qemu-img")
	images := t.TempDir()
	q, err := NewQemu(QemuConfig{NodeID: "5e1c0a11-0000-4000-8000-00000000e7ec", Name: "r1", Dir: t.TempDir(), ImagesDir: images, Props: props})
	if err != nil {
		t.Fatal(err)
	}
	return q, images
}

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// An image property names a file in the images folder only: an absolute
// path elsewhere is refused when the node is made, and a link in the
// folder that leads out is refused when the image is opened.
func TestSecurityQemuImageOutsideTheImagesFolderIsRefused(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64")
	for _, name := range []string{"/etc/shadow", "/proc/self/environ", "../x", "a/../../x"} {
		_, err := NewQemu(QemuConfig{NodeID: "n", Name: "r1", Dir: t.TempDir(), ImagesDir: t.TempDir(), Props: QemuProps{HDA: name}})
		if err == nil || !strings.Contains(err.Error(), "outside the images folder") {
			t.Errorf("hda_disk_image %s: %v, want outside the images folder", name, err)
		}
	}
	q, images := newTestQemu(t, QemuProps{})
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(images, "link.img"))
	os.WriteFile(filepath.Join(images, "ok.img"), []byte("disk"), 0o644)
	if _, err := q.setup().images().path("link.img"); err == nil {
		t.Error("a link out of the images folder was opened")
	}
	if p, err := q.setup().images().path(filepath.Join(images, "ok.img")); err != nil || filepath.Base(p) != "ok.img" {
		t.Errorf("an absolute path inside the images folder: %q %v", p, err)
	}
}

// A node's overlay whose backing file is not its base image stops the
// start; one the agent made links to the base, and QEMU is told the
// chain explicitly (the base, which has no backing of its own).
func TestSecurityQemuOverlayChainIsChecked(t *testing.T) {
	q, images := newTestQemu(t, QemuProps{HDA: "base.qcow2", HDAInterface: "virtio"})
	qemuImg(t, "create", "-q", "-f", "qcow2", filepath.Join(images, "base.qcow2"), "1M")
	args, err := q.setup().disks().args()
	if err != nil {
		t.Fatal(err)
	}
	base, _ := filepath.EvalSymlinks(filepath.Join(images, "base.qcow2"))
	overlay := filepath.Join(q.cfg.Dir, "hda_disk.qcow2")
	joined := strings.Join(args, " ")
	for _, want := range []string{`"filename":"` + overlay + `"`, `"backing":{"backing":null,,"driver":"qcow2",,"file":{"driver":"file",,"filename":"` + base + `"}}`} {
		if !strings.Contains(joined, want) {
			t.Errorf("disk args %s lack %s", joined, want)
		}
	}
	if h, err := readQcow2Header(overlay); err != nil || h.backing != base {
		t.Fatalf("the agent's overlay is backed by %q (%v), want %s", h.backing, err, base)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Remove(overlay)
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", secret, overlay, "1M")
	if _, err := q.setup().disks().args(); err == nil || !strings.Contains(err.Error(), "backing file "+secret) {
		t.Fatalf("an overlay backed by %s: %v, want a refusal naming it", secret, err)
	}
	if err := q.ResizeDisk(t.Context(), "hda", 1); err == nil {
		t.Fatal("resize_disk opened an overlay backed by a host file")
	}

	// A base image naming a backing file, and a copy that is not the
	// copy the agent made, are refused too.
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", secret, filepath.Join(images, "chained.qcow2"), "1M")
	q.cfg.Props.HDA = "chained.qcow2"
	if _, err := q.setup().disks().args(); err == nil || !strings.Contains(err.Error(), "backing file") {
		t.Fatalf("a base image with a backing file: %v", err)
	}
	no := false
	q.cfg.Props.HDA, q.cfg.Props.LinkedClone = "base.qcow2", &no
	os.Remove(overlay)
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", secret, overlay, "1M")
	if _, err := q.setup().disks().args(); err == nil || !strings.Contains(err.Error(), "backing file") {
		t.Fatalf("a copy with a backing file: %v", err)
	}
}

// Before the guest runs, the agent checks what QEMU opened: a file
// outside the node's disks and the images folder (an overlay rewritten
// after its check to name a data file), or a network block driver, stops
// the start.
func TestSecurityQemuOpenedFilesAreChecked(t *testing.T) {
	images, dir := t.TempDir(), t.TempDir()
	d := qemuDisks{images: qemuImages(images), dir: dir}
	reply := func(nodes string) func([]byte) ([]byte, error) {
		return func([]byte) ([]byte, error) { return []byte(`{"return": [` + nodes + `]}`), nil }
	}
	ok := `{"drv": "qcow2", "file": "json:{}"}, {"drv": "file", "file": "` + filepath.Join(dir, "hda_disk.qcow2") + `"},
		{"drv": "file", "file": "` + filepath.Join(images, "base.qcow2") + `"}, {"drv": "file", "file": "` + filepath.Join(dir, "config.img") + `"}`
	if err := d.checkOpened(reply(ok)); err != nil {
		t.Fatalf("the node's own disks: %v", err)
	}
	for _, bad := range []string{
		`{"drv": "file", "file": "/etc/shadow"}`, `{"drv": "nbd", "file": "nbd://10.0.0.1/x"}`, `{"drv": "http", "file": "http://x/y"}`,
		`{"drv": "file", "file": "` + filepath.Join(dir, "qemu.log") + `"}`, `{"drv": "host_device", "file": "/dev/sda"}`,
	} {
		if err := d.checkOpened(reply(ok + "," + bad)); err == nil {
			t.Errorf("QEMU opened %s: not refused", bad)
		}
	}
}
