package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A device node programs cannot open, though the agent (root) can, is
// reported, so that QEMU's accelerator is not KVM there: with /dev/kvm
// root:root 0600, KVM's self-test (as root) passed and every QEMU, run
// as its node's uid, failed "failed to initialize kvm: Permission denied".
func TestDeviceUsableByNodePrograms(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "kvm")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	confined := &Sandbox{layers: Layers{User: true}}
	own := func(mode os.FileMode, gid int) {
		t.Helper()
		if err := os.Chmod(dev, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(dev, -1, gid); err != nil {
			t.Skip("cannot give the test device a group here:", err)
		}
	}
	own(0o600, 0)
	if err := confined.DeviceUsable(dev); err == nil || !strings.Contains(err.Error(), "mode 0600") {
		t.Errorf("root:root 0600: %v, want refused naming the mode", err)
	}
	own(0o660, 0)
	if err := confined.DeviceUsable(dev); err == nil {
		t.Error("root's group 0660: usable, but programs never get root's group")
	}
	own(0o660, 36) // a group such as Debian's kvm
	if err := confined.DeviceUsable(dev); err != nil {
		t.Errorf("group 36 0660: %v", err)
	}
	own(0o666, 0)
	if err := confined.DeviceUsable(dev); err != nil {
		t.Errorf("0666: %v", err)
	}
	own(0o600, 0)
	var unconfined *Sandbox
	if err := unconfined.DeviceUsable(dev); err != nil {
		t.Errorf("programs run as the agent: %v", err)
	}
	if err := (&Sandbox{}).DeviceUsable(dev); err != nil {
		t.Errorf("no uid of their own: %v", err)
	}
}
