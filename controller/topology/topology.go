// Package topology stores projects as GNS3 project files: one directory per
// project holding "<name>.gns3", GNS3 2.2's JSON layout (revision 9), so a
// GNS3 user recognises the files, and beside it the journal of the changes
// made since it was last written whole (journal.go). Every write is
// atomic: after a crash at any moment the project is either as before the
// change or as after it.
package topology

import (
	"bytes"
	"encoding/json"
	"errors"

	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

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
	AutoClose bool `json:"auto_close"`
	AutoOpen  bool `json:"auto_open"`
	AutoStart bool `json:"auto_start"`
	// CaptureDiskBudget is labtap's (GNS3 ignores it), written only when set.
	CaptureDiskBudget   int64           `json:"capture_disk_budget,omitempty"`
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
		CaptureDiskBudget: p.Settings.CaptureDiskBudget,
		DrawingGridSize:   p.Settings.DrawingGridSize, GridSize: p.Settings.GridSize,
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

// Save writes a project's change durably: SaveAsync, then its wait.
func (s *Store) Save(snap *project.Snapshot) error {
	wait, err := s.SaveAsync(snap)
	if err != nil {
		return err
	}
	return wait()
}

// SaveAsync writes a project's change and returns a wait that returns
// once it is on disk. It writes the change as a record appended to the
// project's journal (journal.go); the first save of a project after a
// start, and a save that finds the journal past its bound, write the
// whole file atomically (atomicfile.Write: a crash leaves the old file or
// the new one, never a torn one) and start a new journal. Saves of one
// project must not run at once (their records would be in either order);
// their waits may, and those that wait together share one fsync.
func (s *Store) SaveAsync(snap *project.Snapshot) (func() error, error) {
	for {
		c := s.cacheOf(snap.Project.ID)
		c.mu.Lock()
		if c.gone { // retired meanwhile: take the new one
			c.mu.Unlock()
			continue
		}
		wait, err := s.saveLocked(c, snap)
		c.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("save project %s: %w", snap.Project.ID, err)
		}
		return wait, nil
	}
}

func noWait() error { return nil }

// writeFile writes a project file whole, atomically; tests make it fail.
var writeFile = atomicfile.Write

// journalBound is the least a journal may grow to before a save folds it:
// past it, a journal is folded when it outgrows the project file, so a
// fold's O(project) write comes once per O(project) bytes of changes.
const journalBound = 64 << 10

// IdleFold is how long a project's journal waits without a change before
// it is folded into the project file.
var IdleFold = 2 * time.Second

func (s *Store) saveLocked(c *projectCache, snap *project.Snapshot) (func() error, error) {
	p, err := s.prepare(c, snap)
	if err != nil {
		// The cache may hold some of this change's entries, which the
		// journal does not: the next save writes the file whole.
		if c.j != nil {
			s.dropJournal(c)
		}
		return nil, err
	}
	path := filepath.Join(snap.Project.Path, snap.Project.Filename)
	if c.j == nil || c.path != path || c.j.failed() != nil || c.j.size-int64(journalHeaderSize) > int64(max(journalBound, c.baseSize)) {
		data, err := assemble(p.top, p.items)
		if err != nil {
			return nil, err
		}
		return noWait, s.writeWhole(c, path, data, p)
	}
	rec := journalRecord{}
	if !bytes.Equal(p.top, c.top) {
		rec.Top = p.top
	}
	for i, k := range kinds {
		for _, id := range p.removed[i] {
			rec.Del = append(rec.Del, journalEntry{K: k, ID: id})
		}
		for _, n := range p.changed[i] {
			rec.Set = append(rec.Set, journalEntry{K: k, ID: p.ids[i][n], V: p.items[i][n]})
		}
		if !followsImplied(c.order[i], p.removed[i], p.added[i], p.ids[i]) {
			if rec.Order == nil {
				rec.Order = map[string][]string{}
			}
			rec.Order[k] = p.ids[i]
		}
	}
	j := c.j
	if rec.Top == nil && rec.Set == nil && rec.Del == nil && rec.Order == nil {
		// Nothing changed: durable once what came before is.
		seq := j.records()
		return func() error { return j.durable(seq) }, nil
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		s.dropJournal(c) // as below: the cache already holds the change
		return nil, err
	}
	seq, err := j.appendRecord(payload)
	if err != nil {
		// The cache holds this change's entries: the next save writes
		// the file whole.
		s.dropJournal(c)
		return nil, err
	}
	c.top, c.order = p.top, p.ids
	s.armIdle(c)
	return func() error { return j.durable(seq) }, nil
}

// followsImplied reports whether ids is the order a record implies
// without an order of its own: the previous one without the removed ids
// (sorted), the new ids appended. The cache's entries are those of prev
// (a journal follows the last save), so the new ids are those it lacked.
func followsImplied(prev, removed, added, ids []string) bool {
	n := 0
	for _, id := range prev {
		if len(removed) > 0 {
			if _, gone := slices.BinarySearch(removed, id); gone {
				continue
			}
		}
		if n >= len(ids) || ids[n] != id {
			return false
		}
		n++
	}
	for _, id := range added {
		if n >= len(ids) || ids[n] != id {
			return false
		}
		n++
	}
	return n == len(ids)
}

// writeWhole writes the project file whole (data, prepared as p) and
// starts a new journal after it. c.mu must be held.
func (s *Store) writeWhole(c *projectCache, path string, data []byte, p *prepared) error {
	if c.j != nil {
		s.dropJournal(c)
	}
	if err := writeFile(path, data, 0o644); err != nil {
		return err
	}
	c.path, c.top, c.order, c.baseSize = path, p.top, p.ids, len(data)
	j, err := createJournal(path+JournalSuffix, data)
	if err != nil {
		// The change is on disk; without a journal the next save writes
		// the file whole again. A journal of an older file is ignored.
		return nil
	}
	c.j = j
	return nil
}

// dropJournal closes c's journal; the next save writes the file whole.
// c.mu must be held.
func (s *Store) dropJournal(c *projectCache) {
	c.j.close()
	c.j = nil
	if c.idle != nil {
		c.idle.Stop()
	}
}

// armIdle (re)starts c's idle fold. c.mu must be held.
func (s *Store) armIdle(c *projectCache) {
	if c.idle != nil {
		c.idle.Reset(IdleFold)
		return
	}
	c.idle = time.AfterFunc(IdleFold, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		// Not into a directory removed meanwhile (atomicfile.Write would
		// make it again).
		if _, err := os.Stat(c.path); err == nil && !c.gone {
			s.foldLocked(c)
		}
	})
}

// foldLocked writes the file whole from c, if its journal holds records.
// c.mu must be held.
func (s *Store) foldLocked(c *projectCache) error {
	_, err := s.foldData(c)
	return err
}

// foldData is foldLocked, returning the file's content when it wrote it.
func (s *Store) foldData(c *projectCache) ([]byte, error) {
	if c.j == nil || c.j.records() == 0 {
		return nil, nil
	}
	var items [3][][]byte
	for i := range kinds {
		items[i] = make([][]byte, len(c.order[i]))
		for n, id := range c.order[i] {
			switch i {
			case 0:
				items[i][n] = c.drawings[id].data
			case 1:
				items[i][n] = c.links[id].data
			default:
				items[i][n] = c.nodes[id].data
			}
		}
	}
	data, err := assemble(c.top, items)
	if err != nil {
		return nil, err
	}
	if err := s.writeWhole(c, c.path, data, &prepared{top: c.top, ids: c.order}); err != nil {
		return nil, err
	}
	return data, nil
}

// Fold writes a project's journal into its file, so that the file holds
// every change (for those who read it: exports, GNS3's tools). A project
// saved before this start and not since has its journal read from disk.
func (s *Store) Fold(p *project.Project) error {
	_, err := s.FoldFile(p)
	return err
}

// FoldFile is Fold, and returns the file's content when it wrote it, nil
// when not: its reader need not read the file again.
func (s *Store) FoldFile(p *project.Project) ([]byte, error) {
	if c := s.cached(p.ID); c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.gone && c.j != nil {
			return s.foldData(c)
		}
	}
	_, data, err := s.foldFromDisk(filepath.Join(p.Path, p.Filename))
	return data, err
}

// Close folds every project's journal into its file (so that the files
// are whole for whoever reads them after the controller stops) and stops
// the idle folds. Saves after it work as before a start: each project's
// first one writes the file whole.
func (s *Store) Close() error {
	s.mu.Lock()
	caches := s.cache
	s.cache = nil
	s.mu.Unlock()
	var errs []error
	for _, c := range caches {
		errs = append(errs, s.retire(c, true))
	}
	return errors.Join(errs...)
}

// foldFromDisk folds the journal of the project file at path, read from
// disk, and returns the project and, when it wrote the file, its content
// (nil, nil, nil when there is no file).
func (s *Store) foldFromDisk(path string) (*project.Snapshot, []byte, error) {
	data, replayed, err := loadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	snap, err := Decode(data, filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, nil, err
	}
	if !replayed {
		return snap, nil, nil // not written: read it as any file
	}
	out, err := s.Encode(snap)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(path, out, 0o644); err != nil {
		return nil, nil, err
	}
	os.Remove(path + JournalSuffix)
	return snap, out, nil
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
	s.forget(p.ID, "")
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
	if err := unmarshal(data, &f); err != nil {
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
	if f.CaptureDiskBudget > 0 && f.CaptureDiskBudget <= project.MaxCaptureDiskBudget {
		s.CaptureDiskBudget = f.CaptureDiskBudget
	}
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

// Load reads the file of one project, with its journal's changes, as
// they are on disk now. What Save kept of the project is forgotten if it
// was of this file (not for a file a restore unpacks elsewhere): the file
// may have been changed by someone else, and the next save writes it
// whole.
func (s *Store) Load(p *project.Project) (*project.Snapshot, error) {
	path := filepath.Join(p.Path, p.Filename)
	s.forget(p.ID, path)
	data, _, err := loadFile(path)
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
		// The journal's changes go into the file now, for those who read
		// it while the project is closed.
		snap, _, err := s.foldFromDisk(files[0])
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
