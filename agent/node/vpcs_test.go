package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
	"golang.org/x/sys/unix"
)

// findVPCS returns the vpcs program, skipping the test where it is not
// installed (scripts/test installs it, so CI never skips). The tests that
// run VPCS run in parallel: each has its own process, folder and ephemeral
// ports, and most of their time is VPCS's own waiting (an address's
// duplicate check is 3 s).
func findVPCS(t testing.TB) *VPCSProgram {
	t.Helper()
	testenv.RequireTools(t, "vpcs")
	p, err := FindVPCS(t.Context(), "vpcs")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startVPCS(t testing.TB, cfg VPCSConfig) *VPCS {
	t.Helper()
	v, err := NewVPCS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Stop(context.Background()) })
	return v
}

func TestFindVPCSReadsTheVersion(t *testing.T) {
	t.Parallel()
	p := findVPCS(t)
	if p.Version == "" || !strings.HasPrefix(p.Path, "/") {
		t.Fatalf("FindVPCS = %+v", p)
	}
	if _, err := FindVPCS(t.Context(), "no-such-vpcs-binary"); err == nil {
		t.Fatal("FindVPCS found a program that does not exist")
	}
}

func TestVPCSStartsSendsFramesToTheAgentAndStops(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	agent := testenv.LoopbackUDP(t)
	var stops atomic.Int32
	v := startVPCS(t, VPCSConfig{
		Program:  prog,
		Dir:      t.TempDir(),
		MACIndex: 7,
		Agent:    agent.LocalAddr().(*net.UDPAddr).AddrPort(),
		OnStop:   func() { stops.Add(1) },
	})
	if v.Status() != Started || !strings.Contains(v.CommandLine(), "-m 7") {
		t.Fatalf("status %s, command line %q", v.Status(), v.CommandLine())
	}
	nic, ok := v.NIC(0, 0)
	if !ok || !udpBound(int(nic.Port())) {
		t.Fatalf("NIC(0,0) = %v, %v; the port must be bound", nic, ok)
	}
	if _, ok := v.NIC(0, 1); ok {
		t.Fatal("VPCS has a single port, 0/0")
	}
	port, kind := v.Console()
	con, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if kind != "telnet" {
		t.Fatalf("console type %q", kind)
	}
	// Setting an address makes VPCS send gratuitous ARPs to the agent,
	// from its NIC port, with the MAC its index gives.
	out, err := con.Run(t.Context(), "ip 192.0.2.7/24")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "192.0.2.7") {
		t.Fatalf("ip command printed %q", out)
	}
	// VPCS also sends IPv6 router solicitations; look for the ARP. VPCS
	// queues its frames for a thread of its own to send, which a loaded
	// machine can keep from running for seconds (5 s once ran out): the
	// wait is long, and ends when the ARP comes.
	buf := make([]byte, 2048)
	agent.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, from, err := agent.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no ARP from VPCS: %v", err)
		}
		if from.Port() != nic.Port() {
			t.Fatalf("frame came from port %d, want the NIC port %d", from.Port(), nic.Port())
		}
		frame := buf[:n]
		if n < 14 || frame[6] != 0x00 || frame[7] != 0x50 || frame[8] != 0x79 || frame[11] != 7 {
			t.Fatalf("frame not from 00:50:79:66:68:07: % x", frame[:min(n, 14)])
		}
		if frame[12] == 0x08 && frame[13] == 0x06 {
			break
		}
	}

	if err := v.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v.Status() != Stopped || v.CommandLine() != "" || stops.Load() != 1 {
		t.Fatalf("after Stop: status %s, command line %q, OnStop called %d times", v.Status(), v.CommandLine(), stops.Load())
	}
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		t.Fatal("console still listening after Stop")
	}
	// A second start works and a stop of a stopped node is a no-op.
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	v.Stop(t.Context())
	v.Stop(t.Context())
}

func TestVPCSPicksAnotherConsolePortWhenItsOwnIsTaken(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	taken, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     t.TempDir(),
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
		Console: takenPort,
	})
	port, _ := v.Console()
	if port == takenPort {
		t.Fatalf("console on the taken port %d", port)
	}
	con, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	con.Close()
}

func TestVPCSThatDiesIsReportedStopped(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	stopped := make(chan struct{}, 1)
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     t.TempDir(),
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
		OnStop:  func() { stopped <- struct{}{} },
	})
	v.mu.Lock()
	pid := v.proc.cmd.Process.Pid
	v.mu.Unlock()
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("OnStop not called after the process died")
	}
	if v.Status() != Stopped {
		t.Fatalf("status %s after the process died", v.Status())
	}
	port, _ := v.Console()
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		t.Fatal("the console still accepts connections after the node died")
	}
}

func TestStoppedVPCSLeavesNoProcessBehind(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     t.TempDir(),
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
	})
	v.mu.Lock()
	pid := v.proc.cmd.Process.Pid
	v.mu.Unlock()
	if err := v.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The process was reaped, and nothing of its session survives it.
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still exists", pid)
	}
	if out, _ := exec.Command("pgrep", "-s", fmt.Sprint(pid)).Output(); len(out) > 0 {
		t.Fatalf("processes of its session remain: %s", out)
	}
}

func TestVPCSConsoleIsOnlyOnItsHostAndCannotRunHostCommands(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     t.TempDir(),
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
	})
	port, _ := v.Console()
	if !listensOnlyOnLoopback(t, port) {
		t.Fatalf("console port %d listens beyond 127.0.0.1", port)
	}
	con, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	// VPCS runs what follows '!' on the host; the console drops the '!',
	// so VPCS echoes (and runs) the line without it.
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, cmd := range []string{"! touch " + marker, "!touch " + marker} {
		if out, err := con.run(t.Context(), cmd, strings.ReplaceAll(cmd, "!", "")); err != nil {
			t.Fatalf("%q: %q, %v", cmd, out, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a host command ran through the console")
	}
	// Two clients share the console: both see what one types.
	other, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	out, err := con.Run(t.Context(), "show ip")
	if err != nil || !strings.Contains(out, "00:50:79:66:68:00") {
		t.Fatalf("show ip = %q, %v", out, err)
	}
}

// listensOnlyOnLoopback reports whether every listening TCP socket on port
// is bound to 127.0.0.1 (0100007F in /proc/net/tcp).
func listensOnlyOnLoopback(t *testing.T, port int) bool {
	t.Helper()
	found := false
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && f[3] == "0A" && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) {
				if !strings.HasPrefix(f[1], "0100007F:") {
					return false
				}
				found = true
			}
		}
	}
	return found
}

func TestNewVPCSRefusesANonIPv4Agent(t *testing.T) {
	_, err := NewVPCS(VPCSConfig{Program: &VPCSProgram{}, Agent: netip.MustParseAddrPort("[::1]:9")})
	if err == nil {
		t.Fatal("NewVPCS accepted an IPv6 agent address, which VPCS cannot use")
	}
}

func TestFakeFollowsTheRunnerContract(t *testing.T) {
	agent := testenv.LoopbackUDP(t)
	stops := 0
	f := NewFake(agent.LocalAddr().(*net.UDPAddr).AddrPort(), func() { stops++ })
	var _ Runner = f
	if _, ok := f.NIC(0, 0); ok || f.Status() != Stopped {
		t.Fatal("a new Fake must be stopped with no NIC")
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	nic, ok := f.NIC(0, 0)
	if !ok {
		t.Fatal("no NIC after Start")
	}
	if err := f.Send([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	agent.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := agent.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "hi" || from != nic {
		t.Fatalf("agent got %q from %v (%v), want \"hi\" from %v", buf[:n], from, err, nic)
	}
	f.Stop(t.Context())
	f.Stop(t.Context())
	if stops != 1 || f.Status() != Stopped {
		t.Fatalf("after two Stops: %d OnStop calls, status %s", stops, f.Status())
	}
}

var _ Runner = (*VPCS)(nil)

// A VPCS takes its node's name at start (not "VPCS1"), and a console reset
// drops its clients while new ones still connect.
func TestVPCSTakesItsNodesNameAndItsConsoleResets(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     t.TempDir(),
		Name:    "PC 7",
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
	})
	port, _ := v.Console()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	con, err := DialConsole(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	out, err := con.Run(t.Context(), "show ip")
	if err != nil || !strings.Contains(out, "PC7") {
		t.Fatalf("show ip = %q, %v", out, err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := raw.Read(make([]byte, 64)); err != nil { // the greeting: it is a client now
		t.Fatal(err)
	}
	v.ResetConsole()
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("a reset console client was not disconnected: %v", err)
	}
	again, err := DialConsole(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if out, err := again.Run(t.Context(), "show ip"); err != nil || !strings.Contains(out, "PC7") {
		t.Fatalf("after reset: %q, %v", out, err)
	}
}

func TestPCNameFitsWhatVPCSTakes(t *testing.T) {
	for _, c := range []struct{ name, version, want string }{
		{"PC1", "0.5b2", "PC1"}, {"Core PC 12", "0.5b2", "CorePC"}, {"Core PC 12", "0.8.3", "CorePC12"},
		{"a\x07b", "0.8", "ab"}, {"é", "0.8", ""},
	} {
		if got := pcName(c.name, c.version); got != c.want {
			t.Errorf("pcName(%q, %q) = %q, want %q", c.name, c.version, got, c.want)
		}
	}
}

func TestVPCSConsoleLoadsOnlyWhatItSavedAndRloginSparesTheAgent(t *testing.T) {
	t.Parallel()
	prog := findVPCS(t)
	dir := t.TempDir()
	protected, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer protected.Close()
	protectedPort := protected.Addr().(*net.TCPAddr).Port
	v := startVPCS(t, VPCSConfig{
		Program:     prog,
		Dir:         dir,
		Agent:       testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
		DeniedPorts: []int{protectedPort},
	})
	port, _ := v.Console()
	con, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	run := func(cmd string) string {
		t.Helper()
		out, err := con.Run(t.Context(), cmd)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// A refused line never reaches VPCS: the guard erases it and says why.
	refused := func(cmd string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if out, err := con.Run(ctx, cmd); !errors.Is(err, ErrRefused) {
			t.Errorf("%q was not refused: %q, %v", cmd, out, err)
		}
	}
	// The attack: "?" puts VPCS's help, with its "! [command [args]]" line,
	// into vpcs.log; "load vpcs.log" would run it. Any other file with a
	// "!" line is as bad: here one names a marker to create.
	run("?")
	if log, _ := os.ReadFile(filepath.Join(dir, "vpcs.log")); !strings.Contains(string(log), "! ") {
		t.Fatalf("vpcs.log does not hold the help's '!' line; the test would prove nothing:\n%s", log)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	evil := "! touch " + marker + "\n"
	os.WriteFile(filepath.Join(dir, "evil.vpc"), []byte(evil), 0o644)
	elsewhere := filepath.Join(t.TempDir(), "evil.vpc")
	os.WriteFile(elsewhere, []byte(evil), 0o644)
	for _, cmd := range []string{"load evil.vpc", "load evil", "lo evil.vpc", "LOAD evil.vpc", "load vpcs.log", "load " + elsewhere, "load ../" + filepath.Base(dir) + "/evil.vpc", "save vpcs.log", "save ../x"} {
		refused(cmd)
	}
	// Line editing cannot smuggle the name past the guard either.
	refused("load xx\x7f\x7fevil.vpc") // erased back to "load evil.vpc"
	refused("load st\x1b[D\x1b[Devil.vpc")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a file not saved from the console was loaded and its '!' line ran")
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "vpcs.log")); strings.Contains(string(log), "pwned") && strings.Contains(string(log), "Executing") {
		t.Fatalf("VPCS executed a refused file:\n%s", log)
	}
	// What the console saved loads. (A name, not an address: VPCS checks
	// an address for duplicates for 3 s, at each "ip" and at each load.)
	run("set pcname Saved")
	run("save mine")
	if _, err := os.Stat(filepath.Join(dir, "mine.vpc")); err != nil {
		t.Fatalf("save mine: %v", err)
	}
	run("set pcname Other")
	run("load mine")
	if out := run("show ip"); !strings.Contains(out, "Saved") {
		t.Fatalf("after load mine, show ip = %q", out)
	}
	// rlogin to a protected port never connects.
	refused(fmt.Sprintf("rlogin 127.0.0.1 %d", protectedPort))
	refused(fmt.Sprintf("rl %d", protectedPort))
	run("show ip") // VPCS has handled every line sent before this one
	if queued(t, protected.(*net.TCPListener)) {
		t.Fatal("rlogin reached a protected port")
	}
}

// queued reports whether a connection waits in ln's accept queue, without
// waiting for one: a connect that returned is in the queue.
func queued(t *testing.T, ln *net.TCPListener) bool {
	t.Helper()
	rc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	var aerr error
	if err := rc.Control(func(s uintptr) { // the socket is non-blocking
		fd, _, aerr = unix.Accept4(int(s), unix.SOCK_CLOEXEC)
	}); err != nil {
		t.Fatal(err)
	}
	if errors.Is(aerr, unix.EAGAIN) {
		return false
	}
	if aerr != nil {
		t.Fatal(aerr)
	}
	unix.Close(fd)
	return true
}
