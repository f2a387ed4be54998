package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/confined"
	"github.com/labtap/labtap/proto"
)

// MaxDiskMB bounds a disk made by qemu-img create: 2 TiB.
const MaxDiskMB = 2 << 20

// qemuImgFormats are the formats GNS3's /qemu/img creates.
var qemuImgFormats = []string{"qcow2", "qcow", "vpc", "vdi", "vmdk", "raw"}

// diskPath resolves a client's disk path: a relative one is inside the
// QEMU images folder; an absolute one must be inside the images folder
// or the projects folder (a project's own disks). Neither may leave its
// folder, through ".." or a symbolic link.
func (im *Images) diskPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", proto.Errorf(proto.CodeInvalid, "Invalid disk path %q", p)
	}
	images := im.ImagesDir(TypeQemu)
	if err := os.MkdirAll(images, 0o755); err != nil {
		return "", proto.Errorf(proto.CodeConflict, "%v", err)
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(images, p)
	}
	full = filepath.Clean(full)
	for _, root := range []string{images, filepath.Join(im.dataDir, "projects")} {
		rel, err := filepath.Rel(root, full)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		// The folder the file lands in, with its links resolved, must
		// still be inside root.
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", proto.Errorf(proto.CodeConflict, "%v", err)
		}
		realRoot, err1 := filepath.EvalSymlinks(root)
		realDir, err2 := filepath.EvalSymlinks(filepath.Dir(full))
		if err1 != nil || err2 != nil {
			continue
		}
		if r, err := filepath.Rel(realRoot, realDir); err == nil && (r == "." || filepath.IsLocal(r)) {
			if st, err := os.Lstat(full); err == nil && st.Mode()&os.ModeSymlink != 0 {
				break
			}
			return filepath.Join(realDir, filepath.Base(full)), nil
		}
	}
	return "", proto.Errorf(proto.CodeForbidden, "%s is not allowed on this server: disks are made in the images folder or a project's folder", p)
}

// qemuImgBinary is the agent's qemu-img.
func qemuImgBinary() (string, error) {
	img, err := exec.LookPath("qemu-img")
	if err != nil {
		return "", proto.Errorf(proto.CodeConflict, "Could not find qemu-img (install qemu-utils)")
	}
	return img, nil
}

// onOff accepts GNS3's "on"/"off" option values.
func onOff(name, v string) error {
	if v != "" && v != "on" && v != "off" {
		return proto.Errorf(proto.CodeInvalid, "%s must be on or off", name)
	}
	return nil
}

// CreateQemuImg makes a disk image (GNS3's POST /qemu/img): qemu-img
// create -f format [-o options] path sizeM. An existing file is a 409.
func (im *Images) CreateQemuImg(ctx context.Context, c proto.QemuImgCreate) error {
	if !slices.Contains(qemuImgFormats, c.Format) {
		return proto.Errorf(proto.CodeInvalid, "format must be one of %s", strings.Join(qemuImgFormats, ", "))
	}
	if c.Size < 1 || c.Size > MaxDiskMB {
		return proto.Errorf(proto.CodeInvalid, "size must be from 1 to %d MB", MaxDiskMB)
	}
	var opts []string
	word := func(name, v string, allowed ...string) error {
		if v == "" {
			return nil
		}
		if !slices.Contains(allowed, v) {
			return proto.Errorf(proto.CodeInvalid, "%s must be one of %s", name, strings.Join(allowed, ", "))
		}
		opts = append(opts, name+"="+v)
		return nil
	}
	for _, err := range []error{
		word("preallocation", c.Preallocation, "off", "metadata", "falloc", "full"),
		onOff("lazy_refcounts", c.LazyRefcounts), word("lazy_refcounts", c.LazyRefcounts, "on", "off"),
		word("subformat", c.Subformat, "dynamic", "fixed", "monolithicSparse", "monolithicFlat", "twoGbMaxExtentSparse", "twoGbMaxExtentFlat", "streamOptimized"),
		onOff("static", c.Static), word("static", c.Static, "on", "off"),
		onOff("zeroed_grain", c.ZeroedGrain), word("zeroed_grain", c.ZeroedGrain, "on", "off"),
		word("adapter_type", c.AdapterType, "ide", "lsilogic", "buslogic", "legacyESX"),
	} {
		if err != nil {
			return err
		}
	}
	if c.ClusterSize != 0 {
		if c.ClusterSize < 512 || c.ClusterSize > 2<<20 || c.ClusterSize&(c.ClusterSize-1) != 0 {
			return proto.Errorf(proto.CodeInvalid, "cluster_size must be a power of two from 512 to 2097152")
		}
		opts = append(opts, "cluster_size="+strconv.Itoa(c.ClusterSize))
	}
	if c.RefcountBits != 0 {
		if c.RefcountBits > 64 || c.RefcountBits&(c.RefcountBits-1) != 0 {
			return proto.Errorf(proto.CodeInvalid, "refcount_bits must be a power of two up to 64")
		}
		opts = append(opts, "refcount_bits="+strconv.Itoa(c.RefcountBits))
	}
	path, err := im.diskPath(c.Path)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return proto.Errorf(proto.CodeConflict, "Could not create disk image '%s', file already exists", c.Path)
	}
	img, err := qemuImgBinary()
	if err != nil {
		return err
	}
	args := []string{"create", "-f", c.Format}
	if len(opts) > 0 {
		args = append(args, "-o", strings.Join(opts, ","))
	}
	args = append(args, path, fmt.Sprintf("%dM", c.Size))
	if out, err := exec.CommandContext(ctx, img, args...).CombinedOutput(); err != nil {
		os.Remove(path)
		return proto.Errorf(proto.CodeConflict, "Could not create disk image '%s': %s", c.Path, bytes.TrimSpace(out))
	}
	im.log.Info("disk image created", "path", path, "format", c.Format, "size_mb", c.Size)
	return nil
}

// ResizeQemuImg grows a disk image (GNS3's PUT /qemu/img): qemu-img
// resize path +extendM.
func (im *Images) ResizeQemuImg(ctx context.Context, r proto.QemuImgResize) error {
	if r.Extend < 1 || r.Extend > node.MaxDiskExtendMB {
		return proto.Errorf(proto.CodeInvalid, "extend must be from 1 to %d MB", node.MaxDiskExtendMB)
	}
	path, err := im.diskPath(r.Path)
	if err != nil {
		return err
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return proto.Errorf(proto.CodeNotFound, "Disk image %s doesn't exist", r.Path)
	}
	img, err := qemuImgBinary()
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, img, "resize", path, fmt.Sprintf("+%dM", r.Extend)).CombinedOutput(); err != nil {
		return proto.Errorf(proto.CodeConflict, "Could not resize disk image '%s': %s", r.Path, bytes.TrimSpace(out))
	}
	return nil
}

// diskResizer is a runner with disks that grow (a QEMU node).
type diskResizer interface {
	ResizeDisk(ctx context.Context, drive string, extendMB int) error
}

// ResizeDisk grows a disk of a stopped QEMU node (GNS3's resize_disk).
func (h *Host) ResizeDisk(ctx context.Context, projectID, nodeID string, r proto.ResizeDisk) error {
	n, err := h.node(projectID, nodeID)
	if err != nil {
		return err
	}
	dr, ok := n.runner.(diskResizer)
	if !ok {
		return proto.Errorf(proto.CodeConflict, "%s nodes have no disks to resize", n.spec.NodeType)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := dr.ResizeDisk(ctx, r.DriveName, r.Extend); err != nil {
		return asProtoError(err, proto.CodeConflict)
	}
	return nil
}

// ImageFile opens an image for reading (the web UI reads an appliance
// file back after uploading it); names starting with "." or leaving the
// folder are refused.
func (im *Images) ImageFile(nodeType, rel string) (*os.File, error) {
	if err := imageType(nodeType); err != nil {
		return nil, err
	}
	if rel == "" || !filepath.IsLocal(rel) || strings.HasPrefix(filepath.Base(rel), ".") {
		return nil, proto.Errorf(proto.CodeForbidden, "Image %s is forbidden", rel)
	}
	root, err := os.OpenRoot(im.ImagesDir(nodeType))
	if err != nil {
		return nil, proto.Errorf(proto.CodeNotFound, "Image %s doesn't exist", rel)
	}
	defer root.Close()
	// Not root.Open: a FIFO in the images folder would block it for ever.
	f, err := confined.Open(root, filepath.ToSlash(rel))
	if err != nil {
		return nil, proto.Errorf(proto.CodeNotFound, "Image %s doesn't exist", rel)
	}
	return f, nil
}
