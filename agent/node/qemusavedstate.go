package node

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// A QEMU node's saved VM state (on_close save_vm_state), kept in its
// qcow2 overlays.

// savedState is the name of the snapshot on_close save_vm_state keeps in
// the node's qcow2 overlays (GNS3's name, so a GNS3 project's saved state
// resumes here too).
const savedState = "GNS3_SAVED_STATE"

// overlays are the node's qcow2 disks that exist (linked clones), but
// not one keeping its data in an external file.
func (d qemuDisks) overlays() []string {
	var out []string
	for _, hd := range []string{"hda", "hdb", "hdc", "hdd"} {
		p := filepath.Join(d.dir, hd+"_disk.qcow2")
		if h, err := readQcow2Header(p); err == nil && !h.externalData && isFile(p) {
			out = append(out, p)
		}
	}
	return out
}

// hasSavedState reports whether a disk holds the saved VM state.
func hasSavedState(ctx context.Context, img, disk string) bool {
	out, err := exec.CommandContext(ctx, img, "snapshot", "-l", "-U", snapshotName(disk)).Output()
	return err == nil && bytes.Contains(out, []byte(savedState))
}

// snapshotName names a node's qcow2 disk for qemu-img snapshot: without
// its backing file, which snapshots of the disk itself do not need, so
// qemu-img opens no file name read from a disk API users can write
// (overlays() leaves out the disks that name an external data file).
func snapshotName(disk string) string {
	return jsonFilename(blockJSON("qcow2", disk, nil))
}

// savedStateArgs gives -loadvm when on_close is save_vm_state and the
// node's disks hold a saved state; with any other on_close a saved state
// is deleted, so a later save_vm_state never resumes an old one (GNS3).
func (d qemuDisks) savedStateArgs(ctx context.Context) []string {
	disks := d.overlays()
	if len(disks) == 0 {
		return nil
	}
	img, err := d.qemuImg()
	if err != nil {
		return nil
	}
	found := false
	for _, disk := range disks {
		if !hasSavedState(ctx, img, disk) {
			continue
		}
		found = true
		if d.props.OnClose != "save_vm_state" {
			if out, err := exec.CommandContext(ctx, img, "snapshot", "-d", savedState, snapshotName(disk)).CombinedOutput(); err != nil {
				d.warn(fmt.Sprintf("%s: could not delete the saved state of %s: %s", d.node, filepath.Base(disk), bytes.TrimSpace(out)))
			}
		}
	}
	if found && d.props.OnClose == "save_vm_state" {
		return []string{"-loadvm", savedState}
	}
	return nil
}
