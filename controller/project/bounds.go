package project

import (
	"encoding/json"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds every name a client gives: project, node, compute,
// template and drawing text. 255 bytes is what most file systems allow a
// file name (a project's file is named after it).
const MaxNameBytes = 255

// CheckName refuses a name (what says which: "Project name", "Node name",
// ...) that is over MaxNameBytes of UTF-8, not valid UTF-8, or holds a
// control character (C0, DEL, C1; newlines and tabs included): an
// ErrInvalid (400) saying so. The API's other name-taking routes
// (templates, drawings) use it too.
func CheckName(what, name string) error {
	if len(name) > MaxNameBytes {
		return errorf(ErrInvalid, "%s is %d bytes long, over %d", what, len(name), MaxNameBytes)
	}
	if !utf8.ValidString(name) {
		return errorf(ErrInvalid, "%s is not valid UTF-8", what)
	}
	if i := strings.IndexFunc(name, unicode.IsControl); i >= 0 {
		return errorf(ErrInvalid, "%s holds a control character (U+%04X) at byte %d", what, name[i:][0], i)
	}
	return nil
}

// MaxHostBytes bounds a host name (DNS allows 253).
const MaxHostBytes = 253

// CheckHost refuses a host that is neither an IP address nor a valid DNS
// name (labels of letters, digits, '-' and '_', 1 to 63 bytes, at most
// MaxHostBytes in all).
func CheckHost(what, host string) error {
	if net.ParseIP(host) != nil {
		return nil
	}
	bad := errorf(ErrInvalid, "%s %q is neither an IP address nor a host name", what, host)
	if host == "" || len(host) > MaxHostBytes {
		return bad
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return bad
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return bad
			}
		}
	}
	return nil
}

// MaxNodeProperties bounds a node's properties, encoded as JSON: an
// update merges its keys into the node's, so without a bound on the whole
// a client grows a node (its project file, every node.updated) one
// request-sized key at a time.
const MaxNodeProperties = 1 << 20

// checkProperties refuses properties over MaxNodeProperties (413).
func checkProperties(node string, props map[string]any) error {
	var n countingWriter
	if err := json.NewEncoder(&n).Encode(props); err != nil {
		return errorf(ErrInvalid, "Node %s: properties cannot be encoded: %v", node, err)
	}
	if n > MaxNodeProperties {
		return errorf(ErrTooLarge, "Node %s: properties are over %d bytes of JSON", node, MaxNodeProperties)
	}
	return nil
}

// countingWriter counts what is written to it and keeps nothing.
type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
