package node

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/labtap/labtap/internal/sandbox"
)

// How much of the host a QEMU node gets: its process priority
// (process_priority) and CPU throttling (cpu_throttling, with cpulimit).

// niceOf maps GNS3's process_priority to a nice value ("" is GNS3's node
// default, low).
func niceOf(priority string) int {
	switch priority {
	case "realtime":
		return -20
	case "very high":
		return -15
	case "high":
		return -5
	case "normal":
		return 0
	case "very low":
		return 19
	}
	return 5
}

// renice sets the nice value of every thread of a process (setpriority
// on a pid changes its main thread only). QEMU is still paused (-S) when
// this runs; the threads it makes later inherit it. Linux derives the
// I/O priority of a thread from its nice value unless it was set, so the
// I/O priority follows.
func renice(pid, nice int) error {
	tasks, err := procfs.AllThreads(pid)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		tid := t.PID
		// The launcher set it already where it could; a thread of another
		// uid is reniced only if need be (that needs CAP_SYS_NICE).
		if raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil && 20-raw == nice {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startThrottle runs cpulimit on the QEMU process (GNS3's cpu_throttling:
// limit percent of one CPU, up to 800), confined as QEMU is (sb, spec).
// --lazy makes it end with QEMU.
func startThrottle(sb *sandbox.Sandbox, spec sandbox.Spec, pid, limit int) (*child, error) {
	bin, err := exec.LookPath("cpulimit")
	if err != nil {
		return nil, errors.New("Could not throttle CPU: cpulimit is not installed (Debian package cpulimit)")
	}
	// As QEMU's own user: it stops and continues QEMU with signals.
	cmd, err := sb.Command(spec, bin, "--lazy", "--pid="+strconv.Itoa(pid), "--limit="+strconv.Itoa(limit))
	if err != nil {
		return nil, fmt.Errorf("Could not throttle CPU: %v", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c, err := startChild(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("Could not throttle CPU: %v", err)
	}
	return c, nil
}
