package node

import (
	"bytes"
	endian "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A QEMU node's images and disks are files API users can write: the
// images folder through uploads, the node's disks through the files API.
// An image names other files inside itself (a qcow2's backing file or
// external data file, a vmdk's parent), and QEMU and qemu-img open those
// names, local paths or network URLs, unless told otherwise. So the agent
// reads image headers itself, never by asking qemu-img (which would open
// the very names it reports), refuses images that name other files, and
// hands QEMU each disk as an explicit chain: the format, the file, and
// for a linked clone the base image it checked, or no backing at all.

// imageFormat tells an image's format from its first bytes, the way QEMU
// probes, for the formats labtap hands to QEMU: qcow2, vmdk (hosted
// sparse), vdi, vpc; anything else is raw (a vmdk text descriptor too:
// its extents are never opened).
func imageFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("QFI\xfb")):
		if len(head) >= 8 && endian.BigEndian.Uint32(head[4:]) >= 2 {
			return "qcow2", nil
		}
		return "qcow", nil
	case bytes.HasPrefix(head, []byte("KDMV")):
		return "vmdk", nil
	case bytes.HasPrefix(head, []byte("conectix")):
		return "vpc", nil
	case len(head) >= 0x44 && endian.LittleEndian.Uint32(head[0x40:]) == 0xbeda107f:
		return "vdi", nil
	}
	return "raw", nil
}

// qcow2Header is what a qcow2 header says of other files: its backing
// file name, and whether its data lives in an external data file.
type qcow2Header struct {
	backing      string
	externalData bool
}

func readQcow2Header(path string) (qcow2Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return qcow2Header{}, err
	}
	defer f.Close()
	var h struct {
		Magic         [4]byte
		Version       uint32
		BackingOffset uint64
		BackingSize   uint32
		_             [52]byte // cluster_bits to snapshots_offset
		Incompatible  uint64   // version 3 and later
	}
	if err := endian.Read(f, endian.BigEndian, &h); err != nil || string(h.Magic[:]) != "QFI\xfb" {
		return qcow2Header{}, fmt.Errorf("%s is not a qcow2 image", filepath.Base(path))
	}
	var out qcow2Header
	out.externalData = h.Version >= 3 && h.Incompatible&(1<<2) != 0
	if h.BackingOffset != 0 && h.BackingSize != 0 {
		if h.BackingSize > 1023 {
			return qcow2Header{}, fmt.Errorf("%s has a corrupt backing file name", filepath.Base(path))
		}
		name := make([]byte, h.BackingSize)
		if _, err := f.ReadAt(name, int64(h.BackingOffset)); err != nil {
			return qcow2Header{}, fmt.Errorf("%s has a corrupt backing file name", filepath.Base(path))
		}
		out.backing = string(name)
	}
	return out, nil
}

// checkStandalone refuses an image that names another file: a qcow2
// with a backing file or an external data file, or a qcow (whose
// backing file QEMU would follow).
func checkStandalone(path, format string) error {
	switch format {
	case "qcow":
		return fmt.Errorf("%s is a qcow (version 1) image: use qcow2", filepath.Base(path))
	case "qcow2":
		h, err := readQcow2Header(path)
		if err != nil {
			return err
		}
		if h.externalData {
			return fmt.Errorf("%s keeps its data in an external data file: labtap does not open it", filepath.Base(path))
		}
		if h.backing != "" {
			return fmt.Errorf("%s has the backing file %s: labtap only uses images without one", filepath.Base(path), h.backing)
		}
	}
	return nil
}

// checkOverlay checks a linked clone's overlay before QEMU or qemu-img
// opens it: a qcow2 without an external data file whose backing file is
// base (the image the agent made it from). An overlay without a backing
// file name is fine: QEMU is given base explicitly.
func checkOverlay(overlay, base string) error {
	h, err := readQcow2Header(overlay)
	if err != nil {
		return fmt.Errorf("%v: delete it to make a new linked clone", err)
	}
	if h.externalData {
		return fmt.Errorf("%s keeps its data in an external data file: labtap does not open it", filepath.Base(overlay))
	}
	if h.backing == "" {
		return nil
	}
	named := h.backing
	if !filepath.IsAbs(named) {
		named = filepath.Join(filepath.Dir(overlay), named)
	}
	if filepath.Clean(named) == filepath.Clean(base) {
		return nil
	}
	if real, err := filepath.EvalSymlinks(named); err == nil && real == base {
		return nil
	}
	return fmt.Errorf("%s has the backing file %s, not the image %s: refusing to start (delete the disk to make a new linked clone)",
		filepath.Base(overlay), h.backing, filepath.Base(base))
}

// hasBacking reports whether QEMU's format driver reads a backing file
// name from the image (and so must be told "backing": null).
func hasBacking(format string) bool { return format == "qcow2" || format == "vmdk" }

// blockJSON is the explicit block node of one image file: its format
// driver on a plain file, and backing as given (nil: none).
func blockJSON(format, path string, backing map[string]any) map[string]any {
	node := map[string]any{"driver": format, "file": map[string]any{"driver": "file", "filename": path}}
	if backing != nil {
		node["backing"] = backing
	} else if hasBacking(format) {
		node["backing"] = nil
	}
	return node
}

// jsonFilename is a block node as QEMU's and qemu-img's json: file name.
func jsonFilename(node map[string]any) string {
	b, _ := json.Marshal(node) // maps of strings: cannot fail
	return "json:" + string(b)
}

// diskSpec is one of a node's disks as the agent checked it.
type diskSpec struct {
	disk, diskFormat string // the node's own disk
	base, baseFormat string // the image; base == "" for a copy
}

// node is the disk's explicit block node for QEMU and qemu-img.
func (d diskSpec) node() map[string]any {
	if d.base == "" {
		return blockJSON(d.diskFormat, d.disk, nil)
	}
	return blockJSON(d.diskFormat, d.disk, blockJSON(d.baseFormat, d.base, nil))
}

// filename is the disk as a json: file name (for -drive file=, commas
// not yet doubled, and for qemu-img).
func (d diskSpec) filename() string { return jsonFilename(d.node()) }

// QemuImgName names an image file for qemu-img as an explicit block
// node: the format its first bytes tell, and no backing file, so that
// qemu-img opens that one file only (growing a disk needs nothing else).
// An image keeping its data in an external file, or a qcow (version 1)
// one, is refused.
func QemuImgName(path string) (string, error) {
	format, err := imageFormat(path)
	if err != nil {
		return "", err
	}
	switch format {
	case "qcow":
		return "", fmt.Errorf("%s is a qcow (version 1) image: use qcow2", filepath.Base(path))
	case "qcow2":
		h, err := readQcow2Header(path)
		if err != nil {
			return "", err
		}
		if h.externalData {
			return "", fmt.Errorf("%s keeps its data in an external data file: labtap does not open it", filepath.Base(path))
		}
	}
	return jsonFilename(blockJSON(format, path, nil)), nil
}

// blockDrivers are the block drivers a node's QEMU may have opened: the
// image formats labtap hands it, on plain files.
var blockDrivers = []string{"file", "qcow2", "raw", "vmdk", "vdi", "vpc"}

// checkOpened asks the paused QEMU which block nodes it opened and
// refuses, before the guest runs, any driver other than a format on a
// plain file, and any file outside the images folder, the node's own
// disk files and the UEFI firmware. It closes the window between the
// agent's header checks and QEMU's open: an overlay rewritten meanwhile
// to name an external data file shows up here.
func (d qemuDisks) checkOpened(run func([]byte) ([]byte, error)) error {
	raw, err := run([]byte(`{"execute": "query-named-block-nodes", "arguments": {"flat": true}}`))
	if err != nil {
		return fmt.Errorf("list the disks QEMU opened: %w", err)
	}
	var reply struct {
		Return []struct {
			Driver string `json:"drv"`
			File   string `json:"file"`
		} `json:"return"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return fmt.Errorf("list the disks QEMU opened: %w", err)
	}
	images, _ := filepath.Abs(string(d.images))
	realImages, err := filepath.EvalSymlinks(images)
	if err != nil {
		realImages = images
	}
	dir, _ := filepath.Abs(d.dir)
	for _, n := range reply.Return {
		if !slices.Contains(blockDrivers, n.Driver) {
			return fmt.Errorf("QEMU opened a %s block node: refusing to start", n.Driver)
		}
		if n.Driver != "file" {
			continue
		}
		name := filepath.Base(n.File)
		switch {
		case inside(realImages, n.File), inside(images, n.File):
		case filepath.Dir(n.File) == dir && (strings.HasPrefix(name, "hd") && strings.Contains(name, "_disk") || name == "config.img" || name == "OVMF_VARS.fd"):
		case slices.ContainsFunc(ovmfDirs, func(d string) bool { return inside(d, n.File) }):
		default:
			return fmt.Errorf("QEMU opened %s, which is not one of the node's disks or images: refusing to start", n.File)
		}
	}
	return nil
}

// inside reports whether path lies inside dir (both cleaned).
func inside(dir, path string) bool {
	r, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(r)
}
