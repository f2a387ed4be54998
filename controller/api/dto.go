package api

import (
	"encoding/json"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
)

// The reply shapes of GNS3's /v2 API. Members are declared in alphabetical
// order because GNS3 sorts its keys, and every member is always present,
// null rather than omitted, as clients expect.

type versionJSON struct {
	Local   bool   `json:"local"`
	Version string `json:"version"`
}

type capabilitiesJSON struct {
	NodeTypes []string `json:"node_types"`
	Platform  string   `json:"platform,omitempty"`
	Version   *string  `json:"version"`
	// Unavailable is labtap's: node types the compute cannot run, and why.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

type computeJSON struct {
	Capabilities capabilitiesJSON `json:"capabilities"`
	ComputeID    string           `json:"compute_id"`
	Connected    bool             `json:"connected"`
	CPUPercent   *float64         `json:"cpu_usage_percent"`
	// Draining is labtap's: the compute takes no new nodes.
	Draining      bool     `json:"draining"`
	Host          string   `json:"host"`
	LastError     *string  `json:"last_error"`
	MemoryPercent *float64 `json:"memory_usage_percent"`
	Name          string   `json:"name"`
	Port          int      `json:"port"`
	Protocol      string   `json:"protocol"`
	User          *string  `json:"user"`
}

func computeFrom(c compute.Compute) computeJSON {
	types := c.NodeTypes
	if types == nil {
		types = []string{}
	}
	return computeJSON{
		Capabilities:  capabilitiesJSON{NodeTypes: types, Platform: c.Platform, Unavailable: c.Unavailable},
		ComputeID:     c.ID,
		Connected:     c.Connected,
		CPUPercent:    c.CPUPercent,
		Draining:      c.Draining,
		Host:          c.Host,
		LastError:     nullStr(c.LastError),
		MemoryPercent: c.MemoryPercent,
		Name:          c.Name,
		Port:          c.Port,
		Protocol:      c.Protocol,
		User:          nullStr(c.User),
	}
}

type projectJSON struct {
	AutoClose           bool            `json:"auto_close"`
	AutoOpen            bool            `json:"auto_open"`
	AutoStart           bool            `json:"auto_start"`
	DrawingGridSize     int             `json:"drawing_grid_size"`
	Filename            string          `json:"filename"`
	GridSize            int             `json:"grid_size"`
	Name                string          `json:"name"`
	Path                string          `json:"path"`
	ProjectID           string          `json:"project_id"`
	SceneHeight         int             `json:"scene_height"`
	SceneWidth          int             `json:"scene_width"`
	ShowGrid            bool            `json:"show_grid"`
	ShowInterfaceLabels bool            `json:"show_interface_labels"`
	ShowLayers          bool            `json:"show_layers"`
	SnapToGrid          bool            `json:"snap_to_grid"`
	Status              string          `json:"status"`
	Supplier            json.RawMessage `json:"supplier"`
	Variables           json.RawMessage `json:"variables"`
	Zoom                int             `json:"zoom"`
	// CaptureDiskBudget is labtap's, shown only when set: GNS3 clients ignore it.
	CaptureDiskBudget int64 `json:"capture_disk_budget,omitempty"`
}

func projectFrom(p project.Project) projectJSON {
	s := p.Settings
	return projectJSON{
		AutoClose: s.AutoClose, AutoOpen: s.AutoOpen, AutoStart: s.AutoStart,
		DrawingGridSize: s.DrawingGridSize, Filename: p.Filename, GridSize: s.GridSize,
		Name: p.Name, Path: p.Path, ProjectID: p.ID,
		SceneHeight: s.SceneHeight, SceneWidth: s.SceneWidth,
		ShowGrid: s.ShowGrid, ShowInterfaceLabels: s.ShowIfLabel, ShowLayers: s.ShowLayers, SnapToGrid: s.SnapToGrid,
		Status: p.Status, Supplier: rawOrNull(s.Supplier), Variables: rawOrNull(s.Variables), Zoom: s.Zoom,
		CaptureDiskBudget: s.CaptureDiskBudget,
	}
}

type portJSON struct {
	AdapterNumber int               `json:"adapter_number"`
	DataLinkTypes map[string]string `json:"data_link_types"`
	LinkType      string            `json:"link_type"`
	Name          string            `json:"name"`
	PortNumber    int               `json:"port_number"`
	ShortName     string            `json:"short_name"`
	// Set for the ports of nodes with adapters (docker, qemu) only.
	MACAddress  string `json:"mac_address,omitempty"`
	AdapterType string `json:"adapter_type,omitempty"`
}

type nodeJSON struct {
	CommandLine      *string           `json:"command_line"`
	ComputeID        string            `json:"compute_id"`
	Console          *int              `json:"console"`
	ConsoleAutoStart bool              `json:"console_auto_start"`
	ConsoleHost      string            `json:"console_host"`
	ConsoleType      *string           `json:"console_type"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	FirstPortName    *string           `json:"first_port_name"`
	Height           int               `json:"height"`
	Label            project.Label     `json:"label"`
	Locked           bool              `json:"locked"`
	Name             string            `json:"name"`
	NodeDirectory    *string           `json:"node_directory"`
	NodeID           string            `json:"node_id"`
	NodeType         string            `json:"node_type"`
	PortNameFormat   string            `json:"port_name_format"`
	PortSegmentSize  int               `json:"port_segment_size"`
	Ports            []portJSON        `json:"ports"`
	ProjectID        string            `json:"project_id"`
	Properties       map[string]any    `json:"properties"`
	Status           string            `json:"status"`
	Symbol           *string           `json:"symbol"`
	TemplateID       *string           `json:"template_id"`
	Width            int               `json:"width"`
	X                int               `json:"x"`
	Y                int               `json:"y"`
	Z                int               `json:"z"`
}

func nodeFrom(n project.Node) nodeJSON {
	ports := n.Ports()
	pj := make([]portJSON, 0, len(ports))
	for _, p := range ports {
		pj = append(pj, portJSON{
			AdapterNumber: p.AdapterNumber, DataLinkTypes: p.DataLinkTypes, LinkType: p.LinkType,
			Name: p.Name, PortNumber: p.PortNumber, ShortName: p.ShortName,
			MACAddress: p.MACAddress, AdapterType: p.AdapterType,
		})
	}
	props := n.Properties
	if props == nil {
		props = map[string]any{}
	}
	adapters := n.CustomAdapters
	if adapters == nil {
		adapters = []json.RawMessage{}
	}
	return nodeJSON{
		CommandLine: n.CommandLine, ComputeID: n.ComputeID, Console: nullInt(n.Console),
		ConsoleAutoStart: n.ConsoleAutoStart, ConsoleHost: n.ConsoleHost, ConsoleType: nullStr(n.ConsoleType),
		CustomAdapters: adapters, FirstPortName: n.FirstPortName, Height: n.Height, Label: n.Label,
		Locked: n.Locked, Name: n.Name, NodeDirectory: n.NodeDirectory, NodeID: n.ID, NodeType: n.Type,
		PortNameFormat: n.PortNameFormat, PortSegmentSize: n.PortSegmentSize, Ports: pj,
		ProjectID: n.ProjectID, Properties: props, Status: n.Status, Symbol: nullStr(n.Symbol),
		TemplateID: nullStr(n.TemplateID), Width: n.Width, X: n.X, Y: n.Y, Z: n.Z,
	}
}

type endpointJSON struct {
	AdapterNumber int           `json:"adapter_number"`
	Label         project.Label `json:"label"`
	NodeID        string        `json:"node_id"`
	PortNumber    int           `json:"port_number"`
}

type linkJSON struct {
	CaptureComputeID *string `json:"capture_compute_id"`
	CaptureFileName  *string `json:"capture_file_name"`
	CaptureFilePath  *string `json:"capture_file_path"`
	// Capture is labtap's extension: the capture's full state (its spec,
	// the counts of frames written, dropped and filtered, its files), null
	// before any capture.
	Capture   *capspec.State   `json:"capture"`
	Capturing bool             `json:"capturing"`
	Filters   map[string][]any `json:"filters"`
	LinkID    string           `json:"link_id"`
	LinkStyle json.RawMessage  `json:"link_style"`
	LinkType  string           `json:"link_type"`
	Nodes     []endpointJSON   `json:"nodes"`
	ProjectID string           `json:"project_id"`
	Suspend   bool             `json:"suspend"`
}

func linkFrom(l project.Link) linkJSON {
	eps := make([]endpointJSON, 0, len(l.Endpoints))
	for _, e := range l.Endpoints {
		eps = append(eps, endpointJSON{AdapterNumber: e.Adapter, Label: e.Label, NodeID: e.NodeID, PortNumber: e.Port})
	}
	filters := l.Filters
	if filters == nil {
		filters = map[string][]any{}
	}
	var capture *capspec.State
	if l.Capture.FileName != "" {
		capture = &l.Capture.State
	}
	return linkJSON{
		Capture:          capture,
		CaptureComputeID: nullStr(l.Capture.ComputeID),
		CaptureFileName:  nullStr(l.Capture.FileName),
		CaptureFilePath:  nullStr(l.Capture.FilePath),
		Capturing:        l.Capture.Active,
		Filters:          filters,
		LinkID:           l.ID,
		LinkStyle:        rawOrObject(l.Style),
		LinkType:         l.LinkType,
		Nodes:            eps,
		ProjectID:        l.ProjectID,
		Suspend:          l.Suspend,
	}
}

func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func rawOrObject(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// mapAll converts every element of xs with f. The result is never nil, so
// an empty list is `[]` in JSON, as GNS3 answers, not `null`.
func mapAll[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}
