package node

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// A QEMU node's config disk (create_config_disk): its configs/ files on
// a FAT disk at each start, copied back once the VM is gone.

// qemuConfigDisk is the config disk of the node whose folder it names.
type qemuConfigDisk string

// files is where a node's config disk files live between runs: the
// node folder's configs/, reachable through the node files routes.
func (c qemuConfigDisk) files() string { return filepath.Join(string(c), "configs") }

// image is the config disk's file.
func (c qemuConfigDisk) image() string { return filepath.Join(string(c), "config.img") }

// maxConfigDisk bounds the config disk (its files are configurations).
const maxConfigDisk = 256 << 20

// build makes the config disk (create_config_disk, when no hdd
// image is set): a FAT file system holding the node's configs/ files,
// made afresh at each start with dosfstools and mtools, as GNS3 does.
func (c qemuConfigDisk) build(ctx context.Context) (string, error) {
	for _, tool := range []string{"mkfs.fat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("The config disk needs %s: install dosfstools and mtools", tool)
		}
	}
	dir := c.files()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			size += info.Size() + 4096
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	size = max(2*size, 16<<20)
	if size > maxConfigDisk {
		return "", fmt.Errorf("config disk: the files of configs/ take over %d MB", maxConfigDisk>>21)
	}
	img := c.image()
	os.Remove(img)
	if out, err := exec.CommandContext(ctx, "mkfs.fat", "-C", "-n", "CONFIG", img, strconv.FormatInt(size>>10, 10)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("config disk: mkfs.fat: %s", bytes.TrimSpace(out))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	if len(entries) > 0 {
		args := []string{"-i", img, "-s", "-m", "-o", "-Q", "--"}
		for _, e := range entries {
			args = append(args, filepath.Join(dir, e.Name()))
		}
		args = append(args, "::/")
		if out, err := exec.CommandContext(ctx, "mcopy", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("config disk: mcopy: %s", bytes.TrimSpace(out))
		}
	}
	return img, nil
}

// args builds the config disk and gives it to QEMU as hdd (index 3) on
// the interface iface (hdd_disk_interface; ide when it names none).
func (c qemuConfigDisk) args(ctx context.Context, iface string) ([]string, error) {
	img, err := c.build(ctx)
	if err != nil {
		return nil, err
	}
	if iface == "" || iface == "none" {
		iface = "ide"
	}
	return []string{"-drive", fmt.Sprintf("file=%s,if=%s,index=3,media=disk,id=drive3,format=raw", commas(img), iface)}, nil
}

// export copies the config disk's files back to configs/ once
// the VM is gone (what the guest wrote there is kept).
func (c qemuConfigDisk) export() error {
	img := c.image()
	if !isFile(img) {
		return nil
	}
	out, err := exec.Command("mdir", "-i", img, "-b", "::/").Output()
	if err != nil {
		return fmt.Errorf("config disk: mdir: %v", err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			files = append(files, l)
		}
	}
	if len(files) == 0 {
		return nil
	}
	args := append([]string{"-i", img, "-s", "-m", "-n", "-o", "-Q", "--"}, files...)
	args = append(args, c.files())
	if out, err := exec.Command("mcopy", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("config disk: mcopy: %s", bytes.TrimSpace(out))
	}
	return nil
}
