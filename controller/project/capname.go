package project

import (
	"fmt"

	"github.com/labtap/labtap/capspec"
)

// capturePort names one end of a link for the default capture file name.
type capturePort struct {
	node          string
	adapter, port int
}

// defaultCaptureName returns the name GNS3 gives a capture of the link
// between a and b:
// "<a.node>_<a.adapter>-<a.port>_to_<b.node>_<b.adapter>-<b.port>" with every
// character outside [0-9A-Za-z_-] removed, plus ext.
func defaultCaptureName(a, b capturePort, ext string) string {
	raw := fmt.Sprintf("%s_%d-%d_to_%s_%d-%d", a.node, a.adapter, a.port, b.node, b.adapter, b.port)
	return capspec.CleanStem(raw) + ext
}
