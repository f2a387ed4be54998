package captures

import (
	"errors"
	"fmt"
	"strings"
)

// File name extensions of the two capture formats.
const (
	ExtPcap   = ".pcap"
	ExtPcapng = ".pcapng"
)

// maxStem keeps a file name, extension included, within the 255 bytes most
// file systems allow.
const maxStem = 255 - len(ExtPcapng)

// Port names one end of a link for the default file name.
type Port struct {
	Node    string // the node's name
	Adapter int
	Port    int
}

// DefaultFileName returns the name GNS3 gives a capture of the link between
// a and b: "<a.Node>_<a.Adapter>-<a.Port>_to_<b.Node>_<b.Adapter>-<b.Port>"
// with every character outside [0-9A-Za-z_-] removed, plus ext.
func DefaultFileName(a, b Port, ext string) string {
	raw := fmt.Sprintf("%s_%d-%d_to_%s_%d-%d", a.Node, a.Adapter, a.Port, b.Node, b.Adapter, b.Port)
	return keepSafe(raw) + ext
}

// ErrEmptyName reports a capture file name with no usable character left.
var ErrEmptyName = errors.New("capture file name has no usable characters (letters, digits, '_' or '-')")

// SanitizeFileName turns a client-supplied capture file name into a plain
// base name that cannot leave the captures folder. It applies the default
// name's rule to the client's name: a trailing ".pcap" or ".pcapng" is set
// aside, every character outside [0-9A-Za-z_-] is removed (so "/", "\\" and
// ".." vanish), and ext is appended. "../../etc/x.pcap" becomes "etcx.pcap".
func SanitizeFileName(name, ext string) (string, error) {
	stem := name
	for _, e := range []string{ExtPcapng, ExtPcap} {
		if len(stem) >= len(e) && strings.EqualFold(stem[len(stem)-len(e):], e) {
			stem = stem[:len(stem)-len(e)]
			break
		}
	}
	stem = keepSafe(stem)
	if stem == "" {
		return "", ErrEmptyName
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

// ValidFileName reports whether name is a plain file name that stays in the
// directory it is joined to: not empty, at most 255 bytes, no path
// separator, not starting with a dot, and made of [0-9A-Za-z_.-] only.
// Agents check names with it even though the controller sanitised them.
func ValidFileName(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
