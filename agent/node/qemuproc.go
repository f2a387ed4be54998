package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// One run of a QEMU node: the process, its helpers, and the console and
// QMP connections to it.

// qemuProc is one QEMU process and what the runner holds of it.
type qemuProc struct {
	*child
	cmdline string
	nics    []netip.AddrPort // where QEMU listens, per adapter
	mon     *qemuMonitor
	con     net.Conn // the serial chardev, nil for VNC
	console *consoleServer
	helpers []*child // swtpm, cpulimit: ended once QEMU is gone
	reaped  chan struct{}
	err     error // the process's exit status, once exited
}

// startTimeout bounds how long QEMU may take to open its sockets: under
// TCG on a busy host it can take seconds.
const startTimeout = 60 * time.Second

// qemuReplayBytes is how much console output a new telnet client gets
// first: enough for a whole boot log.
const qemuReplayBytes = 256 << 10

// connect waits for QEMU's sockets and connects to them: the serial
// console first (the VM is paused, so nothing it prints is lost), served
// as telnet on the listener listen gives, then QMP. listen nil: the
// console is not telnet (VNC or none), and conSock is not dialled.
func (p *qemuProc) connect(ctx context.Context, conSock, qmpSock string, listen func() (net.Listener, error)) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// QEMU creates a socket's file (bind) a moment before it listens:
	// until then a connection is refused, and is tried again.
	retry := func(what string, dial func() error) error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			err := dial()
			if err == nil {
				return nil
			}
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("%s: %w", what, err)
			}
			select {
			case <-p.exited:
				return fmt.Errorf("QEMU exited: %v", p.err)
			case <-ctx.Done():
				return fmt.Errorf("QEMU opened no %s within %v", what, startTimeout)
			case <-tick.C:
			}
		}
	}
	if listen != nil {
		var c net.Conn
		err := retry("console socket", func() (err error) {
			c, err = net.Dial("unix", conSock)
			return err
		})
		if err != nil {
			return err
		}
		p.con = c
		ln, err := listen()
		if err != nil {
			c.Close()
			return err
		}
		p.console = serveConsoleWith(ln, c, nil, ConsoleOptions{Replay: qemuReplayBytes, KeepBang: true})
	}
	return retry("QMP socket", func() error {
		mon, err := dialQMP(qmpSock)
		if err != nil {
			return err
		}
		p.mon = mon
		return nil
	})
}

// abort ends a QEMU that failed to start, and its helpers. QEMU that
// refuses its arguments exits by itself: it gets 3 s to say why.
func (p *qemuProc) abort() {
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
	}
	p.end(0)
	if p.console != nil {
		p.console.Close()
	}
	for _, h := range p.helpers {
		h.end(time.Second)
	}
}

// release lets go of what the runner held of an exited QEMU: its
// console, QMP and helpers.
func (p *qemuProc) release() {
	if p.console != nil {
		p.console.Close()
	}
	if p.mon != nil {
		p.mon.close()
	}
	for _, h := range p.helpers {
		h.end(time.Second)
	}
}

// qemuLogText is the qemu.log of the node folder dir without its first
// line (the command), bounded.
func qemuLogText(dir string) string {
	data, _ := os.ReadFile(filepath.Join(dir, "qemu.log"))
	if i := bytes.Index(data, []byte("Execution log:\n")); i >= 0 {
		data = data[i+len("Execution log:\n"):]
	}
	data = bytes.TrimSpace(data)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}
