package project

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/labtap/labtap/controller/archive"
)

// Load registers every stored project, closed, then opens those whose
// auto_open is set, taking over what the computes report they still run
// (running, as for Adopt; nil if nothing is known). It returns the problems
// it met: projects that could not be read are skipped, projects that could
// not be opened stay closed.
func (s *Service) Load(ctx context.Context, running []Running) []error {
	s.Archives.sweepArchiveLeftovers()
	snaps, errs := s.core.cfg.Store.LoadAll()
	var autoOpen []string
	s.core.mu.Lock()
	for _, snap := range snaps {
		id := snap.Project.ID
		if _, dup := s.core.projects[id]; dup {
			errs = append(errs, fmt.Errorf("project %s in %s: the id is used by another project", id, snap.Project.Path))
			continue
		}
		st := newState(snap.Project)
		st.p.Status = Closed
		st.setStoredLocked(snap)
		s.core.projects[id] = st
		s.core.order = append(s.core.order, id)
		if snap.Project.Settings.AutoOpen {
			autoOpen = append(autoOpen, id)
		}
	}
	s.core.mu.Unlock()
	s.core.log.Info("projects loaded", "count", len(snaps), "errors", len(errs))
	for _, id := range autoOpen {
		var rs []Running
		for _, r := range running {
			if r.ProjectID == id {
				rs = append(rs, r)
			}
		}
		if _, err := s.openProject(ctx, id, rs); err != nil {
			errs = append(errs, fmt.Errorf("auto-open project %s: %w", id, err))
		}
	}
	return errs
}

// setStoredLocked replaces a closed project's nodes and links with stored
// ones. st.mu must be held.
func (st *state) setStoredLocked(snap *Snapshot) {
	st.nodes, st.nodeOrder = make(map[string]*Node), nil
	st.links, st.linkOrder = make(map[string]*Link), nil
	for i := range snap.Nodes {
		n := snap.Nodes[i]
		n.ProjectID = st.p.ID
		st.nodes[n.ID] = &n
		st.nodeOrder = append(st.nodeOrder, n.ID)
	}
	for i := range snap.Links {
		l := snap.Links[i]
		l.ProjectID, l.Wired, l.Computes, l.Capture = st.p.ID, false, nil, Capture{}
		st.links[l.ID] = &l
		st.linkOrder = append(st.linkOrder, l.ID)
	}
	st.drawings = make([]Drawing, 0, len(snap.Drawings))
	for _, d := range snap.Drawings {
		d.ProjectID = st.p.ID
		st.drawings = append(st.drawings, d)
	}
}

// OpenProject opens a closed project: it reads the project
// file as it is on disk now, creates its nodes on their computes, and wires
// every link that still has two valid endpoints (with its filters and its
// suspend, which GNS3 forgets). Opening an opened project does nothing. If
// anything fails, the computes forget the project and it stays closed.
func (s *Service) OpenProject(ctx context.Context, id string) (Project, error) {
	return s.openProject(ctx, id, nil)
}

// openProject opens a project, adopting what computes report they still
// run for it (nil: nothing).
func (s *Service) openProject(ctx context.Context, id string, running []Running) (_ Project, err error) {
	st, err := s.core.lockProject(id)
	if err != nil {
		return Project{}, err
	}
	defer st.unlock(&err)
	p := st.project()
	if p.Status == Opened {
		return p, nil
	}
	snap, err := s.core.cfg.Store.Load(&p)
	if err != nil {
		return Project{}, &Error{Kind: ErrConflict, Msg: fmt.Sprintf("Could not load project %s: %v", p.Name, err), Err: err}
	}
	opened := newState(p)
	opened.p.Status = Opened
	opened.p.Settings, opened.p.Extra = snap.Project.Settings, snap.Project.Extra
	for _, d := range snap.Drawings {
		d.ProjectID = id
		opened.drawings = append(opened.drawings, d)
	}
	if err := s.builder.build(ctx, opened, snap, running); err != nil {
		s.core.closeOn(context.WithoutCancel(ctx), id, slices.Collect(maps.Keys(opened.onComputes)), "close project after a failed open")
		return Project{}, err
	}
	st.mu.Lock()
	st.p = opened.p
	st.nodes, st.nodeOrder = opened.nodes, opened.nodeOrder
	st.links, st.linkOrder = opened.links, opened.linkOrder
	st.drawings = opened.drawings
	st.onComputes = opened.onComputes
	out := st.p
	st.mu.Unlock()
	s.core.saveLogged(st)
	s.core.emitLocked(st, Event{Action: ProjectOpened, Project: &out})
	s.core.log.Info("project opened", "project", id, "nodes", len(opened.nodeOrder), "links", len(opened.linkOrder))
	if out.Settings.AutoStart {
		s.core.log.Info("auto-starting nodes", "project", id)
		s.core.background(func(ctx context.Context) {
			if err := s.Nodes.StartAll(ctx, id); err != nil {
				s.core.log.Warn("auto-start", "project", id, "err", err)
			}
		})
	}
	return out, nil
}

// CloseProject closes a project: its computes stop its
// nodes and captures (files stay valid) and forget it; the controller keeps
// only what the project file holds. Closing a closed project does nothing.
func (s *Service) CloseProject(ctx context.Context, id string) (err error) {
	st, err := s.core.lockProject(id)
	if err != nil {
		return err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	p := st.p
	computes := st.openComputesLocked()
	st.mu.RUnlock()
	if p.Status == Closed {
		return nil
	}
	s.core.closeOn(ctx, id, computes, "close project on compute")
	// A closed project is its file: GNS3's tools may read it now.
	if _, err := s.core.fold(&p); err != nil {
		s.core.log.Error("write the project file whole at close", "project", id, "err", err)
	}
	st.mu.Lock()
	snap := st.snapshotLocked()
	st.p.Status = Closed
	st.setStoredLocked(snap)
	st.onComputes = make(map[string]bool)
	for _, n := range st.nodes {
		n.Status, n.CommandLine, n.NodeDirectory, n.ConsoleHost = Stopped, nil, nil, ""
	}
	out := st.p
	st.mu.Unlock()
	s.core.emitLocked(st, Event{Action: ProjectClosed, Project: &out})
	s.core.log.Info("project closed", "project", id)
	return nil
}

// ProjectUpdate changes a project's name and settings (PUT); nil members
// stay.
type ProjectUpdate struct {
	Name *string
	Path *string
	SettingsUpdate
}

// SettingsUpdate changes some of a project's settings; nil members stay.
// POST /v2/projects applies one to DefaultSettings, PUT to the project's.
type SettingsUpdate struct {
	AutoClose, AutoOpen, AutoStart   *bool
	SceneHeight, SceneWidth, Zoom    *int
	GridSize, DrawingGridSize        *int
	ShowLayers, SnapToGrid, ShowGrid *bool
	ShowInterfaceLabels              *bool
	Supplier, Variables              json.RawMessage // nil: unchanged; "null" clears
	CaptureDiskBudget                *int64
}

// Apply sets the members of s that u holds.
func (u SettingsUpdate) Apply(s *Settings) {
	set(&s.AutoClose, u.AutoClose)
	set(&s.AutoOpen, u.AutoOpen)
	set(&s.AutoStart, u.AutoStart)
	set(&s.SceneHeight, u.SceneHeight)
	set(&s.SceneWidth, u.SceneWidth)
	set(&s.Zoom, u.Zoom)
	set(&s.GridSize, u.GridSize)
	set(&s.DrawingGridSize, u.DrawingGridSize)
	set(&s.ShowLayers, u.ShowLayers)
	set(&s.SnapToGrid, u.SnapToGrid)
	set(&s.ShowGrid, u.ShowGrid)
	set(&s.ShowIfLabel, u.ShowInterfaceLabels)
	set(&s.CaptureDiskBudget, u.CaptureDiskBudget)
	if u.Supplier != nil {
		s.Supplier = nullToNil(u.Supplier)
	}
	if u.Variables != nil {
		s.Variables = nullToNil(u.Variables)
	}
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// UpdateProject applies settings, saves the file and announces the change
// if anything changed. A new name is not checked for uniqueness and does
// not rename the file (GNS3 does the same). A new path only creates that
// directory; files do not move.
func (s *Service) UpdateProject(ctx context.Context, id string, u ProjectUpdate) (_ Project, err error) {
	st, err := s.core.lockProject(id)
	if err != nil {
		return Project{}, err
	}
	defer st.unlock(&err)
	p := st.project()
	next := p
	if u.Name != nil {
		if *u.Name == "" {
			return Project{}, errorf(ErrInvalid, "Project name cannot be empty")
		}
		if err := CheckName("Project name", *u.Name); err != nil {
			return Project{}, err
		}
		next.Name = *u.Name
	}
	if u.Path != nil && *u.Path != p.Path {
		return Project{}, errorf(ErrConflict, "Moving a project to another directory is not supported")
	}
	u.SettingsUpdate.Apply(&next.Settings)
	if equalProjects(p, next) {
		return p, nil
	}
	st.change(func() {
		st.p = next
	})
	if err := s.core.save(st); err != nil {
		st.change(func() {
			st.p = p
		})
		return Project{}, err
	}
	s.core.emitLocked(st, Event{Action: ProjectUpdated, Project: &next})
	return next, nil
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if string(r) == "null" {
		return nil
	}
	return r
}

func equalProjects(a, b Project) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}

// Stats counts what a project holds; a closed project has nothing in
// memory, as in GNS3, but its snapshots, which are files.
type Stats struct {
	Nodes, Links, Drawings, Snapshots int
}

// ProjectStats returns a project's counts. A snapshot list that cannot be
// read counts none: the counts are for display.
func (s *Service) ProjectStats(id string) (Stats, error) {
	st, err := s.core.lookup(id)
	if err != nil {
		return Stats{}, err
	}
	st.mu.RLock()
	var stats Stats
	if st.p.Status == Opened {
		stats = Stats{Nodes: len(st.nodes), Links: len(st.links), Drawings: len(st.drawings)}
	}
	dir := st.p.Path
	st.mu.RUnlock()
	if snaps, err := archive.ReadSnapshots(dir); err == nil {
		stats.Snapshots = len(snaps)
	}
	return stats, nil
}

// AutoCloseIdle closes a project whose notification listeners have all
// been gone for the grace period, if it is opened and its auto_close is set
// (GNS3's default). Its computes stop its nodes and captures, so capture
// files end valid.
func (s *Service) AutoCloseIdle(ctx context.Context, id string) {
	p, err := s.Project(id)
	if err != nil || p.Status != Opened || !p.Settings.AutoClose {
		return
	}
	s.core.log.Info("auto-closing a project with no listener left", "project", id)
	if err := s.CloseProject(ctx, id); err != nil {
		s.core.log.Warn("auto-close", "project", id, "err", err)
	}
}

// CloseProjectsOn closes every opened project with a node on a compute
// (before the compute is removed). Failures are logged.
func (s *Service) CloseProjectsOn(ctx context.Context, computeID string) {
	for _, p := range s.Projects() {
		st, err := s.core.lookup(p.ID)
		if err != nil {
			continue
		}
		st.mu.RLock()
		uses := p.Status == Opened && slices.Contains(st.openComputesLocked(), computeID)
		st.mu.RUnlock()
		if uses {
			if err := s.CloseProject(ctx, p.ID); err != nil {
				s.core.log.Warn("close project of a removed compute", "project", p.ID, "err", err)
			}
		}
	}
}
