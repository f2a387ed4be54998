package node

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ReadMemory gives /proc/meminfo's figures in bytes: MemTotal (which does
// not change) as the file says it, the others within it.
func TestReadMemoryGivesMeminfoInBytes(t *testing.T) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	var kB int64
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
			kB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	m := ReadMemory()
	if m.Total != kB<<10 {
		t.Fatalf("Total = %d; /proc/meminfo says %d kB", m.Total, kB)
	}
	if m.Available <= 0 || m.Available > m.Total || m.Free <= 0 || m.Free > m.Total {
		t.Fatalf("Available %d, Free %d: not within Total %d", m.Available, m.Free, m.Total)
	}
}

// renice reaches every thread of a process, not only its main one.
func TestReniceSetsEveryThread(t *testing.T) {
	sh, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	cmd := exec.Command(sh, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := renice(cmd.Process.Pid, 7); err != nil {
		t.Fatal(err)
	}
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if 20-raw != 7 {
		t.Fatalf("nice = %d after renice to 7", 20-raw)
	}
}
