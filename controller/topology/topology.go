// Package topology stores projects as GNS3 project files: one directory per
// project holding "<name>.gns3", GNS3 2.2's JSON layout (revision 9), so a
// GNS3 user recognises the files. Every write is atomic: after a crash at
// any moment the file is either the previous version or the new one.
package topology

import (
	"encoding/json"
	"errors"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/atomicfile"
)

// Revision is the project file revision GNS3 2.2 writes.
const Revision = 9

// Store reads and writes project files under a projects directory.
type Store struct {
	// Dir is the projects directory; Remove refuses anything outside it.
	Dir string
	// Version is written as the "version" of each file (the GNS3 version
	// the controller reports).
	Version string

	mu    sync.Mutex
	cache map[string]*projectCache // by project id: the entries last saved
	saves uint64
}

// File is a .gns3 file. Fields are in alphabetical order, as GNS3 sorts
// its keys.
type File struct {
	AutoClose           bool            `json:"auto_close"`
	AutoOpen            bool            `json:"auto_open"`
	AutoStart           bool            `json:"auto_start"`
	DrawingGridSize     int             `json:"drawing_grid_size"`
	GridSize            int             `json:"grid_size"`
	Name                string          `json:"name"`
	ProjectID           string          `json:"project_id"`
	Revision            int             `json:"revision"`
	SceneHeight         int             `json:"scene_height"`
	SceneWidth          int             `json:"scene_width"`
	ShowGrid            bool            `json:"show_grid"`
	ShowInterfaceLabels bool            `json:"show_interface_labels"`
	ShowLayers          bool            `json:"show_layers"`
	SnapToGrid          bool            `json:"snap_to_grid"`
	Supplier            json.RawMessage `json:"supplier"`
	Topology            Topology        `json:"topology"`
	Type                string          `json:"type"`
	Variables           json.RawMessage `json:"variables"`
	Version             string          `json:"version"`
	Zoom                int             `json:"zoom"`
	// Extra are the file's members labtap does not model (extra.go).
	Extra project.Extra `json:"-"`
}

// Topology is the "topology" object of a .gns3 file. Its "computes" (GNS3
// lists the remote computes there) is kept verbatim in Extra.
type Topology struct {
	Drawings []Drawing     `json:"drawings"`
	Links    []Link        `json:"links"`
	Nodes    []Node        `json:"nodes"`
	Extra    project.Extra `json:"-"`
}

// Drawing is a drawing entry of a .gns3 file.
type Drawing struct {
	DrawingID string        `json:"drawing_id"`
	Locked    bool          `json:"locked"`
	Rotation  int           `json:"rotation"`
	SVG       string        `json:"svg"`
	X         int           `json:"x"`
	Y         int           `json:"y"`
	Z         int           `json:"z"`
	Extra     project.Extra `json:"-"`
}

// Node is a node entry of a .gns3 file.
type Node struct {
	ComputeID        string            `json:"compute_id"`
	Console          *int              `json:"console"`
	ConsoleAutoStart bool              `json:"console_auto_start"`
	ConsoleType      *string           `json:"console_type"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	FirstPortName    *string           `json:"first_port_name"`
	Height           int               `json:"height"`
	Label            project.Label     `json:"label"`
	Locked           bool              `json:"locked"`
	Name             string            `json:"name"`
	NodeID           string            `json:"node_id"`
	NodeType         string            `json:"node_type"`
	PortNameFormat   string            `json:"port_name_format"`
	PortSegmentSize  int               `json:"port_segment_size"`
	Properties       map[string]any    `json:"properties"`
	Symbol           string            `json:"symbol"`
	TemplateID       *string           `json:"template_id"`
	Width            int               `json:"width"`
	X                int               `json:"x"`
	Y                int               `json:"y"`
	Z                int               `json:"z"`
	Extra            project.Extra     `json:"-"`
}

// Link is a link entry of a .gns3 file. Capture state is never stored.
type Link struct {
	Filters   map[string][]any `json:"filters"`
	LinkID    string           `json:"link_id"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Nodes     []Endpoint       `json:"nodes"`
	Suspend   bool             `json:"suspend"`
	Extra     project.Extra    `json:"-"`
}

// Endpoint is a link end in a .gns3 file.
type Endpoint struct {
	AdapterNumber int           `json:"adapter_number"`
	Label         project.Label `json:"label"`
	NodeID        string        `json:"node_id"`
	PortNumber    int           `json:"port_number"`
	Extra         project.Extra `json:"-"`
}

// Encode turns a project into its .gns3 content: 4-space indented JSON.
func (s *Store) Encode(snap *project.Snapshot) ([]byte, error) {
	// go-json: the same bytes as encoding/json, several times faster; the
	// whole file is rewritten on every change of a project. "<", ">" and
	// "&" stay as they are (drawings are SVG text), as GNS3 writes them.
	return gojson.MarshalIndentWithOption(s.fileOf(snap), "", "    ", gojson.DisableHTMLEscape())
}

// fileOf is a project's file, as Encode writes it.
func (s *Store) fileOf(snap *project.Snapshot) File {
	p := snap.Project
	f := File{
		AutoClose: p.Settings.AutoClose, AutoOpen: p.Settings.AutoOpen, AutoStart: p.Settings.AutoStart,
		DrawingGridSize: p.Settings.DrawingGridSize, GridSize: p.Settings.GridSize,
		Name: p.Name, ProjectID: p.ID, Revision: Revision,
		SceneHeight: p.Settings.SceneHeight, SceneWidth: p.Settings.SceneWidth,
		ShowGrid: p.Settings.ShowGrid, ShowInterfaceLabels: p.Settings.ShowIfLabel,
		ShowLayers: p.Settings.ShowLayers, SnapToGrid: p.Settings.SnapToGrid,
		Supplier: orNull(p.Settings.Supplier), Variables: orNull(p.Settings.Variables),
		Type: "topology", Version: s.Version, Zoom: p.Settings.Zoom, Extra: p.Extra.File,
		Topology: Topology{
			Drawings: make([]Drawing, 0, len(snap.Drawings)),
			Links:    make([]Link, 0, len(snap.Links)), Nodes: make([]Node, 0, len(snap.Nodes)),
			Extra: p.Extra.Topology,
		},
	}
	for _, d := range snap.Drawings {
		f.Topology.Drawings = append(f.Topology.Drawings, DrawingEntry(d))
	}
	for _, n := range snap.Nodes {
		f.Topology.Nodes = append(f.Topology.Nodes, NodeEntry(n))
	}
	for _, l := range snap.Links {
		f.Topology.Links = append(f.Topology.Links, LinkEntry(l))
	}
	return f
}

// Save writes a project's file atomically (atomicfile.Write): a crash
// leaves the old file or the new one, never a torn one. It encodes only
// what changed since the project's last save (incremental.go).
func (s *Store) Save(snap *project.Snapshot) error {
	data, err := s.encodeIncremental(snap)
	if err != nil {
		return fmt.Errorf("encode project %s: %w", snap.Project.ID, err)
	}
	return atomicfile.Write(filepath.Join(snap.Project.Path, snap.Project.Filename), data, 0o644)
}

// Remove deletes a project's directory. It refuses a directory that is not
// strictly inside the projects directory, however the path is spelled.
func (s *Store) Remove(p *project.Project) error {
	root, err := filepath.Abs(s.Dir)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(p.Path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return errors.New("project directory is not inside the projects directory")
	}
	s.forget(p.ID)
	return os.RemoveAll(dir)
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func nullInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func nullStr(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

var _ project.Store = (*Store)(nil)

// ErrRevision reports a project file written by a newer GNS3 than labtap
// reads.
var ErrRevision = errors.New("project file revision is newer than 9")

// Decode reads a .gns3 file's content into a snapshot of a closed project
// that lives in dir and is stored as filename. Unknown members are ignored,
// so files written by GNS3 2.2 (and 2.1, revision 8, which has the same
// layout) load as they are.
func Decode(data []byte, dir, filename string) (*project.Snapshot, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode %s: %w", filename, err)
	}
	if f.Type != "" && f.Type != "topology" {
		return nil, fmt.Errorf("decode %s: type %q is not a topology", filename, f.Type)
	}
	if f.Revision > Revision {
		return nil, fmt.Errorf("decode %s: revision %d: %w", filename, f.Revision, ErrRevision)
	}
	if f.ProjectID == "" || f.Name == "" {
		return nil, fmt.Errorf("decode %s: project_id and name are required", filename)
	}
	s := project.DefaultSettings()
	s.AutoClose, s.AutoOpen, s.AutoStart = f.AutoClose, f.AutoOpen, f.AutoStart
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&s.SceneHeight, f.SceneHeight)
	set(&s.SceneWidth, f.SceneWidth)
	set(&s.Zoom, f.Zoom)
	set(&s.GridSize, f.GridSize)
	set(&s.DrawingGridSize, f.DrawingGridSize)
	s.ShowGrid, s.ShowIfLabel, s.ShowLayers, s.SnapToGrid = f.ShowGrid, f.ShowInterfaceLabels, f.ShowLayers, f.SnapToGrid
	s.Supplier, s.Variables = nullToNil(f.Supplier), nullToNil(f.Variables)
	snap := &project.Snapshot{Project: project.Project{
		ID: f.ProjectID, Name: f.Name, Path: dir, Filename: filename, Status: project.Closed, Settings: s,
		Extra: project.FileExtra{File: f.Extra, Topology: f.Topology.Extra},
	}}
	for _, n := range f.Topology.Nodes {
		node := project.Node{
			ID: n.NodeID, ProjectID: f.ProjectID, ComputeID: n.ComputeID, Type: n.NodeType, Name: n.Name,
			Status: project.Stopped, ConsoleType: deref(n.ConsoleType), ConsoleAutoStart: n.ConsoleAutoStart,
			Properties: n.Properties, Label: n.Label, X: n.X, Y: n.Y, Z: n.Z, Locked: n.Locked,
			Width: n.Width, Height: n.Height, Symbol: n.Symbol, PortNameFormat: n.PortNameFormat,
			PortSegmentSize: n.PortSegmentSize, FirstPortName: n.FirstPortName, CustomAdapters: n.CustomAdapters,
			TemplateID: deref(n.TemplateID), Extra: n.Extra,
		}
		if n.Console != nil {
			node.Console = *n.Console
		}
		if node.ComputeID == "" {
			node.ComputeID = project.LocalCompute
		}
		if node.Properties == nil {
			node.Properties = map[string]any{}
		}
		if node.CustomAdapters == nil {
			node.CustomAdapters = []json.RawMessage{}
		}
		if node.PortNameFormat == "" {
			node.PortNameFormat = project.DefaultPortNameFormat
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	for _, l := range f.Topology.Links {
		link := project.Link{
			ID: l.LinkID, ProjectID: f.ProjectID, Filters: l.Filters, Style: l.LinkStyle, Suspend: l.Suspend,
			LinkType: project.Ethernet, Extra: l.Extra,
		}
		if link.Filters == nil {
			link.Filters = map[string][]any{}
		}
		if len(link.Style) == 0 || string(link.Style) == "null" {
			link.Style = json.RawMessage("{}")
		}
		for _, e := range l.Nodes {
			link.Endpoints = append(link.Endpoints, project.Endpoint{NodeID: e.NodeID, Adapter: e.AdapterNumber, Port: e.PortNumber, Label: e.Label, Extra: e.Extra})
		}
		snap.Links = append(snap.Links, link)
	}
	for _, d := range f.Topology.Drawings {
		snap.Drawings = append(snap.Drawings, project.Drawing{
			ID: d.DrawingID, ProjectID: f.ProjectID, X: d.X, Y: d.Y, Z: d.Z, Locked: d.Locked,
			Rotation: d.Rotation, SVG: d.SVG, Extra: d.Extra,
		})
	}
	return snap, nil
}

// Load reads the file of one project, as it is on disk now.
func (s *Store) Load(p *project.Project) (*project.Snapshot, error) {
	data, err := os.ReadFile(filepath.Join(p.Path, p.Filename))
	if err != nil {
		return nil, err
	}
	return Decode(data, p.Path, p.Filename)
}

// LoadAll reads every project under the projects directory: each
// subdirectory holding a .gns3 file (the first one in name order, as GNS3
// does). Projects that cannot be read are reported in errs and skipped.
func (s *Store) LoadAll() (snaps []*project.Snapshot, errs []error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, []error{err}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(s.Dir, e.Name())
		// A crash between writing a temp file and renaming it leaves the
		// temp file behind; the project file itself is intact.
		stale, _ := filepath.Glob(filepath.Join(dir, "*.gns3.*.tmp"))
		for _, f := range stale {
			os.Remove(f)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.gns3"))
		if len(files) == 0 {
			continue
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		snap, err := Decode(data, dir, filepath.Base(files[0]))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		snaps = append(snaps, snap)
	}
	return snaps, errs
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return nil
	}
	return r
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// NodeEntry is how a node is stored in a .gns3 file; a closed project's
// GET .../nodes answers with these (GNS3 does).
func NodeEntry(n project.Node) Node {
	return Node{
		ComputeID: n.ComputeID, Console: nullInt(n.Console), ConsoleAutoStart: n.ConsoleAutoStart,
		ConsoleType: nullStr(n.ConsoleType), CustomAdapters: n.CustomAdapters, FirstPortName: n.FirstPortName,
		Height: n.Height, Label: n.Label, Locked: n.Locked, Name: n.Name, NodeID: n.ID, NodeType: n.Type,
		PortNameFormat: n.PortNameFormat, PortSegmentSize: n.PortSegmentSize, Properties: n.Properties,
		Symbol: n.Symbol, TemplateID: nullStr(n.TemplateID), Width: n.Width, X: n.X, Y: n.Y, Z: n.Z,
		Extra: n.Extra,
	}
}

// LinkEntry is how a link is stored in a .gns3 file.
func LinkEntry(l project.Link) Link {
	eps := make([]Endpoint, 0, len(l.Endpoints))
	for _, e := range l.Endpoints {
		eps = append(eps, Endpoint{AdapterNumber: e.Adapter, Label: e.Label, NodeID: e.NodeID, PortNumber: e.Port, Extra: e.Extra})
	}
	return Link{Filters: l.Filters, LinkID: l.ID, LinkStyle: l.Style, Nodes: eps, Suspend: l.Suspend, Extra: l.Extra}
}

// DrawingEntry is how a drawing is stored in a .gns3 file; a closed
// project's GET .../drawings answers with these (GNS3 does).
func DrawingEntry(d project.Drawing) Drawing {
	return Drawing{
		DrawingID: d.ID, Locked: d.Locked, Rotation: d.Rotation, SVG: d.SVG, X: d.X, Y: d.Y, Z: d.Z, Extra: d.Extra,
	}
}
