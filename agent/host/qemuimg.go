package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/confined"
	"github.com/labtap/labtap/proto"
)

// MaxDiskMB bounds a disk made by qemu-img create: 2 TiB.
const MaxDiskMB = 2 << 20

// qemuImgFormats are the formats GNS3's /qemu/img creates.
var qemuImgFormats = []string{"qcow2", "qcow", "vpc", "vdi", "vmdk", "raw"}

// nodeDiskName is what qemu/img may make or grow in a QEMU node's folder:
// the node's own disks.
var nodeDiskName = regexp.MustCompile(`^hd[a-d]_disk\.(qcow2|qcow|vmdk|vdi|vhd|vpc|raw|img)$`)

// diskPath resolves a client's disk path. A relative one is inside the
// QEMU images folder, as is an absolute one naming a file there; the only
// other absolute paths are a QEMU node's disks,
// <projects>/<project>/project-files/qemu/<node>/hd[a-d]_disk.<format>,
// in a node folder that exists. Never a project file, a capture, a
// snapshot or the projects folder itself; never through ".." or a
// symbolic link.
func (im *Images) diskPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", proto.Errorf(proto.CodeInvalid, "Invalid disk path %q", p)
	}
	forbidden := proto.Errorf(proto.CodeForbidden, "%s is not allowed on this server: disks are made in the images folder or as a QEMU node's hd?_disk file", p)
	images, err := filepath.Abs(im.ImagesDir(TypeQemu))
	if err != nil {
		return "", proto.Errorf(proto.CodeConflict, "%v", err)
	}
	if err := os.MkdirAll(images, 0o755); err != nil {
		return "", proto.Errorf(proto.CodeConflict, "%v", err)
	}
	full := filepath.Clean(p)
	if !filepath.IsAbs(p) {
		full = filepath.Join(images, p)
	}
	if rel, err := filepath.Rel(images, full); err == nil && filepath.IsLocal(rel) {
		// The folder the file lands in may be made inside the images
		// folder, and with its links resolved must still be inside it.
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", proto.Errorf(proto.CodeConflict, "%v", err)
		}
		return confinedPath(images, full, forbidden)
	}
	projects, err := filepath.Abs(filepath.Join(im.dataDir, "projects"))
	if err != nil {
		return "", forbidden
	}
	rel, err := filepath.Rel(projects, full)
	if err != nil || !filepath.IsLocal(rel) {
		return "", forbidden
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 5 || parts[1] != "project-files" || parts[2] != "qemu" || !uuidRE.MatchString(parts[3]) || !nodeDiskName.MatchString(parts[4]) {
		return "", forbidden
	}
	if st, err := os.Lstat(filepath.Join(projects, parts[0])); err != nil || !st.IsDir() {
		return "", forbidden // no such project: nothing is made in the projects folder
	}
	// A node's folder is made at its first start: the disk may come
	// first. Made through an os.Root, so no link leads it out.
	root, err := os.OpenRoot(projects)
	if err != nil {
		return "", forbidden
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return "", forbidden
	}
	return confinedPath(projects, full, forbidden)
}

// confinedPath returns full with the links of its folder resolved,
// when that folder is still inside root and full itself is not a link;
// else refused.
func confinedPath(root, full string, refused error) (string, error) {
	realRoot, err1 := filepath.EvalSymlinks(root)
	realDir, err2 := filepath.EvalSymlinks(filepath.Dir(full))
	if err1 != nil || err2 != nil {
		return "", refused
	}
	if r, err := filepath.Rel(realRoot, realDir); err != nil || r != "." && !filepath.IsLocal(r) {
		return "", refused
	}
	if st, err := os.Lstat(full); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return "", refused
	}
	return filepath.Join(realDir, filepath.Base(full)), nil
}

// freeMB is the space left to unprivileged users on dir's filesystem, in
// MiB.
func freeMB(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize >> 20, nil
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
	if c.Preallocation == "falloc" || c.Preallocation == "full" {
		// A preallocated disk takes its whole size at once: it must fit.
		free, err := freeMB(filepath.Dir(path))
		if err != nil {
			return proto.Errorf(proto.CodeConflict, "Could not create disk image '%s': %v", c.Path, err)
		}
		if int64(c.Size) > free {
			return proto.Errorf(proto.CodeInvalid, "Could not create disk image '%s': %d MB preallocated is more than the %d MB free", c.Path, c.Size, free)
		}
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
	// Named as an explicit block node: qemu-img follows no backing or
	// data file name read from the image.
	name, err := node.QemuImgName(path)
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "Could not resize disk image '%s': %v", r.Path, err)
	}
	if out, err := exec.CommandContext(ctx, img, "resize", name, fmt.Sprintf("+%dM", r.Extend)).CombinedOutput(); err != nil {
		return proto.Errorf(proto.CodeConflict, "Could not resize disk image '%s': %s", r.Path, bytes.TrimSpace(out))
	}
	return nil
}

// diskResizer is a runner with disks that grow (a QEMU node).
type diskResizer interface {
	ResizeDisk(ctx context.Context, drive string, extendMB int) error
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

// resizeDisk grows a disk of a stopped QEMU node (GNS3's resize_disk).
func (n *hostNode) resizeDisk(ctx context.Context, r proto.ResizeDisk) error {
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
