package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VPCSProgram is the vpcs executable an agent runs, as found on this host.
type VPCSProgram struct {
	Path    string // absolute path
	Version string // e.g. "0.5b2"
	// noRelay: VPCS 0.8 and later take -R to turn off their relay feature;
	// older ones (Debian 12 ships 0.5b2) print their usage and exit on it.
	noRelay bool
}

var vpcsVersion = regexp.MustCompile(`version ([0-9]+)\.([0-9]+)([A-Za-z0-9.]*)`)

// FindVPCS locates the vpcs executable (a name is looked up in PATH) and
// reads its version.
func FindVPCS(ctx context.Context, name string) (*VPCSProgram, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("VPCS executable %q not found (install the vpcs package): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-v").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("run %s -v: %w", path, err)
	}
	m := vpcsVersion.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%s -v printed no version", path)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return &VPCSProgram{
		Path:    path,
		Version: fmt.Sprintf("%s.%s%s", m[1], m[2], m[3]),
		noRelay: major > 0 || minor >= 8,
	}, nil
}

// VPCSConfig configures one VPCS node.
type VPCSConfig struct {
	Program *VPCSProgram
	// Dir is the node's working directory; it holds vpcs.log and, if the
	// user puts one there, startup.vpc.
	Dir string
	// MACIndex is the last byte of the node's MAC, 00:50:79:66:68:NN.
	MACIndex int
	// Agent is where VPCS sends its frames: the agent's socket for the
	// node's Ethernet0. It must be an IPv4 address (VPCS takes no names).
	Agent netip.AddrPort
	// Console is the console's TCP port; 0 picks a free one.
	Console int
	Logger  *slog.Logger
	// OnStop, if set, is called (from the runner's goroutine) each time the
	// process ends, whether asked to or not.
	OnStop func()
}

// VPCS runs a VPCS process: one virtual PC with one Ethernet port, a telnet
// console, and frames over UDP (datapath.md section 8).
type VPCS struct {
	cfg VPCSConfig
	log *slog.Logger

	ops sync.Mutex // serialises Start and Stop

	mu      sync.Mutex // guards the fields below
	console int
	proc    *vpcsProc // nil while stopped
}

type vpcsProc struct {
	cmd     *exec.Cmd
	nic     netip.AddrPort // where VPCS listens (its -s port)
	cmdline string
	exited  chan struct{} // closed once the process is gone
	reaped  chan struct{} // closed once the node is marked stopped
}

// NewVPCS prepares a VPCS node; nothing runs until Start.
func NewVPCS(cfg VPCSConfig) (*VPCS, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if !cfg.Agent.Addr().Is4() {
		return nil, fmt.Errorf("vpcs: agent address %v is not IPv4", cfg.Agent)
	}
	if cfg.MACIndex < 0 || cfg.MACIndex > 255 {
		return nil, fmt.Errorf("vpcs: MAC index %d out of 0-255", cfg.MACIndex)
	}
	v := &VPCS{cfg: cfg, log: cfg.Logger, console: cfg.Console}
	if v.console == 0 {
		p, err := freePort("tcp")
		if err != nil {
			return nil, err
		}
		v.console = p
	}
	return v, nil
}

// Status returns Started or Stopped.
func (v *VPCS) Status() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.proc == nil {
		return Stopped
	}
	return Started
}

// Console returns the console port; the console speaks telnet.
func (v *VPCS) Console() (int, string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.console, "telnet"
}

// CommandLine returns the running command, "" while stopped.
func (v *VPCS) CommandLine() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.proc == nil {
		return ""
	}
	return v.proc.cmdline
}

// NIC returns where VPCS receives the frames of Ethernet0 (adapter 0, port 0).
func (v *VPCS) NIC(adapter, port int) (netip.AddrPort, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.proc == nil || adapter != 0 || port != 0 {
		return netip.AddrPort{}, false
	}
	return v.proc.nic, true
}

// startAttempts bounds retries when a port picked for VPCS is taken by
// someone else between the pick and VPCS's bind.
const startAttempts = 4

// readyTimeout bounds how long a starting VPCS may take to open its ports.
const readyTimeout = 10 * time.Second

// Start runs VPCS and returns once its console listens and its UDP port is
// bound.
func (v *VPCS) Start(ctx context.Context) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	if v.Status() == Started {
		return nil
	}
	if err := os.MkdirAll(v.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("vpcs: %w", err)
	}
	var lastErr error
	for range startAttempts {
		nicPort, err := freePort("udp")
		if err != nil {
			return err
		}
		p, err := v.launch(nicPort)
		if err != nil {
			return err
		}
		why := v.waitReady(ctx, p)
		if why == nil {
			v.mu.Lock()
			v.proc = p
			v.mu.Unlock()
			go v.reap(p)
			v.log.Info("vpcs started", "pid", p.cmd.Process.Pid, "console", v.console, "nic", p.nic)
			return nil
		}
		kill(p)
		lastErr = why
		if errors.Is(why, errConsoleTaken) {
			// Someone took the console port: pick another one and retry.
			port, err := freePort("tcp")
			if err != nil {
				return err
			}
			v.mu.Lock()
			v.console = port
			v.mu.Unlock()
			continue
		}
		if errors.Is(why, errNICTaken) {
			continue
		}
		return why
	}
	return lastErr
}

var (
	errConsoleTaken = errors.New("console port already in use")
	errNICTaken     = errors.New("UDP port already in use")
)

// launch starts the process without waiting for it.
func (v *VPCS) launch(nicPort int) (*vpcsProc, error) {
	v.mu.Lock()
	console := v.console
	v.mu.Unlock()
	args := []string{
		"-i", "1", // one virtual PC
		"-F", // foreground: the PID we start stays the one to kill
		"-p", strconv.Itoa(console),
		"-m", strconv.Itoa(v.cfg.MACIndex),
		"-s", strconv.Itoa(nicPort),
		"-c", strconv.Itoa(int(v.cfg.Agent.Port())),
		"-t", v.cfg.Agent.Addr().String(),
	}
	if v.cfg.Program.noRelay {
		args = append(args, "-R")
	}
	logf, err := os.Create(filepath.Join(v.cfg.Dir, "vpcs.log"))
	if err != nil {
		return nil, fmt.Errorf("vpcs: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(v.cfg.Program.Path, args...)
	cmd.Dir = v.cfg.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // its pty child is killed with it
		Pdeathsig: syscall.SIGKILL, // an agent that dies takes its nodes along
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vpcs: start %s: %w", v.cfg.Program.Path, err)
	}
	p := &vpcsProc{
		cmd:     cmd,
		nic:     netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(nicPort)),
		cmdline: strings.Join(append([]string{v.cfg.Program.Path}, args...), " "),
		exited:  make(chan struct{}),
		reaped:  make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady waits until VPCS listens on its console and has bound its UDP
// port. It checks the kernel's socket tables rather than connecting: a
// probe connection would disturb the console, and binding the UDP port
// ourselves to test it could steal it. VPCS does not fail when its UDP
// port is taken; it runs on without it, so this check is what catches it.
func (v *VPCS) waitReady(ctx context.Context, p *vpcsProc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	v.mu.Lock()
	console := v.console
	v.mu.Unlock()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		consoleUp := listening("tcp", console)
		nicUp := listening("udp", int(p.nic.Port()))
		if consoleUp && nicUp {
			return nil
		}
		select {
		case <-p.exited:
			msg := v.logTail()
			if strings.Contains(msg, "bind") || strings.Contains(msg, "in use") {
				return fmt.Errorf("vpcs: %w: %s", errConsoleTaken, msg)
			}
			return fmt.Errorf("vpcs exited at start: %s", msg)
		case <-ctx.Done():
			if consoleUp {
				return fmt.Errorf("vpcs: %w: port %d", errNICTaken, p.nic.Port())
			}
			return fmt.Errorf("vpcs did not open console port %d within %v: %s", console, readyTimeout, v.logTail())
		case <-tick.C:
		}
	}
}

// logTail returns the last lines of vpcs.log, for error messages.
func (v *VPCS) logTail() string {
	data, _ := os.ReadFile(filepath.Join(v.cfg.Dir, "vpcs.log"))
	data = bytes.TrimSpace(data)
	if len(data) > 300 {
		data = data[len(data)-300:]
	}
	if len(data) == 0 {
		return "(no output)"
	}
	return strings.Join(strings.Fields(string(data)), " ")
}

// reap waits for a running process to end, then marks the node stopped.
func (v *VPCS) reap(p *vpcsProc) {
	<-p.exited
	v.mu.Lock()
	if v.proc == p {
		v.proc = nil
	}
	v.mu.Unlock()
	close(p.reaped) // before OnStop: Stop's caller may hold locks OnStop takes
	v.log.Info("vpcs stopped", "pid", p.cmd.Process.Pid)
	if v.cfg.OnStop != nil {
		v.cfg.OnStop()
	}
}

// Stop ends the process (SIGTERM, then SIGKILL after 3 s) and waits for it.
func (v *VPCS) Stop(ctx context.Context) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	v.mu.Lock()
	p := v.proc
	v.mu.Unlock()
	if p == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		kill(p)
	case <-ctx.Done():
		kill(p)
	}
	<-p.reaped // so Status says stopped when Stop returns
	return nil
}

// kill ends a process group at once and waits for the leader.
func kill(p *vpcsProc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// freePort returns a port that was free on all IPv4 addresses a moment ago.
// The caller hands it to a process that binds it itself, so there is a
// window in which another program may take it; callers check and retry.
func freePort(network string) (int, error) {
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			return 0, fmt.Errorf("find a free tcp port: %w", err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port, nil
	default:
		c, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return 0, fmt.Errorf("find a free udp port: %w", err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
}

// listening reports whether a socket of this host's network namespace is
// bound to port: a TCP socket in LISTEN state, or any UDP socket. It reads
// /proc/net/{tcp,tcp6,udp,udp6}.
func listening(network string, port int) bool {
	files := []string{"/proc/net/tcp", "/proc/net/tcp6"}
	wantState := "0A" // TCP_LISTEN
	if network == "udp" {
		files = []string{"/proc/net/udp", "/proc/net/udp6"}
		wantState = "07" // TCP_CLOSE: how an unconnected UDP socket shows
	}
	hexPort := fmt.Sprintf(":%04X", port)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], hexPort) && fields[3] == wantState {
				f.Close()
				return true
			}
		}
		f.Close()
	}
	return false
}
