package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// qemuSetup is what one start of a QEMU node is made from: the node's
// configuration, its resolved QEMU binary and its console port, taken
// together under the node's lock (Qemu.setup). Everything that turns
// them into files and arguments hangs off it: the command line (args),
// the images, the disks, the sandbox.
type qemuSetup struct {
	cfg     QemuConfig
	binary  string // resolved qemu_path
	console int    // console port, 0 for none
}

// images is the images folder the node's image properties name files in.
func (s qemuSetup) images() qemuImages { return qemuImages(s.cfg.ImagesDir) }

// disks are the node's disks as its properties say.
func (s qemuSetup) disks() qemuDisks {
	return qemuDisks{images: s.images(), dir: s.cfg.Dir, props: s.cfg.Props, binary: s.binary, node: s.cfg.Name, warn: s.cfg.OnWarning}
}

// command gives QEMU's whole command line for one start: its arguments
// (args), the config disk, the saved state to resume, and the TPM, whose
// swtpm it starts (the helpers it returns, none when it fails). It also
// returns, per adapter, the UDP address QEMU listens on.
func (s qemuSetup) command(ctx context.Context, accel, conSock, qmpSock string) ([]string, []netip.AddrPort, []*child, error) {
	pr := s.cfg.Props
	var helpers []*child
	var extra []string
	if pr.TPM {
		tpm, tpmArgs, err := qemuTPM{dir: s.cfg.Dir, runtimeDir: s.cfg.RuntimeDir, sandbox: s.cfg.Sandbox}.start(ctx, s.sandboxSpec(accel))
		if err != nil {
			return nil, nil, nil, err
		}
		helpers = append(helpers, tpm)
		extra = append(extra, tpmArgs...)
	}
	args, nics, err := s.args(accel, conSock, qmpSock)
	if err == nil && pr.configDisk() {
		var disk []string
		if disk, err = qemuConfigDisk(s.cfg.Dir).args(ctx, pr.HDDInterface); err == nil {
			args = append(args, disk...)
		}
	}
	if err != nil {
		for _, h := range helpers {
			h.end(time.Second)
		}
		return nil, nil, nil, err
	}
	args = append(args, s.disks().savedStateArgs(ctx)...)
	return append(args, extra...), nics, helpers, nil
}

// args builds QEMU's arguments in the order GNS3 2.2 builds them, with labtap's changes: -accel, the console and QMP on unix
// sockets, and -S (the VM starts paused until the console is connected).
// It also returns, per adapter, the UDP address QEMU listens on.
func (s qemuSetup) args(accel, conSock, qmpSock string) ([]string, []netip.AddrPort, error) {
	pr := s.cfg.Props
	ram, cpus := pr.ramMB(), pr.CPUs
	if cpus <= 0 {
		cpus = 1
	}
	boot := pr.BootPriority
	if boot == "" {
		boot = "c"
	}
	args := []string{
		"-name", commas(s.cfg.Name),
		"-m", fmt.Sprintf("%dM", ram),
		"-smp", fmt.Sprintf("cpus=%d,sockets=1", cpus),
		"-accel", accel,
		"-boot", "order=" + boot,
	}
	if pr.UEFI && pr.BIOS != "" {
		return nil, nil, fmt.Errorf("Cannot use a bios image and the UEFI boot mode at the same time")
	}
	if pr.UEFI {
		uefi, err := uefiArgs(s.cfg.ImagesDir, s.cfg.Dir)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, uefi...)
	}
	if pr.BIOS != "" {
		path, err := s.images().path(pr.BIOS)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-bios", commas(path))
	}
	if pr.CDROM != "" {
		if pr.HDC != "" {
			return nil, nil, fmt.Errorf("You cannot use a disk image on hdc disk and a CDROM image at the same time")
		}
		cdrom, err := s.disks().cdromArgs(pr.CDROM)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, cdrom...)
	}
	disks, err := s.disks().args()
	if err != nil {
		return nil, nil, err
	}
	args = append(args, disks...)
	if pr.Initrd != "" {
		path, err := s.images().path(pr.Initrd)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-initrd", commas(path))
	}
	if pr.Kernel != "" {
		path, err := s.images().path(pr.Kernel)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-kernel", commas(path))
	}
	if pr.KernelCommandLine != "" {
		args = append(args, "-append", pr.KernelCommandLine)
	}
	args = append(args, "-uuid", s.cfg.NodeID)
	switch pr.consoleType() {
	case "telnet":
		args = append(args, "-chardev", "socket,id=con0,path="+commas(conSock)+",server=on,wait=off", "-serial", "chardev:con0")
	case "vnc":
		display := s.console - 5900
		args = append(args, "-vnc", fmt.Sprintf("%s:%d", s.cfg.ConsoleHost, display))
	}
	args = append(args, "-qmp", "unix:"+commas(qmpSock)+",server=on,wait=off")
	args = append(args, "-net", "none")
	nics := make([]netip.AddrPort, len(s.cfg.Adapters))
	for i, a := range s.cfg.Adapters {
		port, err := freeUDPPort()
		if err != nil {
			return nil, nil, err
		}
		nics[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))
		model := a.Model
		if model == "" {
			model = "e1000"
		}
		if model == "virtio" { // never a QEMU model; what users mean
			model = "virtio-net-pci"
		}
		dev := fmt.Sprintf("%s,mac=%s,netdev=gns3-%d", model, a.MAC, i)
		if model == "virtio-net-pci" {
			dev = fmt.Sprintf("%s,mac=%s,speed=10000,duplex=full,netdev=gns3-%d", model, a.MAC, i)
		}
		args = append(args, "-device", dev,
			"-netdev", fmt.Sprintf("socket,id=gns3-%d,udp=%s,localaddr=%s", i, a.Agent, nics[i]))
	}
	extra, err := s.options()
	if err != nil {
		return nil, nil, err
	}
	if pr.consoleType() != "vnc" && !slices.ContainsFunc(extra, func(s string) bool { return s == "-display" || s == "-nographic" }) {
		args = append(args, "-display", "none")
	}
	args = append(args, "-S")
	args = append(args, extra...)
	if pr.consoleType() == "vnc" {
		args = append(args, "-machine", "usb=on", "-device", "usb-tablet")
	}
	return args, nics, nil
}

// commas doubles commas, QEMU's escape inside option values.
func commas(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// options checks and substitutes the options property into arguments.
func (s qemuSetup) options() ([]string, error) {
	return QemuOptions(s.cfg.Props.Options, s.optionVars())
}

// optionVars are the substitutions of the options property (GNS3's).
// They are made before the allowlist checks the words, so a VM name
// cannot add members to an option.
func (s qemuSetup) optionVars() map[string]string {
	return map[string]string{
		"%vm-name%": s.cfg.Name, "%vm-id%": s.cfg.NodeID, "%project-id%": s.cfg.ProjectID,
		"%project-path%": s.cfg.ProjectDir, "%console-port%": strconv.Itoa(s.console),
	}
}

// accel picks the accelerator, and the warning to give when a VM runs
// without KVM though KVM was not ruled out (chooseAccel).
func (s qemuSetup) accel() (accel, warning string) {
	return chooseAccel(s.cfg.Name, s.cfg.Accel, s.cfg.Props.Options, func() error {
		return KVMProblemFor(s.cfg.Sandbox) // QEMU runs as the node's uid, not the agent's
	})
}
