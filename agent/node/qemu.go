package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Qemu runs a QEMU virtual machine: one process, each NIC a UDP tunnel to
// the agent (-netdev socket), the serial console and QMP on unix sockets in
// a private folder; the agent serves the serial console as telnet.
//
// Qemu itself is the node's lifecycle (start, suspend, stop, update, the
// console port and the links' state). Each part of a run has its own type
// and file: the configuration and property defaults (qemuconfig.go), what
// one start is made from and its command line (qemuSetup, qemuargs.go),
// the images (qemuimages.go), the disks (qemudisks.go, qemuchain.go), the
// saved state (qemusavedstate.go), the config disk (qemuconfigdisk.go),
// swtpm (qemutpm.go), OVMF (qemuuefi.go), priority and cpulimit
// (qemupriority.go), the sandbox (qemusandbox.go), QMP (qemuqmp.go) and
// the process with its console and QMP connections (qemuproc.go).
type Qemu struct {
	cfg QemuConfig
	log *slog.Logger

	ops sync.Mutex // serialises Start, Stop and Update

	mu      sync.Mutex // guards the fields below
	console int
	links   []bool // wanted link state per adapter (set_link)
	proc    *qemuProc
	binary  string // resolved qemu_path
	paused  bool
	md5s    map[string]any // <image>_md5sum members
}

// NewQemu prepares a QEMU node; nothing runs until Start.
func NewQemu(cfg QemuConfig) (*Qemu, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConsoleHost == "" {
		cfg.ConsoleHost = "127.0.0.1"
	}
	if cfg.OnWarning == nil {
		cfg.OnWarning = func(string) {}
	}
	q := &Qemu{cfg: cfg, log: cfg.Logger, links: make([]bool, len(cfg.Adapters))}
	bin, err := resolveQemuBinary(cfg.Props)
	if err != nil {
		return nil, err
	}
	q.binary = bin
	if _, err := q.setup().options(); err != nil {
		return nil, err
	}
	images := qemuImages(cfg.ImagesDir)
	if err := images.checkNames(cfg.Props); err != nil {
		return nil, err
	}
	if err := q.pickConsole(); err != nil {
		return nil, err
	}
	q.md5s = images.md5s(cfg.Props, cfg.ImageSums)
	return q, nil
}

// setup is what a start is made from now. The caller holds q.ops (or
// owns q alone).
func (q *Qemu) setup() qemuSetup {
	q.mu.Lock()
	defer q.mu.Unlock()
	return qemuSetup{cfg: q.cfg, binary: q.binary, console: q.console}
}

// current returns the running QEMU (nil while stopped) and whether it is
// paused.
func (q *Qemu) current() (p *qemuProc, paused bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.proc, q.paused
}

// setPaused records that p is paused or runs, unless it is gone.
func (q *Qemu) setPaused(p *qemuProc, paused bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc == p {
		q.paused = paused
	}
}

// pickConsole picks the console port: any free port for telnet, one from
// 5900 up for VNC (the display number is the port minus 5900).
func (q *Qemu) pickConsole() error {
	switch q.cfg.Props.consoleType() {
	case "none":
		q.console = 0
		return nil
	case "vnc":
		for port := 5900; port < 10000; port++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(q.cfg.ConsoleHost, strconv.Itoa(port)))
			if err == nil {
				ln.Close()
				q.console = port
				return nil
			}
		}
		return errors.New("qemu: no free VNC port from 5900 to 9999")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(q.cfg.ConsoleHost, "0"))
	if err != nil {
		return fmt.Errorf("qemu: console: %w", err)
	}
	q.console = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return nil
}

// Status returns Started, Stopped or Suspended.
func (q *Qemu) Status() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.proc == nil:
		return Stopped
	case q.paused:
		return "suspended"
	}
	return Started
}

// Console returns the console port and type.
func (q *Qemu) Console() (int, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.console, q.cfg.Props.consoleType()
}

// CommandLine returns the running command, "" while stopped.
func (q *Qemu) CommandLine() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc == nil {
		return ""
	}
	return q.proc.cmdline
}

// NIC returns where QEMU receives the frames of adapter (port 0).
func (q *Qemu) NIC(adapter, port int) (netip.AddrPort, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc == nil || port != 0 || adapter < 0 || adapter >= len(q.proc.nics) {
		return netip.AddrPort{}, false
	}
	return q.proc.nics[adapter], true
}

// Properties reports what the runner computed: the absolute qemu_path and
// the md5 sums of the image files (GNS3's <image>_md5sum members).
func (q *Qemu) Properties() map[string]any {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]any{"qemu_path": q.binary}
	for k, v := range q.md5s {
		out[k] = v
	}
	return out
}

// Update takes new properties and adapters; they apply at the next start.
// Adapters cannot change while the VM runs.
func (q *Qemu) Update(props []byte, adapters []QemuAdapter) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	next := q.cfg.Props
	if err := next.Merge(props); err != nil {
		return err
	}
	running, _ := q.current()
	if running != nil && len(adapters) != len(q.cfg.Adapters) {
		return fmt.Errorf("%q must be stopped to change its number of adapters", q.cfg.Name)
	}
	if _, err := QemuOptions(next.Options, q.setup().optionVars()); err != nil {
		return err
	}
	images := qemuImages(q.cfg.ImagesDir)
	if err := images.checkNames(next); err != nil {
		return err
	}
	bin, err := resolveQemuBinary(next)
	if err != nil {
		return err
	}
	old := q.cfg
	q.cfg.Props, q.cfg.Adapters = next, adapters
	md5s := images.md5s(next, q.cfg.ImageSums)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.binary, q.md5s = bin, md5s
	links := make([]bool, len(adapters))
	copy(links, q.links)
	q.links = links
	if running == nil && old.Props.ConsoleType != next.ConsoleType {
		return q.pickConsole()
	}
	return nil
}

// SetLink sets the carrier of an adapter's NIC (QMP set_link): up while a
// link that is not suspended uses it. It is remembered while the VM is
// stopped and applied at start.
func (q *Qemu) SetLink(adapter int, up bool) error {
	q.mu.Lock()
	if adapter < 0 || adapter >= len(q.links) {
		q.mu.Unlock()
		return fmt.Errorf("qemu: no adapter %d", adapter)
	}
	q.links[adapter] = up
	p := q.proc
	q.mu.Unlock()
	if p == nil || !q.cfg.Props.replicate() {
		return nil
	}
	return p.mon.setLink(adapter, up)
}

// Start runs QEMU and returns once its console and QMP answer and the VM
// runs. A QEMU that fails to start is an error carrying its own message.
// A suspended VM resumes.
func (q *Qemu) Start(ctx context.Context) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	if p, paused := q.current(); p != nil {
		if paused {
			if err := p.mon.execute("cont"); err != nil {
				return fmt.Errorf("qemu: resume: %w", err)
			}
			q.setPaused(p, false)
		}
		return nil
	}
	var lastErr error
	for range startAttempts {
		p, err := q.launch(ctx)
		if err == nil {
			return nil
		}
		lastErr = err
		if p == nil || !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return lastErr
}

// Suspend pauses the VM (QMP stop).
func (q *Qemu) Suspend(ctx context.Context) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	p, _ := q.current()
	if p == nil {
		return fmt.Errorf("%q is not running", q.cfg.Name)
	}
	if err := p.mon.execute("stop"); err != nil {
		return fmt.Errorf("qemu: suspend: %w", err)
	}
	q.setPaused(p, true)
	return nil
}

// launch builds the command, starts QEMU paused (-S), connects the console
// and QMP, sets the links' state and lets the VM run.
func (q *Qemu) launch(ctx context.Context) (*qemuProc, error) {
	s := q.setup()
	pr := s.cfg.Props
	if err := os.MkdirAll(q.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	if err := os.MkdirAll(q.cfg.RuntimeDir, 0o700); err != nil {
		return nil, fmt.Errorf("qemu: runtime dir: %w", err)
	}
	if err := os.Chmod(q.cfg.RuntimeDir, 0o700); err != nil {
		return nil, fmt.Errorf("qemu: runtime dir: %w", err)
	}
	conSock := filepath.Join(q.cfg.RuntimeDir, "console.sock")
	qmpSock := filepath.Join(q.cfg.RuntimeDir, "qmp.sock")
	os.Remove(conSock)
	os.Remove(qmpSock)
	accel, warn := s.accel()
	if warn != "" {
		q.cfg.OnWarning(warn)
	}
	if warn := ramWarning(q.cfg.Name, pr.ramMB()); warn != "" {
		q.cfg.OnWarning(warn)
	}
	args, nics, helpers, err := s.command(ctx, accel, conSock, qmpSock)
	if err != nil {
		return nil, err
	}
	endHelpers := func() {
		for _, h := range helpers {
			h.end(time.Second)
		}
	}
	logPath := filepath.Join(q.cfg.Dir, "qemu.log")
	logf, err := os.Create(logPath)
	if err != nil {
		endHelpers()
		return nil, fmt.Errorf("qemu: %w", err)
	}
	cmdline := strings.Join(append([]string{s.binary}, args...), " ")
	fmt.Fprintf(logf, "Start QEMU with %s\n\nExecution log:\n", cmdline)
	spec := s.sandboxSpec(accel)
	spec.Nice = niceOf(pr.ProcessPriority) // from the start, as QEMU's own user may lower it
	cmd, err := q.cfg.Sandbox.Command(spec, s.binary, args...)
	if err != nil {
		logf.Close()
		endHelpers()
		return nil, fmt.Errorf("qemu: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and gone with the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &qemuProc{cmdline: cmdline, nics: nics, reaped: make(chan struct{}), helpers: helpers}
	p.child, err = startChild(cmd, func(err error) {
		p.err = err
		logf.Close()
	})
	if err != nil {
		logf.Close()
		endHelpers()
		return nil, fmt.Errorf("Could not start QEMU %s: %v", s.binary, err)
	}
	fail := func(err error) (*qemuProc, error) {
		p.abort()
		return p, fmt.Errorf("Could not start QEMU %s: %v\n%s", s.binary, err, qemuLogText(s.cfg.Dir))
	}
	var listen func() (net.Listener, error)
	if pr.consoleType() == "telnet" {
		listen = q.listenConsole
	}
	if err := p.connect(ctx, conSock, qmpSock, listen); err != nil {
		return fail(err)
	}
	if err := s.disks().checkOpened(p.mon.run); err != nil {
		return fail(err)
	}
	// Paused still: the priority is set on every thread QEMU has, and the
	// threads it makes later inherit it.
	if err := renice(p.pid(), niceOf(pr.ProcessPriority)); err != nil {
		q.cfg.OnWarning(fmt.Sprintf("%s: could not set the process priority %q: %v", q.cfg.Name, pr.ProcessPriority, err))
	}
	if pr.CPUThrottling > 0 {
		t, err := startThrottle(s.cfg.Sandbox, s.sandboxSpec(accel), p.pid(), pr.CPUThrottling)
		if err != nil {
			return fail(err)
		}
		p.helpers = append(p.helpers, t)
	}
	q.mu.Lock()
	links := append([]bool(nil), q.links...)
	q.mu.Unlock()
	if pr.replicate() {
		for i, up := range links {
			if !up {
				if err := p.mon.setLink(i, false); err != nil {
					return fail(err)
				}
			}
		}
	}
	if err := p.mon.execute("cont"); err != nil {
		return fail(err)
	}
	q.mu.Lock()
	q.proc, q.paused = p, false
	q.mu.Unlock()
	go q.reap(p)
	q.log.Info("qemu started", "pid", p.pid(), "console", q.console, "accel", accel,
		"sandbox", q.cfg.Sandbox.Layers().String(), "uid", q.cfg.Sandbox.UID(q.cfg.Dir))
	return p, nil
}

// listenConsole binds the telnet console port, or another one when someone
// took it while the node was stopped.
func (q *Qemu) listenConsole() (net.Listener, error) {
	ln, err := listenConsole(&q.mu, &q.console, q.cfg.ConsoleHost, func() (net.Listener, error) {
		return net.Listen("tcp", net.JoinHostPort(q.cfg.ConsoleHost, "0"))
	})
	if err == nil && q.cfg.ConsoleGate != nil {
		ln = q.cfg.ConsoleGate(ln)
	}
	return ln, err
}

// ResetConsole disconnects the telnet console's clients; the VM keeps
// running and the replay buffer is kept.
func (q *Qemu) ResetConsole() {
	if p, _ := q.current(); p != nil && p.console != nil {
		p.console.dropClients()
	}
}

// reap waits for the process to end, then marks the node stopped.
func (q *Qemu) reap(p *qemuProc) {
	<-p.exited
	p.release()
	if q.cfg.Props.configDisk() {
		if err := qemuConfigDisk(q.cfg.Dir).export(); err != nil {
			q.cfg.OnWarning(fmt.Sprintf("%s: %v", q.cfg.Name, err))
		}
	}
	q.mu.Lock()
	if q.proc == p {
		q.proc, q.paused = nil, false
	}
	q.mu.Unlock()
	os.RemoveAll(q.cfg.RuntimeDir)
	q.log.Info("qemu stopped", "pid", p.pid(), "status", p.err)
	if q.cfg.OnStop != nil {
		q.cfg.OnStop()
	}
	close(p.reaped)
}

// powerdownWait bounds an ACPI shutdown (on_close shutdown_signal).
const powerdownWait = 120 * time.Second

// Stop stops the VM as its on_close says and waits for QEMU to be gone:
// "power_off" SIGTERM, then SIGKILL after 3 s; "shutdown_signal" an ACPI
// power button press first (the guest shuts down cleanly) for up to
// 120 s or until ctx ends; "save_vm_state" pauses the VM and saves its
// state in its qcow2 disks first (the next start resumes it).
func (q *Qemu) Stop(ctx context.Context) error { return q.stop(ctx, q.cfg.Props.OnClose) }

// PowerOff stops the VM without waiting for its guest (a project
// closing): shutdown_signal becomes power_off, a saved state is still
// saved (GNS3).
func (q *Qemu) PowerOff(ctx context.Context) error {
	mode := q.cfg.Props.OnClose
	if mode == "shutdown_signal" {
		mode = "power_off"
	}
	return q.stop(ctx, mode)
}

func (q *Qemu) stop(ctx context.Context, mode string) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	p, _ := q.current()
	if p == nil {
		return nil
	}
	switch {
	case mode == "shutdown_signal" && p.mon != nil:
		if err := p.mon.execute("system_powerdown"); err == nil {
			t := time.NewTimer(powerdownWait)
			select {
			case <-p.exited:
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	case mode == "save_vm_state" && p.mon != nil:
		if err := p.mon.saveState(); err != nil {
			q.cfg.OnWarning(fmt.Sprintf("%s: could not save the VM state: %v", q.cfg.Name, err))
		}
	}
	p.end(3 * time.Second)
	<-p.reaped
	return nil
}

// PID returns the QEMU process id, 0 while stopped (for tests).
func (q *Qemu) PID() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc == nil {
		return 0
	}
	return q.proc.pid()
}
