package node

import (
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

	"github.com/creack/pty"
	"github.com/labtap/labtap/internal/sandbox"
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
	// Name is the node's name, which VPCS takes as its own at start
	// (otherwise every VPCS calls itself VPCS1).
	Name string
	// Agent is where VPCS sends its frames: the agent's socket for the
	// node's Ethernet0. It must be an IPv4 address (VPCS takes no names).
	Agent netip.AddrPort
	// ConsoleHost is the address the console listens on; empty means
	// 127.0.0.1.
	ConsoleHost string
	// Console is the console's TCP port; 0 picks a free one.
	// ConsolePorts, when set, is the range [lo, hi] a picked port comes
	// from (so a container can publish it).
	ConsolePorts [2]int
	Console      int
	// ConsoleGate, when set, wraps the console's listener (a
	// ConsoleGate bound to the node: ConsoleGate.Wrap).
	ConsoleGate func(net.Listener) net.Listener
	// DeniedPorts are TCP ports the console's rlogin may not reach: the
	// agent's and the controller's own.
	DeniedPorts []int
	// Sandbox confines the process (sandbox.Sandbox.Command); nil runs it
	// unconfined, with a scrubbed environment.
	Sandbox *sandbox.Sandbox
	Logger  *slog.Logger
	// OnStop, if set, is called (from the runner's goroutine) each time the
	// process ends, whether asked to or not, before Stop returns. It must not
	// wait for whoever called Stop.
	OnStop func()
}

// VPCS runs a VPCS process: one virtual PC with one Ethernet port whose
// frames travel over UDP, and a telnet console.
//
// VPCS is run on a pseudo-terminal, not with its own "-p" console: that
// console listens on every interface with no authentication, and VPCS runs
// any host command typed after '!', so "-p" would open a shell on the
// agent's host to its whole network. The agent serves the console itself,
// on ConsoleHost only, and filters '!' out.
type VPCS struct {
	cfg VPCSConfig
	log *slog.Logger

	ops sync.Mutex // serialises Start and Stop

	mu      sync.Mutex // guards the fields below
	console int
	proc    *vpcsProc // nil while stopped
}

type vpcsProc struct {
	*child
	tty     *os.File // the pty master
	console *consoleServer
	nic     netip.AddrPort // where VPCS listens (its -s port)
	cmdline string
	reaped  chan struct{} // closed once the node is marked stopped
}

// NewVPCS prepares a VPCS node; nothing runs until Start.
func NewVPCS(cfg VPCSConfig) (*VPCS, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConsoleHost == "" {
		cfg.ConsoleHost = "127.0.0.1"
	}
	if !cfg.Agent.Addr().Is4() {
		return nil, fmt.Errorf("vpcs: agent address %v is not IPv4", cfg.Agent)
	}
	if cfg.MACIndex < 0 || cfg.MACIndex > 255 {
		return nil, fmt.Errorf("vpcs: MAC index %d out of 0-255", cfg.MACIndex)
	}
	v := &VPCS{cfg: cfg, log: cfg.Logger, console: cfg.Console}
	if v.console == 0 {
		ln, err := v.listenFree()
		if err != nil {
			return nil, fmt.Errorf("vpcs: console: %w", err)
		}
		v.console = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	return v, nil
}

// listenFree listens on a free console port: any, or the first free one of
// ConsolePorts.
func (v *VPCS) listenFree() (net.Listener, error) {
	lo, hi := v.cfg.ConsolePorts[0], v.cfg.ConsolePorts[1]
	if lo <= 0 {
		return net.Listen("tcp", net.JoinHostPort(v.cfg.ConsoleHost, "0"))
	}
	for p := lo; p <= hi; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort(v.cfg.ConsoleHost, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free console port in %d-%d", lo, hi)
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

// ResetConsole disconnects every client of the node's console (GNS3's
// "reset console": a stuck telnet session); new ones connect as before.
func (v *VPCS) ResetConsole() {
	v.mu.Lock()
	p := v.proc
	v.mu.Unlock()
	if p != nil {
		p.console.dropClients()
	}
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

// startAttempts bounds retries when a UDP port picked for VPCS is taken by
// someone else between the pick and VPCS's bind.
const startAttempts = 4

// readyTimeout bounds how long a starting VPCS may take to be usable.
const readyTimeout = 10 * time.Second

// Start runs VPCS and returns once its UDP port is bound and it shows its
// prompt.
func (v *VPCS) Start(ctx context.Context) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	if v.Status() == Started {
		return nil
	}
	if err := os.MkdirAll(v.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("vpcs: %w", err)
	}
	ln, err := v.listenConsole()
	if err != nil {
		return err
	}
	var lastErr error
	for range startAttempts {
		nicPort, err := freeUDPPort()
		if err != nil {
			ln.Close()
			return err
		}
		p, err := v.launch(nicPort, ln)
		if err != nil {
			ln.Close()
			return err
		}
		why := v.waitReady(ctx, p)
		if why == nil {
			if name := pcName(v.cfg.Name, v.cfg.Program.Version); name != "" {
				fmt.Fprintf(p.tty, "set pcname %s\r", name)
			}
			v.mu.Lock()
			v.proc = p
			v.mu.Unlock()
			go v.reap(p)
			v.log.Info("vpcs started", "pid", p.cmd.Process.Pid, "console", v.console, "nic", p.nic,
				"sandbox", v.cfg.Sandbox.Layers().String(), "uid", v.cfg.Sandbox.UID(v.cfg.Dir))
			return nil
		}
		p.end(0)
		lastErr = why
		if !errors.Is(why, errNICTaken) {
			return why
		}
		if ln, err = v.listenConsole(); err != nil { // end closed it
			return err
		}
	}
	return lastErr
}

var errNICTaken = errors.New("UDP port already in use")

// pcName is the node name as VPCS can take it: one word of printable
// ASCII, at most 6 characters for VPCS 0.5 (it refuses longer ones), 12
// otherwise; "" when nothing of it fits.
func pcName(name, version string) string {
	word := strings.Map(func(r rune) rune {
		if r > ' ' && r < 0x7f {
			return r
		}
		return -1
	}, name)
	limit := 12
	if strings.HasPrefix(version, "0.5") {
		limit = 6
	}
	if len(word) > limit {
		word = word[:limit]
	}
	return word
}

// listenConsole binds the console port, or another one when someone took
// it while the node was stopped (the node then reports the new port).
func (v *VPCS) listenConsole() (net.Listener, error) {
	ln, err := listenConsole(&v.mu, &v.console, v.cfg.ConsoleHost, v.listenFree)
	if err == nil && v.cfg.ConsoleGate != nil {
		ln = v.cfg.ConsoleGate(ln)
	}
	if err != nil {
		return nil, fmt.Errorf("vpcs: %w", err)
	}
	return ln, nil
}

// launch starts the process on a pty and serves its console on ln.
func (v *VPCS) launch(nicPort int, ln net.Listener) (*vpcsProc, error) {
	args := []string{
		"-i", "1", // one virtual PC
		"-m", strconv.Itoa(v.cfg.MACIndex),
		"-s", strconv.Itoa(nicPort),
		"-c", strconv.Itoa(int(v.cfg.Agent.Port())),
		"-t", v.cfg.Agent.Addr().String(),
	}
	if v.cfg.Program.noRelay {
		args = append(args, "-R")
	}
	// VPCS runs the '!' lines of the scripts it loads on the host: the
	// sandbox keeps them to the node's user and folder.
	cmd, err := v.cfg.Sandbox.Command(sandbox.Spec{Dir: v.cfg.Dir, TimerSlack: VPCSTimerSlack, Pdeathsig: syscall.SIGTERM},
		v.cfg.Program.Path, args...)
	if err != nil {
		return nil, fmt.Errorf("vpcs: %w", err)
	}
	// pty.Start makes the process a session leader with the pty as its
	// controlling terminal. An agent that dies takes its nodes along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	tty, err := startWithTimerSlack(VPCSTimerSlack, func() (*os.File, error) {
		return pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 120})
	})
	if err != nil {
		return nil, fmt.Errorf("vpcs: start %s: %w", v.cfg.Program.Path, err)
	}
	logf, err := os.Create(filepath.Join(v.cfg.Dir, "vpcs.log"))
	if err != nil {
		logf = nil // the log is a convenience; the console works without it
	}
	p := &vpcsProc{
		tty:     tty,
		console: serveConsole(ln, teeTerm{tty, logf}, newLineGuard(v.cfg.Dir, v.cfg.DeniedPorts)),
		nic:     netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(nicPort)),
		cmdline: strings.Join(append([]string{v.cfg.Program.Path}, args...), " "),
		reaped:  make(chan struct{}),
	}
	p.child = watchChild(cmd, func(error) {
		tty.Close() // ends the console's reader
		p.console.Close()
		if logf != nil {
			logf.Close()
		}
	})
	return p, nil
}

// teeTerm is the pty as the console sees it, with everything VPCS prints
// also written to vpcs.log.
type teeTerm struct {
	tty *os.File
	log *os.File
}

func (t teeTerm) Read(b []byte) (int, error) {
	n, err := t.tty.Read(b)
	if n > 0 && t.log != nil {
		t.log.Write(b[:n])
	}
	return n, err
}

func (t teeTerm) Write(b []byte) (int, error) { return t.tty.Write(b) }

// waitReady waits until VPCS has bound its UDP port and printed its prompt.
// The port is checked in the kernel's socket table: VPCS does not fail
// when its UDP port is taken, it runs on without one, so this check is what
// catches it.
func (v *VPCS) waitReady(ctx context.Context, p *vpcsProc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	bound, forget := udpWatcher.bound(int(p.nic.Port()))
	defer forget()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	nicUp := false
	for {
		if nicUp && p.console.sawPrompt() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("vpcs exited at start: %s", v.logTail())
		case <-ctx.Done():
			if !nicUp {
				return fmt.Errorf("vpcs: %w: port %d", errNICTaken, p.nic.Port())
			}
			return fmt.Errorf("vpcs showed no prompt within %v: %s", readyTimeout, v.logTail())
		case <-bound:
			nicUp = true
			bound = nil // a nil channel: the select waits on the others
		case <-tick.C:
		}
	}
}

// logTail returns the last of vpcs.log, for error messages.
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
	v.log.Info("vpcs stopped", "pid", p.cmd.Process.Pid)
	if v.cfg.OnStop != nil {
		v.cfg.OnStop()
	}
	close(p.reaped)
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
	p.end(3 * time.Second)
	<-p.reaped // so Status says stopped, and OnStop has run, when Stop returns
	return nil
}

// freeUDPPort returns a UDP port that was free on all IPv4 addresses a
// moment ago. VPCS binds it itself, so another program may take it first;
// waitReady notices and Start retries.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		return 0, fmt.Errorf("find a free udp port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}
