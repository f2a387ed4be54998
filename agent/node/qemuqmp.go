package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// QEMU's monitor (QMP) of a running node: the commands the runner sends.

// qemuMonitor is the QMP connection to one QEMU process.
type qemuMonitor struct {
	mon *qmp.SocketMonitor
}

// dialQMP connects to QEMU's QMP socket. A socket QEMU does not listen on
// yet is dial's error as it is (ECONNREFUSED, ENOENT: try again).
func dialQMP(sock string) (*qemuMonitor, error) {
	mon, err := qmp.NewSocketMonitor("unix", sock, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := mon.Connect(); err != nil {
		return nil, fmt.Errorf("QMP: %w", err)
	}
	return &qemuMonitor{mon: mon}, nil
}

// run sends one raw QMP command and returns its raw reply.
func (m *qemuMonitor) run(cmd []byte) ([]byte, error) { return m.mon.Run(cmd) }

// execute runs a QMP command without arguments (cont, stop,
// system_powerdown).
func (m *qemuMonitor) execute(command string) error {
	cmd, _ := json.Marshal(map[string]any{"execute": command})
	_, err := m.mon.Run(cmd)
	return err
}

// setLink sets the carrier of an adapter's NIC (its netdev gns3-N).
func (m *qemuMonitor) setLink(adapter int, up bool) error {
	cmd, _ := json.Marshal(map[string]any{"execute": "set_link", "arguments": map[string]any{"name": fmt.Sprintf("gns3-%d", adapter), "up": up}})
	if _, err := m.mon.Run(cmd); err != nil {
		return fmt.Errorf("qemu: set_link gns3-%d: %w", adapter, err)
	}
	return nil
}

// saveState pauses the VM and saves its state into its qcow2 disks as
// savedState (HMP savevm through QMP: QEMU 7.2 has no QMP command of its
// own for it outside jobs). QEMU words its failures in the command's
// reply.
func (m *qemuMonitor) saveState() error {
	if err := m.execute("stop"); err != nil {
		return err
	}
	cmd, _ := json.Marshal(map[string]any{"execute": "human-monitor-command", "arguments": map[string]any{"command-line": "savevm " + savedState}})
	raw, err := m.mon.Run(cmd)
	if err != nil {
		return err
	}
	var reply struct {
		Return string `json:"return"`
	}
	_ = json.Unmarshal(raw, &reply)
	if s := strings.TrimSpace(reply.Return); s != "" {
		return errors.New(s)
	}
	return nil
}

// close disconnects from QMP.
func (m *qemuMonitor) close() { m.mon.Disconnect() }
