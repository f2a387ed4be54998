package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// A QEMU node's disks: qemu-img, and growing a disk (resize_disk).

// qemuImg finds qemu-img: next to the QEMU binary, else in PATH.
func (q *Qemu) qemuImg() (string, error) {
	if img, err := exec.LookPath(filepath.Join(filepath.Dir(q.binary), "qemu-img")); err == nil {
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

// ResizeDisk grows one of the node's disks by extendMB (GNS3's
// resize_disk): the node's own disk (its overlay, made first when it is
// a linked clone and was never started), never the base image. The VM
// must be stopped.
func (q *Qemu) ResizeDisk(ctx context.Context, drive string, extendMB int) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	q.mu.Lock()
	running := q.proc != nil
	q.mu.Unlock()
	if running {
		return fmt.Errorf("Cannot resize %s while the VM is running", drive)
	}
	if extendMB < 1 || extendMB > MaxDiskExtendMB {
		return fmt.Errorf("extend must be from 1 to %d MB", MaxDiskExtendMB)
	}
	var name string
	switch drive {
	case "hda":
		name = q.cfg.Props.HDA
	case "hdb":
		name = q.cfg.Props.HDB
	case "hdc":
		name = q.cfg.Props.HDC
	case "hdd":
		name = q.cfg.Props.HDD
	default:
		return fmt.Errorf("Invalid drive name %q: hda, hdb, hdc or hdd", drive)
	}
	if name == "" {
		return fmt.Errorf("%s has no disk image to resize", drive)
	}
	base, err := q.image(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(q.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	disk, err := q.nodeDisk(drive, base)
	if err != nil {
		return err
	}
	img, err := q.qemuImg()
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
