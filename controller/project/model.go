// Package project is the controller's domain: projects, their nodes and
// links, the rules that govern them (naming, ports, link checks, capture
// side), and the Service that carries out every operation, running nodes
// and links on compute agents through the Computes interface it declares
// and saving every change through a Store.
//
// Values returned by the Service are copies: callers may keep them. Maps
// and slices inside them are shared and must be treated as read-only; the
// Service itself never edits them in place, it replaces them.
package project

import (
	"encoding/json"
	"slices"

	"github.com/labtap/labtap/capspec"
)

// Project statuses.
const (
	Opened = "opened"
	Closed = "closed"
)

// Project is a lab: its settings and where its files live.
type Project struct {
	ID       string
	Name     string
	Path     string // absolute directory
	Filename string // "<name>.gns3", fixed at creation
	Status   string // Opened or Closed
	Settings Settings
	// Extra is what the project file holds that labtap does not model.
	Extra FileExtra
}

// Settings are a project's GNS3 display and behaviour settings.
type Settings struct {
	AutoStart, AutoClose, AutoOpen                bool
	SceneHeight, SceneWidth, Zoom                 int
	GridSize, DrawingGridSize                     int
	ShowLayers, SnapToGrid, ShowGrid, ShowIfLabel bool
	// Supplier and Variables are client data kept verbatim; nil is JSON null.
	Supplier, Variables json.RawMessage
	// CaptureDiskBudget (labtap's capture_disk_budget) bounds the bytes
	// the project's capture files may hold on each agent; 0: no bound.
	CaptureDiskBudget int64
}

// MaxCaptureDiskBudget bounds Settings.CaptureDiskBudget.
const MaxCaptureDiskBudget = capspec.MaxProjectBudget

// DefaultSettings are GNS3's defaults for a new project.
func DefaultSettings() Settings {
	return Settings{AutoClose: true, SceneHeight: 1000, SceneWidth: 2000, Zoom: 100, GridSize: 75, DrawingGridSize: 25}
}

// Label is a text label as GNS3 stores it: the members the client sent,
// kept verbatim (missing ones are not filled in), with "text" owned by the
// server where GNS3 does so.
type Label map[string]json.RawMessage

// Node statuses.
const (
	Started   = "started"
	Stopped   = "stopped"
	Suspended = "suspended"
)

// Node is a device of a project, run by a compute.
type Node struct {
	ID, ProjectID, ComputeID string
	Type                     string
	Name                     string
	TemplateID               string // "" is null
	Status                   string
	Console                  int // 0 is null
	ConsoleHost              string
	ConsoleType              string // "" is null
	ConsoleAutoStart         bool
	CommandLine              *string // nil until the compute reports one
	NodeDirectory            *string
	Properties               map[string]any
	Label                    Label
	X, Y, Z                  int
	Locked                   bool
	Width, Height            int
	Symbol                   string
	PortNameFormat           string
	PortSegmentSize          int
	FirstPortName            *string
	CustomAdapters           []json.RawMessage
	// MACIndex is the last byte of the node's MAC, unique in the project.
	MACIndex int
	// Adapters are the network adapters of a node type with adapters
	// (docker, qemu), derived from its properties; nil for other types.
	Adapters []Adapter
	// Extra are the node's stored members labtap does not model.
	Extra Extra
	// Inert marks a node kept as its file has it, of a type labtap cannot
	// run: it stays stopped, and starting it is refused (archive.go).
	Inert bool
	// computeConsole is the console port the compute last reported, which
	// Console shows unless the node's console_type hides it (showConsole).
	computeConsole int
}

// Port is a network port of a node.
type Port struct {
	Name          string
	ShortName     string
	AdapterNumber int
	PortNumber    int
	LinkType      string            // "ethernet" or "serial"
	DataLinkTypes map[string]string // display name → DLT_ name
	// MACAddress and AdapterType are set for the ports of nodes with
	// adapters ("" is absent).
	MACAddress, AdapterType string
}

// Link types.
const (
	Ethernet = "ethernet"
	Serial   = "serial"
)

// Link joins two node ports.
type Link struct {
	ID, ProjectID string
	Endpoints     []Endpoint // in attachment order
	Filters       map[string][]any
	Style         json.RawMessage // any JSON object
	Suspend       bool
	LinkType      string
	Capture       Capture
	// Wired is true once the link runs on its compute(s): exactly two
	// endpoints and the relays are up.
	Wired bool
	// Computes lists where the link's relays run: one compute, or the two
	// of a link across computes, in endpoint order.
	Computes []string
	// Tunnel joins the two relays of a link across computes; nil otherwise.
	Tunnel *TunnelPorts
	// FilterSide is the endpoint whose relay applies a cross-compute
	// link's filters (see filterSide).
	FilterSide int
	// Extra are the link's stored members labtap does not model.
	Extra Extra
}

// TunnelPorts are the two ends of a link's UDP tunnel between computes:
// side i listens on Hosts[i]:Ports[i].
type TunnelPorts struct {
	Hosts [2]string
	Ports [2]int
}

// Endpoint is one end of a link.
type Endpoint struct {
	NodeID  string
	Adapter int
	Port    int
	Label   Label
	// Extra are the endpoint's stored members labtap does not model.
	Extra Extra
}

// Capture is a link's packet capture state: what its compute last
// reported (Active, the file's name and path, the spec, the counts), and
// where it runs.
type Capture struct {
	// FileName and FilePath stay after a stop ("" is null before any
	// capture), and so do the spec and the counts.
	capspec.State
	// ComputeID is set only while capturing.
	ComputeID string
	// LastComputeID is the compute of the last capture, kept after its
	// stop: where its files are.
	LastComputeID string
	// Side is the index of the endpoint whose node the capture depends on.
	Side int
}

// end marks the capture stopped; its file's name and path stay. final is
// what its compute reported last, if it could: its counts are kept.
func (c *Capture) end(final capspec.State) {
	if c.ComputeID != "" {
		c.LastComputeID = c.ComputeID
	}
	c.Active, c.ComputeID = false, ""
	c.report(final)
}

// report takes the counts (and the file being written) of a state a
// compute reported for this capture; a zero state changes nothing.
func (c *Capture) report(st capspec.State) {
	if st.FileName == "" {
		return
	}
	c.FileName, c.FilePath = st.FileName, st.FilePath
	c.Frames, c.Bytes, c.Dropped, c.Filtered, c.Files = st.Frames, st.Bytes, st.Dropped, st.Filtered, st.Files
	c.Err, c.Limit = st.Err, st.Limit
}

// capturedOn is the capture compute computeID writes at path on a link
// between nodes, with the side it depends on; ok is false when no end of
// the link is on that compute. A link within one compute (not tunneled)
// depends on the side GNS3 would pick.
func capturedOn(nodes []*Node, tunneled bool, computeID string, st capspec.State) (c Capture, ok bool) {
	side := slices.IndexFunc(nodes, func(n *Node) bool { return n.ComputeID == computeID })
	if side < 0 {
		return Capture{}, false
	}
	if !tunneled {
		if cs := captureSide(nodes); cs >= 0 {
			side = cs
		}
	}
	c = Capture{State: st, ComputeID: computeID, Side: side}
	c.Active = true
	if c.FileName == "" {
		c.FileName = baseName(st.FilePath)
	}
	return c, true
}

// Default node settings.
const (
	DefaultSymbol         = ":/symbols/computer.svg"
	DefaultPortNameFormat = "Ethernet{0}"
)

// ethernetDLTs is what an Ethernet port can be captured as.
var ethernetDLTs = map[string]string{"Ethernet": "DLT_EN10MB"}

// portsOf lists a node's ports, as its kind says (kinds.go).
func portsOf(n *Node) []Port {
	if k := kindOf(n.Type); k != nil {
		return k.ports(n)
	}
	return nil
}

// Ports lists a node's ports.
func (n *Node) Ports() []Port { return portsOf(n) }

func (n *Node) port(adapter, port int) (Port, bool) {
	for _, p := range portsOf(n) {
		if p.AdapterNumber == adapter && p.PortNumber == port {
			return p, true
		}
	}
	return Port{}, false
}
