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

	"github.com/labtap/labtap/controller/project"
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
}

// Topology is the "topology" object of a .gns3 file.
type Topology struct {
	Computes []json.RawMessage `json:"computes"`
	Drawings []json.RawMessage `json:"drawings"`
	Links    []Link            `json:"links"`
	Nodes    []Node            `json:"nodes"`
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
}

// Link is a link entry of a .gns3 file. Capture state is never stored.
type Link struct {
	Filters   map[string][]any `json:"filters"`
	LinkID    string           `json:"link_id"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Nodes     []Endpoint       `json:"nodes"`
	Suspend   bool             `json:"suspend"`
}

// Endpoint is a link end in a .gns3 file.
type Endpoint struct {
	AdapterNumber int           `json:"adapter_number"`
	Label         project.Label `json:"label"`
	NodeID        string        `json:"node_id"`
	PortNumber    int           `json:"port_number"`
}

// Encode turns a project into its .gns3 content: 4-space indented JSON.
func (s *Store) Encode(snap *project.Snapshot) ([]byte, error) {
	p := snap.Project
	f := File{
		AutoClose: p.Settings.AutoClose, AutoOpen: p.Settings.AutoOpen, AutoStart: p.Settings.AutoStart,
		DrawingGridSize: p.Settings.DrawingGridSize, GridSize: p.Settings.GridSize,
		Name: p.Name, ProjectID: p.ID, Revision: Revision,
		SceneHeight: p.Settings.SceneHeight, SceneWidth: p.Settings.SceneWidth,
		ShowGrid: p.Settings.ShowGrid, ShowInterfaceLabels: p.Settings.ShowIfLabel,
		ShowLayers: p.Settings.ShowLayers, SnapToGrid: p.Settings.SnapToGrid,
		Supplier: orNull(p.Settings.Supplier), Variables: orNull(p.Settings.Variables),
		Type: "topology", Version: s.Version, Zoom: p.Settings.Zoom,
		Topology: Topology{
			Computes: []json.RawMessage{}, Drawings: []json.RawMessage{},
			Links: make([]Link, 0, len(snap.Links)), Nodes: make([]Node, 0, len(snap.Nodes)),
		},
	}
	for _, n := range snap.Nodes {
		f.Topology.Nodes = append(f.Topology.Nodes, Node{
			ComputeID: n.ComputeID, Console: nullInt(n.Console), ConsoleAutoStart: n.ConsoleAutoStart,
			ConsoleType: nullStr(n.ConsoleType), CustomAdapters: n.CustomAdapters, FirstPortName: n.FirstPortName,
			Height: n.Height, Label: n.Label, Locked: n.Locked, Name: n.Name, NodeID: n.ID, NodeType: n.Type,
			PortNameFormat: n.PortNameFormat, PortSegmentSize: n.PortSegmentSize, Properties: n.Properties,
			Symbol: n.Symbol, TemplateID: nullStr(n.TemplateID), Width: n.Width, X: n.X, Y: n.Y, Z: n.Z,
		})
	}
	for _, l := range snap.Links {
		eps := make([]Endpoint, 0, len(l.Endpoints))
		for _, e := range l.Endpoints {
			eps = append(eps, Endpoint{AdapterNumber: e.Adapter, Label: e.Label, NodeID: e.NodeID, PortNumber: e.Port})
		}
		f.Topology.Links = append(f.Topology.Links, Link{
			Filters: l.Filters, LinkID: l.ID, LinkStyle: l.Style, Nodes: eps, Suspend: l.Suspend,
		})
	}
	return json.MarshalIndent(f, "", "    ")
}

// Save writes a project's file atomically: to "<file>.tmp", synced, then
// renamed over the file, then the directory is synced so the rename itself
// survives a power cut.
func (s *Store) Save(snap *project.Snapshot) error {
	data, err := s.Encode(snap)
	if err != nil {
		return fmt.Errorf("encode project %s: %w", snap.Project.ID, err)
	}
	return writeAtomic(filepath.Join(snap.Project.Path, snap.Project.Filename), data)
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
