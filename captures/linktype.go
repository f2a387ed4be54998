// Package captures writes packet captures and streams them while they grow.
//
// A [File] is a capture on disk, in pcap or pcapng (one interface per
// direction of a link; gopacket's pcapgo writes the headers). Frames are
// queued in memory by the forwarding path and written out by the File's own
// goroutine in large writes, a few milliseconds later; a disk that cannot
// keep up costs dropped frames, counted, never a slower relay. The file only
// ever holds whole records, and readers can [File.Follow] it: they get the
// file from its first byte and then every record appended to it, until the
// capture ends. The package knows nothing of HTTP or of labtap's projects:
// it works on files, directories and io.Writers.
package captures

import (
	"fmt"
	"slices"

	"github.com/google/gopacket/layers"
)

type dataLinkType struct {
	name string
	lt   layers.LinkType
}

// dataLinkTypes lists the data_link_type names GNS3 clients may ask for, in
// the order of GNS3's schema.
var dataLinkTypes = []dataLinkType{
	{"DLT_ATM_RFC1483", layers.LinkTypeATM_RFC1483}, // 100; libpcap's in-memory DLT is 11, the file says 100
	{"DLT_EN10MB", layers.LinkTypeEthernet},         // 1
	{"DLT_FRELAY", layers.LinkTypeFRelay},           // 107
	{"DLT_C_HDLC", layers.LinkTypeC_HDLC},           // 104
	{"DLT_PPP_SERIAL", layers.LinkTypePPP_HDLC},     // 50: PPP in HDLC-like framing
}

// DefaultDataLinkType is the data link type of a capture that names none.
const DefaultDataLinkType = "DLT_EN10MB"

// DataLinkTypes returns the data_link_type names a capture accepts.
func DataLinkTypes() []string {
	names := make([]string, len(dataLinkTypes))
	for i, d := range dataLinkTypes {
		names[i] = d.name
	}
	return names
}

// LinkType returns the LINKTYPE written in a capture file's header for a
// GNS3 data_link_type name such as "DLT_EN10MB".
func LinkType(name string) (layers.LinkType, error) {
	i := slices.IndexFunc(dataLinkTypes, func(d dataLinkType) bool { return d.name == name })
	if i < 0 {
		return 0, fmt.Errorf("unknown data link type %q", name)
	}
	return dataLinkTypes[i].lt, nil
}
