package node

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/labtap/labtap/internal/kvm"
	"github.com/labtap/labtap/internal/sandbox"
)

// KVMProblem says why QEMU nodes under "auto" run without KVM here: nil
// where KVM runs guests. It runs KVM's self-test (package kvm) the first
// time it is called, at most a second, and then answers that verdict for
// the life of the process; callers at once wait for the one test. Where
// the self-test has no guest code (another architecture than x86-64), KVM
// is taken to work where /dev/kvm opens read-write.
var KVMProblem = sync.OnceValue(func() error {
	err := kvm.Check(kvm.Device, kvm.DefaultTimeout)
	if errors.Is(err, kvm.ErrUnsupported) {
		f, err := os.OpenFile(kvm.Device, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		f.Close()
		return nil
	}
	if err != nil {
		return fmt.Errorf("KVM self-test: %w", err)
	}
	return nil
})

// KVMProblemFor is KVMProblem for QEMU run confined by sb: it adds why
// node programs, under uids of their own, could not open /dev/kvm though
// the self-test (run as the agent) passed.
func KVMProblemFor(sb *sandbox.Sandbox) error {
	if err := KVMProblem(); err != nil {
		return err
	}
	return sb.DeviceUsable(kvm.Device)
}

// chooseAccel picks the accelerator of the VM called name: TCG where its
// options ask for it (accel=tcg, -no-kvm) or setting is "tcg", KVM where
// setting is "kvm", and under "auto" KVM where kvmProblem (asked only
// then) finds none. The warning, for the VM's users, is set when a VM runs
// without KVM though neither its options nor the setting asked for that.
func chooseAccel(name, setting, options string, kvmProblem func() error) (accel, warning string) {
	switch {
	case strings.Contains(options, "accel=tcg") || strings.Contains(options, "-no-kvm"):
		return "tcg", ""
	case setting == "tcg":
		return "tcg", ""
	case setting == "kvm":
		return "kvm", ""
	}
	if err := kvmProblem(); err != nil {
		return "tcg", fmt.Sprintf("%s runs without KVM (TCG), expect a slow guest: %v", name, err)
	}
	return "kvm", ""
}
