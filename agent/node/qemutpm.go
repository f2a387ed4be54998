package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/labtap/labtap/internal/sandbox"
)

// A QEMU node's TPM (the tpm property): swtpm, beside QEMU, as GNS3 2.2
// runs it.

// swtpmVersion matches "TPM emulator version 0.7.1".
var swtpmVersion = regexp.MustCompile(`version (\d+)\.(\d+)`)

// qemuTPM is a node's TPM: swtpm's state in the node's folder (dir), its
// control socket in the private runtime folder (runtimeDir), swtpm run
// confined by sandbox.
type qemuTPM struct {
	dir, runtimeDir string
	sandbox         *sandbox.Sandbox
}

// start runs swtpm for the VM, confined by spec: a TPM 2.0 whose state
// lives in the node's folder (tpm-state). It ends when QEMU disconnects
// (--terminate). GNS3 wants swtpm 0.8; Debian 12 ships 0.7.1, which
// serves QEMU 7.2 well, so 0.7 is the floor here. It returns swtpm and
// the arguments that give QEMU the TPM.
func (t qemuTPM) start(ctx context.Context, spec sandbox.Spec) (*child, []string, error) {
	c, sock, err := t.run(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	return c, []string{"-chardev", "socket,id=chrtpm,path=" + commas(sock),
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0"}, nil
}

// run runs swtpm and waits for its control socket.
func (t qemuTPM) run(ctx context.Context, spec sandbox.Spec) (*child, string, error) {
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		return nil, "", errors.New("swtpm is required for the TPM: install it (Debian package swtpm)")
	}
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	m := swtpmVersion.FindSubmatch(out)
	if m == nil {
		return nil, "", fmt.Errorf("swtpm: no version in %q", bytes.TrimSpace(out))
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major == 0 && minor < 7 {
		return nil, "", fmt.Errorf("swtpm version 0.7.0 or above must be installed (found %s.%s)", m[1], m[2])
	}
	state := filepath.Join(t.dir, "tpm-state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, "", fmt.Errorf("swtpm: %w", err)
	}
	sock := filepath.Join(t.runtimeDir, "swtpm.sock")
	os.Remove(sock)
	cmd, err := t.sandbox.Command(spec, bin, "socket", "--tpm2", "--terminate",
		"--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+sock,
		"--log", "file="+filepath.Join(t.dir, "swtpm.log")+",level=1")
	if err != nil {
		return nil, "", fmt.Errorf("swtpm: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c, err := startChild(cmd, nil)
	if err != nil {
		return nil, "", fmt.Errorf("swtpm: %w", err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(sock); err == nil {
			return c, sock, nil
		}
		select {
		case <-c.exited:
			return nil, "", fmt.Errorf("swtpm exited: %s", bytes.TrimSpace(stderr.Bytes()))
		case <-deadline.C:
			c.end(0)
			return nil, "", errors.New("swtpm opened no control socket within 10s")
		case <-tick.C:
		}
	}
}
