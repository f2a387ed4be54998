// Package kvm finds out whether KVM really runs guests here: a self-test
// that makes a virtual machine of one page and one vCPU, runs a short
// real-mode program (a loop of 2^20 turns, then mov al, 42; out 0x10, al;
// hlt) and checks that the vCPU wrote 42 to port 0x10 and halted, within a
// deadline.
//
// /dev/kvm opening read-write is not enough. In some nested virtual
// machines it opens, VMs and vCPUs are made and run, but every real-mode
// instruction costs microseconds (measured here: 5 µs a turn of the loop,
// against a nanosecond or so on a working KVM): the firmware and the
// kernel's set-up code crawl, QEMU spins and the console stays blank for
// minutes. A working KVM runs the loop in about a millisecond; such a host
// would take some five seconds, and is stopped at the deadline. A vCPU that
// never runs at all fails the same way.
package kvm

import (
	"errors"
	"time"
)

// DefaultTimeout is how long Check lets the vCPU run. A working KVM
// halts in well under a millisecond.
const DefaultTimeout = time.Second

// Device is the KVM device Check opens.
const Device = "/dev/kvm"

// ErrUnsupported is returned by Check on an architecture it has no guest
// code for: it cannot tell, and the caller decides.
var ErrUnsupported = errors.New("kvm: no self-test on this architecture")

// ErrTimeout is wrapped by Check's error when the vCPU did not halt by
// the deadline.
var ErrTimeout = errors.New("vCPU did not halt")

// Check runs the self-test against dev (Device) and returns nil when the
// vCPU ran the guest code and halted within timeout; otherwise an error
// that says which step failed (opening the device, an ioctl, the vCPU's
// exit, ErrTimeout). It takes timeout at most, plus the time a vCPU takes
// to leave KVM_RUN when signalled; if it does not leave at all (a broken
// host), Check returns after a second more and leaves the vCPU's thread
// behind, blocked.
func Check(dev string, timeout time.Duration) error {
	return check(dev, guestCode, timeout)
}
