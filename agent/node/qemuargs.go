package node

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/shlex"
)

// buildArgs builds QEMU's arguments in the order GNS3 2.2 builds them, with labtap's changes: -accel, the console and QMP on unix
// sockets, and -S (the VM starts paused until the console is connected).
// It also returns, per adapter, the UDP address QEMU listens on.
func (q *Qemu) buildArgs(accel, conSock, qmpSock string) ([]string, []netip.AddrPort, error) {
	pr := q.cfg.Props
	ram, cpus := q.ram(), pr.CPUs
	if cpus <= 0 {
		cpus = 1
	}
	boot := pr.BootPriority
	if boot == "" {
		boot = "c"
	}
	args := []string{
		"-name", commas(q.cfg.Name),
		"-m", fmt.Sprintf("%dM", ram),
		"-smp", fmt.Sprintf("cpus=%d,sockets=1", cpus),
		"-accel", accel,
		"-boot", "order=" + boot,
	}
	if pr.UEFI && pr.BIOS != "" {
		return nil, nil, fmt.Errorf("Cannot use a bios image and the UEFI boot mode at the same time")
	}
	if pr.UEFI {
		uefi, err := q.uefiArgs()
		if err != nil {
			return nil, nil, err
		}
		args = append(args, uefi...)
	}
	if pr.BIOS != "" {
		path, err := q.image(pr.BIOS)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-bios", commas(path))
	}
	if pr.CDROM != "" {
		if pr.HDC != "" {
			return nil, nil, fmt.Errorf("You cannot use a disk image on hdc disk and a CDROM image at the same time")
		}
		path, err := q.image(pr.CDROM)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-cdrom", commas(path))
	}
	disks, err := q.diskArgs()
	if err != nil {
		return nil, nil, err
	}
	args = append(args, disks...)
	if pr.Initrd != "" {
		path, err := q.image(pr.Initrd)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-initrd", commas(path))
	}
	if pr.Kernel != "" {
		path, err := q.image(pr.Kernel)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "-kernel", commas(path))
	}
	if pr.KernelCommandLine != "" {
		args = append(args, "-append", pr.KernelCommandLine)
	}
	args = append(args, "-uuid", q.cfg.NodeID)
	switch q.consoleType() {
	case "telnet":
		args = append(args, "-chardev", "socket,id=con0,path="+commas(conSock)+",server=on,wait=off", "-serial", "chardev:con0")
	case "vnc":
		q.mu.Lock()
		display := q.console - 5900
		q.mu.Unlock()
		args = append(args, "-vnc", fmt.Sprintf("%s:%d", q.cfg.ConsoleHost, display))
	}
	args = append(args, "-qmp", "unix:"+commas(qmpSock)+",server=on,wait=off")
	args = append(args, "-net", "none")
	nics := make([]netip.AddrPort, len(q.cfg.Adapters))
	for i, a := range q.cfg.Adapters {
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
	extra, err := q.options()
	if err != nil {
		return nil, nil, err
	}
	if q.consoleType() != "vnc" && !slices.ContainsFunc(extra, func(s string) bool { return s == "-display" || s == "-nographic" }) {
		args = append(args, "-display", "none")
	}
	args = append(args, "-S")
	args = append(args, extra...)
	if q.consoleType() == "vnc" {
		args = append(args, "-machine", "usb=on", "-device", "usb-tablet")
	}
	return args, nics, nil
}

// ram is the VM's memory in MB (GNS3's default 256).
func (q *Qemu) ram() int {
	if q.cfg.Props.RAM <= 0 {
		return 256
	}
	return q.cfg.Props.RAM
}

// commas doubles commas, QEMU's escape inside option values.
func commas(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// image resolves an image property: a name relative to the images folder
// (which it must not leave), or an absolute path (the agent is local).
// A missing file is GNS3's ImageMissingError message.
func (q *Qemu) image(name string) (string, error) {
	path := name
	if !filepath.IsAbs(name) {
		if !filepath.IsLocal(name) {
			return "", fmt.Errorf("image %s is outside the images folder", name)
		}
		path = filepath.Join(q.cfg.ImagesDir, name)
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	return path, nil
}

// diskArgs gives the -drive options of hda to hdd. The guest writes to an
// overlay in the node's folder (qcow2 backed by the image: a linked
// clone), or to a full copy there when linked_clone is false: the base
// image is never written.
func (q *Qemu) diskArgs() ([]string, error) {
	pr := q.cfg.Props
	disks := []struct{ name, image, iface string }{
		{"hda", pr.HDA, pr.HDAInterface}, {"hdb", pr.HDB, pr.HDBInterface},
		{"hdc", pr.HDC, pr.HDCInterface}, {"hdd", pr.HDD, pr.HDDInterface},
	}
	var args []string
	for i, d := range disks {
		if d.image == "" {
			continue
		}
		base, err := q.image(d.image)
		if err != nil {
			return nil, err
		}
		disk, err := q.nodeDisk(d.name, base)
		if err != nil {
			return nil, err
		}
		iface := d.iface
		if iface == "" || iface == "none" {
			iface = "ide"
			q.cfg.OnWarning(fmt.Sprintf("%s: %s has no disk interface: using ide", q.cfg.Name, d.name))
		}
		file := commas(disk)
		switch iface {
		case "sata":
			args = append(args, "-device", fmt.Sprintf("ahci,id=ahci%d", i),
				"-drive", fmt.Sprintf("file=%s,if=none,id=drive%d,index=%d,media=disk", file, i, i),
				"-device", fmt.Sprintf("ide-hd,drive=drive%d,bus=ahci%d.0", i, i))
		case "nvme":
			args = append(args, "-drive", fmt.Sprintf("file=%s,if=none,id=drive%d,index=%d,media=disk", file, i, i),
				"-device", fmt.Sprintf("nvme,drive=drive%d,serial=%d", i, i))
		case "scsi":
			args = append(args, "-device", fmt.Sprintf("virtio-scsi-pci,id=scsi%d", i),
				"-drive", fmt.Sprintf("file=%s,if=none,id=drive%d,index=%d,media=disk", file, i, i),
				"-device", fmt.Sprintf("scsi-hd,drive=drive%d", i))
		default:
			args = append(args, "-drive", fmt.Sprintf("file=%s,if=%s,index=%d,media=disk,id=drive%d", file, iface, i, i))
		}
	}
	return args, nil
}

// nodeDisk returns the node's disk for base: <dir>/<hd?>_disk.qcow2, made
// once (an overlay with qemu-img, or a copy) and reused at every start.
func (q *Qemu) nodeDisk(name, base string) (string, error) {
	linked := q.cfg.Props.LinkedClone == nil || *q.cfg.Props.LinkedClone
	if !linked {
		disk := filepath.Join(q.cfg.Dir, name+"_disk"+filepath.Ext(base))
		if _, err := os.Stat(disk); err == nil {
			return disk, nil
		}
		if err := copyFile(base, disk); err != nil {
			return "", fmt.Errorf("copy %s: %w", base, err)
		}
		return disk, nil
	}
	disk := filepath.Join(q.cfg.Dir, name+"_disk.qcow2")
	if _, err := os.Stat(disk); err == nil {
		return disk, nil
	}
	img, err := exec.LookPath(filepath.Join(filepath.Dir(q.binary), "qemu-img"))
	if err != nil {
		if img, err = exec.LookPath("qemu-img"); err != nil {
			return "", fmt.Errorf("Could not find qemu-img (install qemu-utils): a linked clone of %s needs it", name)
		}
	}
	format := "raw"
	if head, err := readHead(base, 4); err == nil && bytes.Equal(head, []byte{'Q', 'F', 'I', 0xfb}) {
		format = "qcow2"
	}
	out, err := exec.Command(img, "create", "-f", "qcow2", "-F", format, "-b", base, disk).CombinedOutput()
	if err != nil {
		os.Remove(disk)
		return "", fmt.Errorf("Could not create linked clone of %s: %s", base, strings.TrimSpace(string(out)))
	}
	return disk, nil
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = f.Read(b)
	return b, err
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// forbiddenOptions open host paths, networks or monitors outside what the
// agent sets up; options may not use them (GNS3 forbids the disk and
// network ones; labtap also the ones that open files, sockets or
// monitors, since options come from API users).
var forbiddenOptions = []string{
	"-blockdev", "-drive", "-hda", "-hdb", "-hdc", "-hdd", "-fsdev", "-virtfs", "-nic", "-netdev", "-net",
	"-chardev", "-serial", "-parallel", "-monitor", "-qmp", "-qmp-pretty", "-mon", "-debugcon",
	"-kernel", "-initrd", "-bios", "-cdrom", "-mtdblock", "-sd", "-pflash", "-loadvm", "-incoming",
	"-add-fd", "-object", "-D", "-pidfile", "-readconfig", "-writeconfig", "-L", "-plugin", "-trace",
	"-smbios", "-fw_cfg", "-usbdevice", "-daemonize", "-runas", "-chroot", "-run-with", "-spice", "-vnc",
	"-dtb", "-acpitable", "-option-rom", "-gdb", "-s", "-mem-path", "-tpmdev", "-audiodev", "-audio",
	"-iscsi", "-semihosting-config", "-qtest", "-qtest-log", "-sandbox", "-rtc-td-hack",
	"-set", "-fda", "-fdb", // -set rewrites any object's member (the agent's chardev, a drive's file)
	"-semihosting", // the guest opens host files (arm, riscv, m68k)
}

// forbiddenValues are members of -device, -machine or -boot values that
// name a host path, a backend or host hardware: machine kernel=, dtb=
// (dumpdtb= writes), boot splash=, usb-mtp's rootdir=, evdev=, and the
// devices that pass host devices through.
var forbiddenValues = []string{"chardev=", "netdev=", "drive=", "file=", "path=", "fd=", "addr=unix", "socket", "memory-backend", "vnc", "spice",
	"kernel=", "initrd=", "dtb=", "firmware=", "splash=", "rootdir=", "evdev=", "usb-host", "vfio", "vhost", "pci-assign",
	"hidraw=", "rendernode="}

// options checks and substitutes the options property into arguments.
func (q *Qemu) options() ([]string, error) {
	return QemuOptions(q.cfg.Props.Options, map[string]string{
		"%vm-name%": q.cfg.Name, "%vm-id%": q.cfg.NodeID, "%project-id%": q.cfg.ProjectID,
		"%project-path%": q.cfg.ProjectDir, "%console-port%": strconv.Itoa(q.console),
	})
}

// QemuOptions splits a QEMU node's options with shell rules, refuses the
// ones that would open host paths, networks or monitors, maps GNS3's
// -no-kvm/-no-hax/-enable-kvm, and substitutes vars. Its errors are
// GNS3's messages.
func QemuOptions(options string, vars map[string]string) ([]string, error) {
	if strings.TrimSpace(options) == "" {
		return nil, nil
	}
	words, err := shlex.Split(options)
	if err != nil {
		return nil, fmt.Errorf("Invalid options %q: %v", options, err)
	}
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		opt := w
		if strings.HasPrefix(opt, "--") {
			opt = opt[1:]
		}
		if k, _, ok := strings.Cut(opt, "="); ok && strings.HasPrefix(opt, "-") {
			opt = k
		}
		switch {
		case slices.Contains(forbiddenOptions, opt):
			return nil, fmt.Errorf("Forbidden additional option: %s", w)
		case opt == "-no-kvm" || opt == "-no-hax":
			continue // the accelerator is chosen from it (tcg)
		case opt == "-enable-kvm":
			continue
		}
		if strings.HasPrefix(opt, "-") && (opt == "-device" || opt == "-machine" || opt == "-M" || opt == "-global" || opt == "-display" || opt == "-boot") && i+1 < len(words) {
			v := strings.ToLower(words[i+1])
			if strings.HasPrefix(strings.TrimSpace(v), "{") {
				// QEMU also takes these values as JSON, whose members
				// ("romfile":"/etc/shadow") no key= above would see.
				return nil, fmt.Errorf("Forbidden additional option: %s %s (write it as key=value)", w, words[i+1])
			}
			for _, bad := range forbiddenValues {
				if strings.Contains(v, bad) {
					return nil, fmt.Errorf("Forbidden additional option: %s %s", w, words[i+1])
				}
			}
			if opt == "-machine" || opt == "-M" { // the accelerator is -accel's
				var keep []string
				for _, m := range strings.Split(words[i+1], ",") {
					if !strings.HasPrefix(m, "accel=") {
						keep = append(keep, m)
					}
				}
				if len(keep) == 0 {
					i++
					continue
				}
				words[i+1] = strings.Join(keep, ",")
			}
		}
		for k, v := range vars {
			w = strings.ReplaceAll(w, k, v)
		}
		out = append(out, w)
	}
	return out, nil
}
