package node

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/labtap/labtap/agent/imagesum"
	"github.com/labtap/labtap/internal/sandbox"
)

// What a QEMU node is made from: its configuration and GNS3 properties,
// with their defaults.

// QemuAdapter is one NIC of a QEMU node.
type QemuAdapter struct {
	MAC   string // e.g. 0c:47:9c:97:00:00
	Model string // QEMU -device model (e1000, virtio-net-pci, ...)
	// Agent is the agent's UDP address facing this adapter: QEMU sends the
	// adapter's frames there.
	Agent netip.AddrPort
}

// QemuConfig configures a QEMU node. The properties are GNS3's, already
// checked by the controller; the runner checks what touches the host
// again (options, image paths).
type QemuConfig struct {
	NodeID, Name string
	// ProjectID and ProjectDir are for the %project-id% and %project-path%
	// substitutions of options.
	ProjectID, ProjectDir string
	// Dir is the node's folder: qemu.log and the disks' overlays.
	Dir string
	// RuntimeDir is a private (0700) folder for the console and QMP
	// sockets; it is created and removed by the runner.
	RuntimeDir string
	// ImagesDir is where relative image names are found.
	ImagesDir string
	// ImageSums gives the md5 sums of the images (<image>_md5sum); nil
	// leaves them null.
	ImageSums *imagesum.Sums
	// Sandbox confines QEMU, swtpm and cpulimit (sandbox.Sandbox.Command);
	// nil runs them unconfined, with a scrubbed environment.
	Sandbox *sandbox.Sandbox
	// ConsoleHost is where the console (telnet or VNC) listens.
	ConsoleHost string
	// ConsoleGate, when set, wraps the telnet console's listener (a
	// ConsoleGate bound to the node: ConsoleGate.Wrap).
	ConsoleGate func(net.Listener) net.Listener
	// Accel is "auto" (KVM where its self-test passes, see KVMProblem,
	// else TCG), "kvm" or "tcg".
	Accel    string
	Props    QemuProps
	Adapters []QemuAdapter
	Logger   *slog.Logger
	// OnStop is called each time the process ends, asked to or not.
	OnStop func()
	// OnWarning tells the users of the node something in words (the
	// controller shows it as a log.warning notification).
	OnWarning func(msg string)
}

// QemuProps are the GNS3 2.2 properties of a QEMU node the runner uses,
// under GNS3's names.
type QemuProps struct {
	QemuPath          string `json:"qemu_path"`
	Platform          string `json:"platform"`
	RAM               int    `json:"ram"`
	CPUs              int    `json:"cpus"`
	BootPriority      string `json:"boot_priority"`
	HDA               string `json:"hda_disk_image"`
	HDB               string `json:"hdb_disk_image"`
	HDC               string `json:"hdc_disk_image"`
	HDD               string `json:"hdd_disk_image"`
	HDAInterface      string `json:"hda_disk_interface"`
	HDBInterface      string `json:"hdb_disk_interface"`
	HDCInterface      string `json:"hdc_disk_interface"`
	HDDInterface      string `json:"hdd_disk_interface"`
	CDROM             string `json:"cdrom_image"`
	BIOS              string `json:"bios_image"`
	Initrd            string `json:"initrd"`
	Kernel            string `json:"kernel_image"`
	KernelCommandLine string `json:"kernel_command_line"`
	LinkedClone       *bool  `json:"linked_clone"`
	OnClose           string `json:"on_close"`
	Options           string `json:"options"`
	ConsoleType       string `json:"console_type"`
	ReplicateLinks    *bool  `json:"replicate_network_connection_state"`
	TPM               bool   `json:"tpm"`
	UEFI              bool   `json:"uefi"`
	CreateConfigDisk  bool   `json:"create_config_disk"`
	CPUThrottling     int    `json:"cpu_throttling"`
	ProcessPriority   string `json:"process_priority"`
}

// Merge applies the members present in a JSON object of properties (a
// node PUT sends only the changed ones).
func (p *QemuProps) Merge(raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	// Nulls leave members as they are; numbers must be integers.
	if err := json.Unmarshal(raw, p); err != nil {
		return fmt.Errorf("qemu properties: %w", err)
	}
	return nil
}

// consoleType is console_type, telnet when unset.
func (p QemuProps) consoleType() string {
	if p.ConsoleType != "" {
		return p.ConsoleType
	}
	return "telnet"
}

// replicate reports whether the links' state reaches the NICs
// (replicate_network_connection_state, on when unset).
func (p QemuProps) replicate() bool {
	return p.ReplicateLinks == nil || *p.ReplicateLinks
}

// ramMB is the VM's memory in MB (GNS3's default 256).
func (p QemuProps) ramMB() int {
	if p.RAM <= 0 {
		return 256
	}
	return p.RAM
}

// configDisk reports whether the node gets a config disk: create_config_disk
// set and no hdd image in its place.
func (p QemuProps) configDisk() bool { return p.CreateConfigDisk && p.HDD == "" }
