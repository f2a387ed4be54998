package project

import (
	"errors"
	"fmt"
	"strings"
)

// Capture file name extensions.
const (
	extPcap = ".pcap"
)

// maxStem keeps a file name, extension included, within the 255 bytes most
// file systems allow.
const maxStem = 255 - len(".pcapng")

// capturePort names one end of a link for the default capture file name.
type capturePort struct {
	node          string
	adapter, port int
}

// defaultCaptureName returns the name GNS3 gives a capture of the link
// between a and b (api-v2.md 3.2):
// "<a.node>_<a.adapter>-<a.port>_to_<b.node>_<b.adapter>-<b.port>" with every
// character outside [0-9A-Za-z_-] removed, plus ext.
func defaultCaptureName(a, b capturePort, ext string) string {
	raw := fmt.Sprintf("%s_%d-%d_to_%s_%d-%d", a.node, a.adapter, a.port, b.node, b.adapter, b.port)
	return keepSafe(raw) + ext
}

// errEmptyName reports a capture file name with no usable character left.
var errEmptyName = errors.New("no usable characters (letters, digits, '_' or '-')")

// sanitizeCaptureName turns a client's capture file name into a plain base
// name that cannot leave the captures folder, by the default name's rule:
// a trailing ".pcap" or ".pcapng" is set aside, every character outside
// [0-9A-Za-z_-] is removed (so "/", "\" and ".." vanish), and ext is
// appended. "../../etc/x.pcap" becomes "etcx.pcap". GNS3 uses the client's
// name unchanged and so writes wherever it points (api-v2.md 7.1).
func sanitizeCaptureName(name, ext string) (string, error) {
	stem := name
	for _, e := range []string{".pcapng", ".pcap"} {
		if len(stem) >= len(e) && strings.EqualFold(stem[len(stem)-len(e):], e) {
			stem = stem[:len(stem)-len(e)]
			break
		}
	}
	stem = keepSafe(stem)
	if stem == "" {
		return "", errEmptyName
	}
	return stem + ext, nil
}

// keepSafe returns s without the characters outside [0-9A-Za-z_-], cut to
// maxStem bytes.
func keepSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < maxStem; i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' {
			b.WriteByte(c)
		}
	}
	return b.String()
}
