// Command init is PID 1 of labtap's docker nodes, bind-mounted read-only at
// /labtap/init and put before the image's entrypoint, as GNS3's own init
// is. Build it static: CGO_ENABLED=0 go build -o bin/labtap-init
// ./agent/node/docker/init.
//
// It needs no capability beyond the Engine's defaults: the agent binds the
// node's persistent directories over their paths (after copying the image's
// content there) and brings lo and the interfaces up from outside. It
// waits for exactly the interfaces eth0…eth<N-1> the agent
// plumbs (N from LABTAP_ADAPTERS, else GNS3_MAX_ETHERNET; at most 30 s, then
// it goes on with a warning on the console), brings them up, writes the
// GNS3_EXTRA_HOSTS block into /etc/hosts, runs `ifup -a -f` on
// /etc/network/interfaces where the image has ifup, and runs the command it was given
// as a child: it forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 and
// SIGWINCH to it, reaps every orphan, and exits with the child's status, so
// that `docker stop` ends a well-behaved image at once (a shell as PID 1
// ignores SIGTERM and waits out the 5 s).
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const waitInterfaces = 30 * time.Second

// runningName is the name PID 1 takes once the command runs: the agent
// reads it in /proc/<pid>/comm to know that a start is done, and whether
// the command ended at once (docker.runningName).
const runningName = "labtap-running"

// init keeps main on the process's first thread, whose name is the
// process's (markRunning).
func init() { runtime.LockOSThread() }

// markRunning renames PID 1 runningName.
func markRunning() {
	if p, err := unix.BytePtrFromString(runningName); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "labtap init: no command to run")
		os.Exit(2)
	}
	_ = setUp("lo") // the agent did it; an older agent may not have
	names := interfaces()
	if missing := waitFor(names, waitInterfaces); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "labtap init: %s did not appear within %v; going on without\r\n", strings.Join(missing, ", "), waitInterfaces)
	}
	for _, n := range names {
		_ = setUp(n) // likewise, and without CAP_NET_ADMIN it fails harmlessly
	}
	if err := extraHosts(os.Getenv("GNS3_EXTRA_HOSTS")); err != nil {
		fmt.Fprintf(os.Stderr, "labtap init: /etc/hosts: %v\r\n", err)
	}
	ifup()
	os.Exit(run(os.Args[1:]))
}

// interfaces returns eth0…eth<N-1>.
func interfaces() []string {
	n, err := strconv.Atoi(os.Getenv("LABTAP_ADAPTERS"))
	if err != nil {
		last, ok := strings.CutPrefix(os.Getenv("GNS3_MAX_ETHERNET"), "eth")
		if i, err := strconv.Atoi(last); ok && err == nil {
			n = i + 1
		}
	}
	names := make([]string, 0, max(n, 0))
	for i := range max(n, 0) {
		names = append(names, "eth"+strconv.Itoa(i))
	}
	return names
}

// waitFor waits until every interface exists, and returns those that did
// not appear in time.
func waitFor(names []string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var missing []string
		for _, n := range names {
			if _, err := os.Stat("/sys/class/net/" + n); err != nil {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setUp sets IFF_UP on an interface.
func setUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

const (
	hostsStart = "# GNS3_EXTRA_HOSTS_START"
	hostsEnd   = "# GNS3_EXTRA_HOSTS_END"
)

// extraHosts replaces the extra hosts block of /etc/hosts with block, and
// gives an empty /etc/hosts the usual local names.
func extraHosts(block string) error {
	data, err := os.ReadFile("/etc/hosts")
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(data)
	if strings.TrimSpace(text) == "" {
		h, _ := os.Hostname()
		text = fmt.Sprintf("127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n", h)
	}
	if i := strings.Index(text, hostsStart); i >= 0 {
		if j := strings.Index(text[i:], hostsEnd); j >= 0 {
			text = text[:i] + strings.TrimPrefix(text[i+j+len(hostsEnd):], "\n")
		}
	}
	if block != "" {
		text = strings.TrimRight(text, "\n") + "\n" + hostsStart + "\n" + strings.TrimRight(block, "\n") + "\n" + hostsEnd + "\n"
	}
	if text == string(data) {
		return nil
	}
	return os.WriteFile("/etc/hosts", []byte(text), 0o644)
}

// releaseTerminal gives up PID 1's controlling terminal, if it has one.
// The kernel sends the SIGHUP and SIGCONT of a terminal hang-up to PID 1's
// process group as it does: both are ignored until run asks for them.
func releaseTerminal() {
	if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err != nil {
		return // stdin is no terminal
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGCONT)
	_ = unix.IoctlSetInt(0, unix.TIOCNOTTY, 0)
}

// run runs the command as PID 1's child and returns its exit status.
func run(argv []string) int {
	// The child takes the terminal as its controlling one: its shell gets
	// job control and ^C as on any console. The Engine made it PID 1's, and
	// taking another session's terminal needs CAP_SYS_ADMIN, which a node
	// does not have: PID 1 lets go of it first.
	releaseTerminal() // before Notify: it ignores SIGHUP until then
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCHLD)
	command := func() *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		return cmd
	}
	cmd := command()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		cmd = command() // no terminal on stdin: start it plainly (a Cmd starts once)
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "labtap init: %v\r\n", err)
			return 127
		}
	}
	child := cmd.Process.Pid
	markRunning()
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = syscall.Kill(child, sig.(syscall.Signal))
			if sig == syscall.SIGTERM {
				// An interactive shell (the console of many images) ignores
				// SIGTERM but ends on a hang-up, as when its terminal goes.
				_ = syscall.Kill(child, syscall.SIGHUP)
			}
			continue
		}
		// Reap every child that ended: the command, and orphans handed to PID 1.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == child {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
	}
	return 0
}
