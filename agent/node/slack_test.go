package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/internal/testenv"
	"golang.org/x/sys/unix"
)

func timerSlack(t testing.TB, path string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ns)
}

// VPCS, confined or not, runs with VPCSTimerSlack. Reading another
// process's /proc/<pid>/timerslack_ns takes CAP_SYS_NICE, which a container
// may lack; a process reads its own freely, so a '!' line of VPCS's startup
// script reads it in VPCS's shell, which inherited VPCS's slack at fork.
func TestVPCSRunsWithTheIdleTimerSlack(t *testing.T) {
	prog := findVPCS(t)
	for _, tc := range []struct {
		name string
		sb   *sandbox.Sandbox
	}{{"unconfined", nil}, {"confined", newSandbox(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "node")
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "startup.vpc"), []byte("! cat /proc/self/timerslack_ns > slack\n"), 0o644)
			v := startVPCS(t, VPCSConfig{
				Program: prog,
				Dir:     dir,
				Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
				Sandbox: tc.sb,
			})
			waitFile(t, filepath.Join(dir, "slack"))
			if got := timerSlack(t, filepath.Join(dir, "slack")); got != VPCSTimerSlack {
				t.Fatalf("vpcs runs with timer slack %v, want %v", got, VPCSTimerSlack)
			}
			v.mu.Lock()
			pid := v.proc.cmd.Process.Pid
			v.mu.Unlock()
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", pid))
			if errors.Is(err, os.ErrPermission) {
				return // no CAP_SYS_NICE: what VPCS's shell read is the check
			}
			if got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); time.Duration(got) != VPCSTimerSlack {
				t.Fatalf("/proc/%d/timerslack_ns = %q %v, want %d", pid, b, err, VPCSTimerSlack)
			}
		})
	}
}

func TestTheThreadThatStartsAProcessGetsItsTimerSlackBack(t *testing.T) {
	runtime.LockOSThread() // the same thread before, during and after
	defer runtime.UnlockOSThread()
	before, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var during int
	startWithTimerSlack(7*time.Millisecond, func() (*os.File, error) {
		during, _ = unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		return nil, nil
	})
	after, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if during != int(7*time.Millisecond) || after != before {
		t.Fatalf("timer slack before/during/after = %d/%d/%d ns, want %d/%d/%d", before, during, after, before, 7*time.Millisecond, before)
	}
}

// BenchmarkIdleVPCS reports the CPU an idle VPCS node costs, as a share of
// one core: run with -benchtime=20x or more (each iteration is 100 ms of
// idling by LABTAP_BENCH_VPCS nodes, 10 by default).
func BenchmarkIdleVPCS(b *testing.B) {
	prog := findVPCS(b)
	n := 10
	if s := os.Getenv("LABTAP_BENCH_VPCS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	pids := make([]int, n)
	for i := range pids {
		v := startVPCS(b, VPCSConfig{
			Program:  prog,
			Dir:      b.TempDir(),
			MACIndex: i % 256,
			Agent:    testenv.LoopbackUDP(b).LocalAddr().(*net.UDPAddr).AddrPort(),
		})
		v.mu.Lock()
		pids[i] = v.proc.cmd.Process.Pid
		v.mu.Unlock()
	}
	time.Sleep(time.Second) // past start-up work
	cpu := func() (ticks int64) {
		for _, pid := range pids {
			ticks += procTicks(b, pid)
		}
		return ticks
	}
	t0, c0 := time.Now(), cpu()
	b.ResetTimer()
	for range b.N {
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	elapsed, used := time.Since(t0), cpu()-c0
	const ticksPerSecond = 100 // USER_HZ
	perNode := float64(used) / ticksPerSecond / elapsed.Seconds() / float64(n) * 100
	b.ReportMetric(perNode, "%core/node")
	b.ReportMetric(perNode*float64(n), "%core/all")
}

// procTicks returns a process's user and system CPU time in clock ticks,
// its threads included.
func procTicks(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}
