// Package captures writes packet captures and streams them while they grow.
//
// A [File] is a capture on disk, in pcap or pcapng (one interface per
// direction of a link; gopacket's pcapgo writes the headers). Frames are
// queued in memory by the forwarding path and written out by the File's own
// goroutine in large writes, a few milliseconds later; a disk that cannot
// keep up costs dropped frames, counted, never a slower relay. The file only
// ever holds whole records, and readers can [File.Follow] it: they get the
// file from its first byte and then every record appended to it, until the
// capture ends. A [Ring] is a capture whose files end at a size or time
// limit, the next one taking over. The package knows nothing of HTTP or of
// labtap's projects: it works on files, directories and io.Writers. The
// names of data link types and formats are the capture vocabulary's
// (package capspec).
package captures

import (
	"fmt"

	"github.com/google/gopacket/layers"
	"github.com/labtap/labtap/capspec"
)

// LinkType returns the LINKTYPE written in a capture file's header for a
// GNS3 data_link_type name such as "DLT_EN10MB".
func LinkType(name string) (layers.LinkType, error) {
	lt, ok := capspec.LinkType(name)
	if !ok {
		return 0, fmt.Errorf("unknown data link type %q", name)
	}
	return layers.LinkType(lt), nil
}
