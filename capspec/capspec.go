// Package capspec is labtap's capture vocabulary: what a capture request
// may say (data link types, formats, a capture filter, size and time limits,
// ring files), its defaults and bounds, the rule for capture file names, and
// what a capture reports. The controller's API schema, its domain, the wire
// to the agents and the agent itself all use these names and this one
// [Spec.Check]; the check runs at the controller's API edge and at the
// agent's trust boundary, nowhere else.
//
// It depends on the standard library only, so every side imports it.
package capspec

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DLT is a data link type a capture may be written as: the DLT_ name GNS3
// clients use and the LINKTYPE value written in the file's header.
type DLT struct {
	Name     string
	LinkType uint16
}

// dlts lists the data link types GNS3 clients may ask for, in the order of
// GNS3's schema.
var dlts = []DLT{
	{"DLT_ATM_RFC1483", 100}, // libpcap's in-memory DLT is 11, the file says 100
	{"DLT_EN10MB", 1},
	{"DLT_FRELAY", 107},
	{"DLT_C_HDLC", 104},
	{"DLT_PPP_SERIAL", 50}, // PPP in HDLC-like framing
}

// DefaultDataLinkType is the data link type of a capture that names none.
const DefaultDataLinkType = "DLT_EN10MB"

// DataLinkTypes returns the data_link_type names a capture accepts.
func DataLinkTypes() []string {
	names := make([]string, len(dlts))
	for i, d := range dlts {
		names[i] = d.Name
	}
	return names
}

// LinkType returns the LINKTYPE of a DLT_ name, and whether it is one.
func LinkType(name string) (uint16, bool) {
	i := slices.IndexFunc(dlts, func(d DLT) bool { return d.Name == name })
	if i < 0 {
		return 0, false
	}
	return dlts[i].LinkType, true
}

// Capture file formats.
const (
	FormatPcap   = "pcap"   // classic libpcap 2.4, microsecond timestamps (the default)
	FormatPcapng = "pcapng" // one interface per direction, nanosecond timestamps
)

// Formats lists the capture formats, the default first.
func Formats() []string { return []string{FormatPcap, FormatPcapng} }

// Ext returns the file name extension of a format ("" is pcap).
func Ext(format string) string {
	if format == FormatPcapng {
		return ".pcapng"
	}
	return ".pcap"
}

// Bounds of a Spec. Zero limits mean no limit, as in GNS3 (which has none).
const (
	// MaxFilterLen bounds a capture filter's text, as a link bpf filter's
	// line. The agent compiles it with libpcap under the same budget as a
	// link filter (package pcapfilter).
	MaxFilterLen = 4096
	// MinMaxBytes keeps a file able to hold a full-size record (65,535
	// bytes plus its header) after its own header: a smaller limit would
	// make files that cannot hold what the link carries.
	MinMaxBytes = 128 << 10
	// MaxMaxBytes is 1 TiB.
	MaxMaxBytes = 1 << 40
	// MaxMaxSeconds is 30 days.
	MaxMaxSeconds = 30 * 24 * 3600
	// MaxMaxPackets bounds capture_max_packets: 2^40 records, as many as
	// MaxMaxBytes holds of the smallest.
	MaxMaxPackets = 1 << 40
	// MaxRingFiles bounds the files a ring keeps; RingDigits numbers them.
	MaxRingFiles = 99999
	RingDigits   = 5
	// MaxProjectBudget bounds capture_disk_budget, a project's capture
	// disk budget: 1 PiB.
	MaxProjectBudget = 1 << 50
	// MaxFileName bounds a file name, extension included: what most file
	// systems take.
	MaxFileName = 255
)

// Spec is a capture request. Its JSON names are those of the controller's
// start_capture body (GNS3's data_link_type and capture_file_name, and
// labtap's extensions), and the body of the agent's capture route.
type Spec struct {
	// FileName is the capture file's base name, extension included. At
	// the API edge it is the client's name, sanitised with CleanFileName;
	// on the wire it passes ValidFileName. With RingFiles > 1 the files are
	// RingName(FileName, 1), RingName(FileName, 2), ...
	FileName string `json:"capture_file_name,omitempty"`
	// DataLinkType is a DLT_ name; "" means DefaultDataLinkType.
	DataLinkType string `json:"data_link_type,omitempty"`
	// Format is FormatPcap (the default when empty) or FormatPcapng.
	Format string `json:"capture_format,omitempty"`
	// Filter is a tcpdump expression: only the frames it matches are
	// written. Every frame is still forwarded; "" writes every frame.
	Filter string `json:"capture_filter,omitempty"`
	// MaxBytes ends a file once it holds this many bytes: the capture
	// stops, or with RingFiles > 1 goes on in the next file. 0: no limit.
	MaxBytes int64 `json:"capture_max_bytes,omitempty"`
	// MaxSeconds ends a file this long after it began, as MaxBytes does.
	MaxSeconds int `json:"capture_max_seconds,omitempty"`
	// MaxPackets ends a file once it holds this many records (packets),
	// as MaxBytes does. 0: no limit.
	MaxPackets int64 `json:"capture_max_packets,omitempty"`
	// RingFiles > 1 keeps the newest RingFiles files of a capture whose
	// files end by a limit (dumpcap's -b); 0 and 1 mean one file.
	RingFiles int `json:"capture_ring_files,omitempty"`
	// ProjectBudget is the capture disk budget of the capture's project
	// (its capture_disk_budget setting), in bytes; 0: none. The controller
	// sets it from the project, whatever a client sent; the agent keeps
	// the project's capture files within it as with its own budget.
	ProjectBudget int64 `json:"capture_project_budget,omitempty"`
}

// Ring reports whether the capture writes a ring of files.
func (s Spec) Ring() bool { return s.RingFiles > 1 }

// Limited reports whether a limit ends the capture's files.
func (s Spec) Limited() bool { return s.MaxBytes > 0 || s.MaxSeconds > 0 || s.MaxPackets > 0 }

// WithDefaults returns s with the defaults filled in.
func (s Spec) WithDefaults() Spec {
	if s.DataLinkType == "" {
		s.DataLinkType = DefaultDataLinkType
	}
	if s.Format == "" {
		s.Format = FormatPcap
	}
	return s
}

// Check reports what is wrong with s, with its defaults filled in: an
// unknown data link type or format, a filter or limit out of bounds, a ring
// without a limit, or (when name is true) a file name that is not a plain
// one of the format's extension. The API edge checks a request before it has
// a name (name false); the agent checks everything.
func (s Spec) Check(name bool) error {
	s = s.WithDefaults()
	if _, ok := LinkType(s.DataLinkType); !ok {
		return fmt.Errorf("data_link_type %q: want one of %s", s.DataLinkType, strings.Join(DataLinkTypes(), ", "))
	}
	if !slices.Contains(Formats(), s.Format) {
		return fmt.Errorf("capture_format %q: want %q or %q", s.Format, FormatPcap, FormatPcapng)
	}
	if len(s.Filter) > MaxFilterLen {
		return fmt.Errorf("capture_filter: over %d bytes", MaxFilterLen)
	}
	if s.MaxBytes != 0 && (s.MaxBytes < MinMaxBytes || s.MaxBytes > MaxMaxBytes) {
		return fmt.Errorf("capture_max_bytes %d: want 0 (no limit) or %d to %d", s.MaxBytes, MinMaxBytes, int64(MaxMaxBytes))
	}
	if s.MaxSeconds < 0 || s.MaxSeconds > MaxMaxSeconds {
		return fmt.Errorf("capture_max_seconds %d: want 0 (no limit) to %d", s.MaxSeconds, MaxMaxSeconds)
	}
	if s.MaxPackets < 0 || s.MaxPackets > MaxMaxPackets {
		return fmt.Errorf("capture_max_packets %d: want 0 (no limit) to %d", s.MaxPackets, int64(MaxMaxPackets))
	}
	if s.RingFiles < 0 || s.RingFiles > MaxRingFiles {
		return fmt.Errorf("capture_ring_files %d: want 0 to %d", s.RingFiles, MaxRingFiles)
	}
	if s.ProjectBudget < 0 || s.ProjectBudget > MaxProjectBudget {
		return fmt.Errorf("capture_project_budget %d: want 0 (none) to %d", s.ProjectBudget, int64(MaxProjectBudget))
	}
	if s.Ring() && !s.Limited() {
		return fmt.Errorf("capture_ring_files %d needs capture_max_bytes, capture_max_seconds or capture_max_packets: a file must end for the next to begin", s.RingFiles)
	}
	if name && (!ValidFileName(s.FileName) || !strings.HasSuffix(s.FileName, Ext(s.Format))) {
		return fmt.Errorf("capture file name %q is not a plain file name ending in %s", s.FileName, Ext(s.Format))
	}
	return nil
}

// safe reports whether c may be in a file name stem.
func safe(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// ValidFileName reports whether name is a plain file name that stays in the
// directory it is joined to: not empty, at most MaxFileName bytes, not
// starting with a dot, made of [0-9A-Za-z_.-] only (so no separator).
func ValidFileName(name string) bool {
	if name == "" || len(name) > MaxFileName || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !safe(c) && c != '.' {
			return false
		}
	}
	return true
}

// maxStem keeps a file name within MaxFileName bytes with the longest
// extension and a ring number ("-00001.pcapng").
const maxStem = MaxFileName - len("-00001.pcapng")

// CleanStem returns s without the characters outside [0-9A-Za-z_-], cut to
// the bytes a name may have: the rule of GNS3's default capture names, and
// of the names labtap makes of clients' names.
func CleanStem(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < maxStem; i++ {
		if c := s[i]; safe(c) {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// CleanFileName turns a client's capture file name into a plain base name
// that cannot leave the captures folder: a trailing ".pcap" or ".pcapng" is
// set aside, every character outside [0-9A-Za-z_-] is removed (so "/", "\"
// and ".." vanish), and the format's extension is appended.
// "../../etc/x.pcap" becomes "etcx.pcap". GNS3 uses the client's name
// unchanged and so writes wherever it points. A name with
// no usable character left is an error.
func CleanFileName(name, format string) (string, error) {
	stem := name
	for _, e := range []string{".pcapng", ".pcap"} {
		if len(stem) >= len(e) && strings.EqualFold(stem[len(stem)-len(e):], e) {
			stem = stem[:len(stem)-len(e)]
			break
		}
	}
	stem = CleanStem(stem)
	if stem == "" {
		return "", fmt.Errorf("capture_file_name %q: no usable characters (letters, digits, '_' or '-')", name)
	}
	return stem + Ext(format), nil
}

// RingName returns the name of the n-th file (from 1) of a capture named
// name: "x.pcap" gives "x-00001.pcap".
func RingName(name string, n int) string {
	ext := ".pcap"
	if strings.HasSuffix(name, ".pcapng") {
		ext = ".pcapng"
	}
	return fmt.Sprintf("%s-%0*d%s", strings.TrimSuffix(name, ext), RingDigits, n, ext)
}

// IsRingName reports whether name is one of the files RingName(base, n)
// names, for some n.
func IsRingName(name, base string) bool {
	ext := ".pcap"
	if strings.HasSuffix(base, ".pcapng") {
		ext = ".pcapng"
	}
	stem := strings.TrimSuffix(base, ext) + "-"
	if !strings.HasPrefix(name, stem) || !strings.HasSuffix(name, ext) || len(name) < len(stem)+RingDigits+len(ext) {
		return false
	}
	for _, c := range name[len(stem) : len(name)-len(ext)] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// State is what a capture reports: the reply of the agent's capture routes,
// and what the controller's link representation shows of it.
type State struct {
	Active bool `json:"active"`
	// FilePath is the absolute path, on the agent's host, of the file
	// being written (the newest, for a ring); FileName its base name.
	FilePath string `json:"file_path"`
	FileName string `json:"file_name"`
	// Spec is the capture's request, defaults filled in.
	Spec Spec `json:"spec"`
	// Frames and Bytes count what has been written to the files.
	Frames uint64 `json:"frames"`
	Bytes  uint64 `json:"bytes"`
	// Dropped counts frames the link forwarded that are not in the file:
	// the disk could not keep up (the capture never slows the relay; it
	// drops and counts instead) or a write failed (e.g. disk full).
	Dropped uint64 `json:"dropped"`
	// Filtered counts frames the link forwarded that the capture filter
	// kept out of the file.
	Filtered uint64 `json:"filtered"`
	// Files counts the files the capture began (1 without a ring).
	Files int `json:"files"`
	// Err is why the capture ended by itself on a failure, empty otherwise.
	Err string `json:"error,omitempty"`
	// Limit is why the capture ended by itself at a limit it was given,
	// empty otherwise.
	Limit string `json:"limit,omitempty"`
}

// ProjectState is what a whole-project capture reports (the controller's
// POST /v2/projects/{id}/start_capture and stop_capture).
type ProjectState struct {
	ProjectID string `json:"project_id"`
	Capturing bool   `json:"capturing"`
	FileName  string `json:"capture_file_name"`
	// FilePath is on the controller's host.
	FilePath string `json:"capture_file_path"`
	// Links counts the links whose frames are being merged now;
	// Interfaces the file's interfaces (two per link that joined).
	Links      int    `json:"links"`
	Interfaces int    `json:"interfaces"`
	Frames     uint64 `json:"frames"`
	Bytes      uint64 `json:"bytes"`
}

// FileInfo is one capture file of a project, running or stopped, a ring's
// file included: an agent's list of a project's captures folder, and the
// controller's GET /v2/projects/{project_id}/captures, which merges every
// compute's and names each file's compute.
type FileInfo struct {
	// ComputeID is the compute that holds the file (the controller's list
	// only).
	ComputeID string `json:"compute_id,omitempty"`
	// FileName passes ValidFileName; with ComputeID it names the file.
	FileName string `json:"file_name"`
	// LinkID is the link whose capture wrote the file, "" where the file
	// does not say (a file from before captures noted it).
	LinkID string `json:"link_id"`
	Format string `json:"capture_format"`
	// Running says a running capture writes the file (or, for a ring, the
	// file is one of its files): it cannot be deleted.
	Running bool `json:"running"`
	// Size is the file's length in bytes; Records its whole records.
	Size    int64  `json:"size"`
	Records uint64 `json:"records"`
	// FirstTime and LastTime are the times of its first and last record,
	// null without records.
	FirstTime *time.Time `json:"first_time"`
	LastTime  *time.Time `json:"last_time"`
	// Dropped counts frames the capture could not write (FileInfo of a
	// running capture: all its files').
	Dropped uint64 `json:"dropped"`
	// Modified is when the file was last written: the retention removes
	// the oldest stopped files first.
	Modified time.Time `json:"modified"`
}

// CaptureExt reports whether name ends in a capture file's extension.
func CaptureExt(name string) bool {
	return strings.HasSuffix(name, ".pcap") || strings.HasSuffix(name, ".pcapng")
}
