package node

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// child is a process a runner started: exited is closed once it is gone
// (whoever waits for it closes it). VPCS, QEMU and QEMU's helpers (swtpm,
// cpulimit) are children.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startChild starts cmd and waits for it in the background; done, when
// set, runs once it has exited, before exited is closed.
func startChild(cmd *exec.Cmd, done func(error)) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return watchChild(cmd, done), nil
}

// watchChild waits in the background for cmd, already started (on a
// pty, say), as startChild does.
func watchChild(cmd *exec.Cmd, done func(error)) *child {
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if done != nil {
			done(err)
		}
		close(c.exited)
	}()
	return c
}

// end stops the child: SIGTERM, then SIGKILL if it is still there after
// grace (at once when grace is 0), and waits until it is gone.
func (c *child) end(grace time.Duration) {
	if grace > 0 {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.exited:
			return
		case <-t.C:
		}
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// listenConsole binds a node's console port, *port on host, or another
// one from free when someone took it while the node was stopped; *port,
// guarded by mu, then names the new one (the node reports it).
func listenConsole(mu *sync.Mutex, port *int, host string, free func() (net.Listener, error)) (net.Listener, error) {
	mu.Lock()
	want := *port
	mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(want)))
	if err == nil {
		return ln, nil
	}
	if ln, err = free(); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mu.Lock()
	*port = ln.Addr().(*net.TCPAddr).Port
	mu.Unlock()
	return ln, nil
}
