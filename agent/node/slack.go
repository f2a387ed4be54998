package node

import (
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// VPCSTimerSlack is the timer slack VPCS runs with. Every VPCS has a thread
// that only counts seconds, in a loop of usleep(100): with the kernel's
// default slack (50 µs) it wakes about 2,400 times a second and an idle
// node costs 6–9% of a core. Timed sleeps may end this much later, which
// nothing in VPCS notices: its clock counts whole seconds, its ping times
// come from when a reply was read (a socket wake-up, which slack does not
// delay), and its console waits on input. Measured on a 2-core VM, one
// idle VPCS for 20 s (/tmp python harness, 2026-11-24): 50 µs 6.4% of a
// core, 1 ms 4.7%, 5 ms 0.9%, 10 ms 0.5%, 20 ms 0.3%, 50 ms 0.1%.
// BenchmarkIdleVPCS reports it per node.
const VPCSTimerSlack = 20 * time.Millisecond

// startWithTimerSlack runs start, which forks a process, on an OS thread
// whose timer slack is slack for the while, so the process and every thread
// it makes inherit that slack (fork copies it, execve keeps it). The thread
// gets its own slack back before the Go scheduler may run anything else on
// it. It must live on rather than exit with a locked goroutine: the child's
// Pdeathsig fires when the thread that forked it ends.
func startWithTimerSlack(slack time.Duration, start func() (*os.File, error)) (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return nil, os.NewSyscallError("prctl PR_GET_TIMERSLACK", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack.Nanoseconds()), 0, 0, 0); err != nil {
		return nil, os.NewSyscallError("prctl PR_SET_TIMERSLACK", err)
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(prev), 0, 0, 0)
	return start()
}
