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

// ImagePath is one image: PUT with the raw file as body writes it (204);
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
