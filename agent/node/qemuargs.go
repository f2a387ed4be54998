package node

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/labtap/labtap/internal/atomicfile"
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
		cdrom, err := q.cdromArgs(pr.CDROM)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, cdrom...)
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

// image resolves an image property inside the images folder (a name
// relative to it, or an absolute path inside it) through an os.Root, so
// that neither ".." nor a symbolic link leads out, and returns the
// image's real path. A missing file is GNS3's ImageMissingError message.
func (q *Qemu) image(name string) (string, error) {
	rel, err := q.imageRel("image", name)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(q.cfg.ImagesDir)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	defer root.Close()
	st, err := root.Stat(rel)
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	// QEMU opens the image by name: give it the real path, which the
	// root just showed to be inside the folder, and check it is the same
	// file.
	realDir, err1 := filepath.EvalSymlinks(dir)
	real, err2 := filepath.EvalSymlinks(filepath.Join(dir, rel))
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	if r, err := filepath.Rel(realDir, real); err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("image %s is outside the images folder", name)
	}
	if rst, err := os.Stat(real); err != nil || !os.SameFile(st, rst) {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	return real, nil
}

// diskArgs gives the -drive options of hda to hdd. The guest writes to an
// overlay in the node's folder (qcow2 backed by the image: a linked
// clone), or to a full copy there when linked_clone is false: the base
// image is never written. Each disk is given as an explicit chain the
// agent checked (diskSpec), so QEMU follows no file name read from an
// image.
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
		spec, err := q.nodeDisk(d.name, base)
		if err != nil {
			return nil, err
		}
		iface := d.iface
		if iface == "" || iface == "none" {
			iface = "ide"
			q.cfg.OnWarning(fmt.Sprintf("%s: %s has no disk interface: using ide", q.cfg.Name, d.name))
		}
		file := commas(spec.filename())
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

// cdromArgs gives the CD-ROM as -cdrom would (index 2, the machine's
// default interface), with its format explicit and no backing file.
func (q *Qemu) cdromArgs(name string) ([]string, error) {
	path, err := q.image(name)
	if err != nil {
		return nil, err
	}
	format, err := imageFormat(path)
	if err != nil {
		return nil, fmt.Errorf("The image %s is missing", name)
	}
	if err := checkStandalone(path, format); err != nil {
		return nil, err
	}
	return []string{"-drive", "file=" + commas(jsonFilename(blockJSON(format, path, nil))) + ",index=2,media=cdrom"}, nil
}

// nodeDisk returns the node's disk for base: <dir>/<hd?>_disk.qcow2 (an
// overlay made with qemu-img) or <dir>/<hd?>_disk<ext> (a copy, when
// linked_clone is false), made once and reused at every start, checked
// each time: the base names no other file, an overlay's backing file is
// base, a copy has the base's format and names no other file.
func (q *Qemu) nodeDisk(name, base string) (diskSpec, error) {
	baseFormat, err := imageFormat(base)
	if err != nil {
		return diskSpec{}, fmt.Errorf("read %s: %w", filepath.Base(base), err)
	}
	if err := checkStandalone(base, baseFormat); err != nil {
		return diskSpec{}, err
	}
	linked := q.cfg.Props.LinkedClone == nil || *q.cfg.Props.LinkedClone
	if !linked {
		disk := filepath.Join(q.cfg.Dir, name+"_disk"+filepath.Ext(base))
		if _, err := os.Lstat(disk); err != nil {
			if err := copyFile(base, disk); err != nil {
				return diskSpec{}, fmt.Errorf("copy %s: %w", base, err)
			}
		}
		if st, err := os.Lstat(disk); err != nil || !st.Mode().IsRegular() {
			return diskSpec{}, fmt.Errorf("%s is not a regular file", filepath.Base(disk))
		}
		if format, err := imageFormat(disk); err != nil || format != baseFormat && baseFormat != "raw" {
			return diskSpec{}, fmt.Errorf("%s is not a %s image like %s: delete it to copy the image again", filepath.Base(disk), baseFormat, filepath.Base(base))
		}
		if err := checkStandalone(disk, baseFormat); err != nil {
			return diskSpec{}, err
		}
		return diskSpec{disk: disk, diskFormat: baseFormat}, nil
	}
	disk := filepath.Join(q.cfg.Dir, name+"_disk.qcow2")
	spec := diskSpec{disk: disk, diskFormat: "qcow2", base: base, baseFormat: baseFormat}
	if st, err := os.Lstat(disk); err == nil {
		if !st.Mode().IsRegular() {
			return diskSpec{}, fmt.Errorf("%s is not a regular file", filepath.Base(disk))
		}
		return spec, checkOverlay(disk, base)
	}
	img, err := q.qemuImg()
	if err != nil {
		return diskSpec{}, fmt.Errorf("Could not find qemu-img (install qemu-utils): a linked clone of %s needs it", name)
	}
	out, err := exec.Command(img, "create", "-f", "qcow2", "-F", baseFormat, "-b", base, disk).CombinedOutput()
	if err != nil {
		os.Remove(disk)
		return diskSpec{}, fmt.Errorf("Could not create linked clone of %s: %s", base, strings.TrimSpace(string(out)))
	}
	return spec, nil
}

// copyFile copies src to dst, streamed (a disk is gigabytes) and durably:
// dst appears whole, synced, or not at all.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := atomicfile.Create(dst, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// options checks and substitutes the options property into arguments.
func (q *Qemu) options() ([]string, error) {
	return QemuOptions(q.cfg.Props.Options, q.optionVars())
}

// optionVars are the substitutions of the options property (GNS3's).
// They are made before the allowlist checks the words, so a VM name
// cannot add members to an option.
func (q *Qemu) optionVars() map[string]string {
	return map[string]string{
		"%vm-name%": q.cfg.Name, "%vm-id%": q.cfg.NodeID, "%project-id%": q.cfg.ProjectID,
		"%project-path%": q.cfg.ProjectDir, "%console-port%": strconv.Itoa(q.console),
	}
}
