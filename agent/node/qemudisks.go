package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/labtap/labtap/internal/atomicfile"
)

// A QEMU node's disks: its own copies or overlays of the images, their
// -drive options, qemu-img, and growing a disk (resize_disk).

// qemuDisks are a node's disks (hda to hdd, and the CD-ROM) as its
// properties say; the node's own disk files live in its folder.
type qemuDisks struct {
	images qemuImages
	dir    string // the node's folder
	props  QemuProps
	binary string // QEMU's: qemu-img is looked for beside it
	node   string // the node's name, for warnings
	warn   func(msg string)
}

// args gives the -drive options of hda to hdd. The guest writes to an
// overlay in the node's folder (qcow2 backed by the image: a linked
// clone), or to a full copy there when linked_clone is false: the base
// image is never written. Each disk is given as an explicit chain the
// agent checked (diskSpec), so QEMU follows no file name read from an
// image.
func (d qemuDisks) args() ([]string, error) {
	pr := d.props
	disks := []struct{ name, image, iface string }{
		{"hda", pr.HDA, pr.HDAInterface}, {"hdb", pr.HDB, pr.HDBInterface},
		{"hdc", pr.HDC, pr.HDCInterface}, {"hdd", pr.HDD, pr.HDDInterface},
	}
	var args []string
	for i, hd := range disks {
		if hd.image == "" {
			continue
		}
		base, err := d.images.path(hd.image)
		if err != nil {
			return nil, err
		}
		spec, err := d.nodeDisk(hd.name, base)
		if err != nil {
			return nil, err
		}
		iface := hd.iface
		if iface == "" || iface == "none" {
			iface = "ide"
			d.warn(fmt.Sprintf("%s: %s has no disk interface: using ide", d.node, hd.name))
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
func (d qemuDisks) cdromArgs(name string) ([]string, error) {
	path, err := d.images.path(name)
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
func (d qemuDisks) nodeDisk(name, base string) (diskSpec, error) {
	baseFormat, err := imageFormat(base)
	if err != nil {
		return diskSpec{}, fmt.Errorf("read %s: %w", filepath.Base(base), err)
	}
	if err := checkStandalone(base, baseFormat); err != nil {
		return diskSpec{}, err
	}
	linked := d.props.LinkedClone == nil || *d.props.LinkedClone
	if !linked {
		disk := filepath.Join(d.dir, name+"_disk"+filepath.Ext(base))
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
	disk := filepath.Join(d.dir, name+"_disk.qcow2")
	spec := diskSpec{disk: disk, diskFormat: "qcow2", base: base, baseFormat: baseFormat}
	if st, err := os.Lstat(disk); err == nil {
		if !st.Mode().IsRegular() {
			return diskSpec{}, fmt.Errorf("%s is not a regular file", filepath.Base(disk))
		}
		return spec, checkOverlay(disk, base)
	}
	img, err := d.qemuImg()
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
// qemuImg finds qemu-img: next to the QEMU binary, else in PATH.
func (d qemuDisks) qemuImg() (string, error) {
	if img, err := exec.LookPath(filepath.Join(filepath.Dir(d.binary), "qemu-img")); err == nil {
		return img, nil
	}
	if img, err := exec.LookPath("qemu-img"); err == nil {
		return img, nil
	}
	return "", errors.New("Could not find qemu-img (install qemu-utils)")
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// MaxDiskExtendMB bounds one resize_disk or qemu-img resize: 2 TiB.
const MaxDiskExtendMB = 2 << 20

// resize grows one of the disks by extendMB (GNS3's resize_disk): the
// node's own disk (its overlay, made first when it is a linked clone and
// was never started), never the base image. The VM must be stopped.
func (d qemuDisks) resize(ctx context.Context, drive string, extendMB int) error {
	if extendMB < 1 || extendMB > MaxDiskExtendMB {
		return fmt.Errorf("extend must be from 1 to %d MB", MaxDiskExtendMB)
	}
	var name string
	switch drive {
	case "hda":
		name = d.props.HDA
	case "hdb":
		name = d.props.HDB
	case "hdc":
		name = d.props.HDC
	case "hdd":
		name = d.props.HDD
	default:
		return fmt.Errorf("Invalid drive name %q: hda, hdb, hdc or hdd", drive)
	}
	if name == "" {
		return fmt.Errorf("%s has no disk image to resize", drive)
	}
	base, err := d.images.path(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	disk, err := d.nodeDisk(drive, base)
	if err != nil {
		return err
	}
	img, err := d.qemuImg()
	if err != nil {
		return err
	}
	// The disk was checked (nodeDisk) and is named as an explicit chain:
	// qemu-img opens no file name read from it.
	out, err := exec.CommandContext(ctx, img, "resize", disk.filename(), fmt.Sprintf("+%dM", extendMB)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("Could not resize %s: %s", drive, bytes.TrimSpace(out))
	}
	return nil
}

// ResizeDisk grows one of the node's disks by extendMB (GNS3's
// resize_disk): the node's own disk (its overlay, made first when it is
// a linked clone and was never started), never the base image. The VM
// must be stopped.
func (q *Qemu) ResizeDisk(ctx context.Context, drive string, extendMB int) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	if p, _ := q.current(); p != nil {
		return fmt.Errorf("Cannot resize %s while the VM is running", drive)
	}
	return q.setup().disks().resize(ctx, drive, extendMB)
}
