package proto

import (
	"net/url"
	"strings"
)

// This file holds the contract of an agent's images (protocol version 3):
// the files QEMU nodes boot from, kept under the agent's images folder,
// and what the GNS3 QEMU wizard asks of a compute.

// Image is one file of an agent's images folder (GNS3's image list entry).
type Image struct {
	Filename string `json:"filename"`
	// Path is relative to the images folder: what a node's image
	// property names.
	Path     string `json:"path"`
	MD5Sum   string `json:"md5sum"`
	FileSize int64  `json:"filesize"`
}

// ImagesPath lists the images of a node type: GET answers []Image.
func ImagesPath(nodeType string) string { return "/v1/images/" + url.PathEscape(nodeType) }

// ImagePath is one image: GET reads it back (the raw file), PUT with the
// raw file as body writes it (204);
// a path that leaves the images folder is refused (invalid), a body larger
// than the agent's limit is 413.
func ImagePath(nodeType, path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return ImagesPath(nodeType) + "/" + strings.Join(parts, "/")
}

// QEMU routes of an agent: the executables it has and what they can do.
const (
	QemuBinariesPath     = "/v1/qemu/binaries"     // GET: []QemuBinary; ?archs=a,b keeps names ending so
	QemuImgBinariesPath  = "/v1/qemu/img-binaries" // GET: []QemuBinary of qemu-img
	QemuCapabilitiesPath = "/v1/qemu/capabilities" // GET: QemuCapabilities
)

// QemuBinary is a QEMU executable and its version.
type QemuBinary struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// QemuCapabilities says which platforms run with KVM here (empty without
// a usable /dev/kvm).
type QemuCapabilities struct {
	KVM []string `json:"kvm"`
}

// QemuImgPath creates (POST, QemuImgCreate) or grows (PUT, QemuImgResize)
// a disk image with qemu-img, inside the agent's QEMU images folder or a
// project's folder.
const QemuImgPath = "/v1/qemu/img"

// QemuImgCreate is GNS3's body of POST /qemu/img: qemu-img create -f
// format [-o options] path sizeM. QemuImg (the client's choice of
// qemu-img) is ignored: the agent runs its own.
type QemuImgCreate struct {
	QemuImg       string `json:"qemu_img,omitempty"`
	Path          string `json:"path"`
	Format        string `json:"format"`
	Size          int    `json:"size"`
	Preallocation string `json:"preallocation,omitempty"`
	ClusterSize   int    `json:"cluster_size,omitempty"`
	RefcountBits  int    `json:"refcount_bits,omitempty"`
	LazyRefcounts string `json:"lazy_refcounts,omitempty"`
	Subformat     string `json:"subformat,omitempty"`
	Static        string `json:"static,omitempty"`
	ZeroedGrain   string `json:"zeroed_grain,omitempty"`
	AdapterType   string `json:"adapter_type,omitempty"`
}

// QemuImgResize is GNS3's body of PUT /qemu/img: qemu-img resize path
// +extendM.
type QemuImgResize struct {
	QemuImg string `json:"qemu_img,omitempty"`
	Path    string `json:"path"`
	Extend  int    `json:"extend"`
}

// ResizeDisk is GNS3's body of a node's resize_disk: grow drive_name
// (hda-hdd) by extend MB.
type ResizeDisk struct {
	DriveName string `json:"drive_name"`
	Extend    int    `json:"extend"`
}

// ResizeDiskPath grows a disk of a stopped QEMU node (POST, ResizeDisk).
func ResizeDiskPath(project, node string) string { return NodePath(project, node) + "/resize_disk" }
