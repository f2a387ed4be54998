// Command init is PID 1 of labtap's docker nodes, bind-mounted read-only at
// /labtap/init and put before the image's entrypoint, as GNS3's own init
// is. Build it static: CGO_ENABLED=0 go build -o bin/labtap-init
// ./agent/node/docker/init.
//
// It mounts the node's persistent directories (GNS3_VOLUMES, kept in the
// node's directory and bound at /gns3volumes<path>) over their paths, the
// first time after copying the image's content there; brings lo up, waits
// for exactly the interfaces eth0…eth<N-1> the agent
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const waitInterfaces = 30 * time.Second

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "labtap init: no command to run")
		os.Exit(2)
	}
	volumes(os.Getenv("GNS3_VOLUMES"))
	_ = setUp("lo")
	names := interfaces()
	if missing := waitFor(names, waitInterfaces); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "labtap init: %s did not appear within %v; going on without\r\n", strings.Join(missing, ", "), waitInterfaces)
	}
	for _, n := range names {
		_ = setUp(n)
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

// run runs the command as PID 1's child and returns its exit status.
func run(argv []string) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCHLD)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The child keeps the terminal as its controlling one: its shell gets
	// job control and ^C as on any console.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		cmd.SysProcAttr = nil // no terminal on stdin: start it plainly
		if err = cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "labtap init: %v\r\n", err)
			return 127
		}
	}
	child := cmd.Process.Pid
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
