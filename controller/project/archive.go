package project

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/labtap/labtap/controller/archive"
	"github.com/labtap/labtap/internal/atomicfile"
)

// Portable projects, duplicates and snapshots, as GNS3 2.2 has them, all made of package archive's export and safe extraction:
// a duplicate is an export imported under a new id, a snapshot an export
// kept in snapshots/, a restore an import into the same project.
//
// Every one of them is atomic: it unpacks into a temporary directory
// beside the projects (never into a live one), checks the result, and only
// then renames it into place; a failure removes the temporary directory
// and changes nothing else. One archive operation runs per project at a
// time; another one meanwhile is 409.

// ExportOptions are the project export's choices.
type ExportOptions = archive.ExportOptions

// MaxSnapshotName bounds a snapshot's name, in characters.
const MaxSnapshotName = 255

// SnapshotInfo is a snapshot as the API shows it.
type SnapshotInfo = archive.Snapshot

// SnapshotRestored is sent on a project's stream when a restore is done;
// the GNS3 GUI reloads the project on it.
const SnapshotRestored = "snapshot.restored"

var errBusy = &Error{Kind: ErrConflict, Msg: "Another operation is running on this project"}

// Archives are projects as zip archives: exports, imports, duplicates, and
// snapshots kept in the project's snapshots/ folder.
type Archives struct {
	core     *core
	builder  *builder
	drawings *Drawings
	running  sync.Map // project id → an archive operation runs
}

// beginArchiveOp marks project id as running an archive operation; the
// returned func ends it.
func (s *Archives) beginArchiveOp(id string) (func(), error) {
	if _, busy := s.running.LoadOrStore(id, true); busy {
		return nil, errBusy
	}
	return func() { s.running.Delete(id) }, nil
}

// refusal turns package archive's refusals into API errors: a refused
// entry or a corrupted file is 409 (GNS3's status), a limit 413.
func refusal(err error) error {
	var ae *archive.Error
	switch {
	case errors.As(err, &ae):
		return &Error{Kind: ErrConflict, Msg: ae.Msg, Err: err}
	case errors.Is(err, archive.ErrTooLarge):
		return &Error{Kind: ErrTooLarge, Msg: "Cannot import project: " + err.Error(), Err: err}
	case errors.Is(err, archive.ErrCompression):
		return &Error{Kind: ErrInvalid, Msg: err.Error(), Err: err}
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	return &Error{Kind: ErrInternal, Msg: "Could not import the project: " + pathless(err), Err: err}
}

// pathless is an error's text without the server paths os errors carry.
func pathless(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// checkStopped refuses a project some of whose nodes run (those that
// always run excepted), as GNS3 does before an export. st.mu must be held.
func (st *state) checkStoppedLocked(what string) error {
	for _, id := range st.nodeOrder {
		n := st.nodes[id]
		if n.Status != Stopped && !isAlwaysRunning(n.Type) {
			return errorf(ErrConflict, "Project must be stopped in order to %s it", what)
		}
	}
	return nil
}

// Export is a project export under way: it holds the project's lock, so
// nothing changes the files while they are read, until WriteTo returns.
type Export struct {
	// Name is the project's name, for the file name clients save.
	Name string
	s    *Archives
	st   *state
	end  func()
	dir  string
	opts ExportOptions
	file []byte
	// announce sends log.info when done (not for a snapshot or a copy).
	announce bool
}

// Export checks that a project can be exported (every node stopped)
// and returns the export, which holds the project until its WriteTo runs.
// The caller must call WriteTo exactly once.
func (s *Archives) Export(ctx context.Context, id string, opts ExportOptions) (*Export, error) {
	switch opts.Compression {
	case archive.Store, archive.Deflate, archive.Bzip2, archive.LZMA:
	default:
		return nil, errorf(ErrInvalid, "Unknown compression method %d", opts.Compression)
	}
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return nil, err
	}
	exp, err := s.export(ctx, id, opts, end, false)
	if exp != nil {
		exp.announce = true
	}
	return exp, err
}

// export is Export for a caller that marked the archive operation;
// end, called after WriteTo, ends it. A copy (duplicate) may be made while
// nodes run, and takes the node files (VPCS startup.vpc) from the computes,
// where clients change them, over the project directory's.
func (s *Archives) export(ctx context.Context, id string, opts ExportOptions, end func(), copying bool) (*Export, error) {
	st, err := s.core.lockProject(id)
	if err != nil {
		end()
		return nil, err
	}
	fail := func(err error) (*Export, error) {
		st.ops.Unlock()
		end()
		return nil, err
	}
	st.mu.RLock()
	p := st.p
	if !copying {
		err = st.checkStoppedLocked("export")
	}
	var withFiles []Node
	if copying && p.Status == Opened {
		for _, nid := range st.nodeOrder {
			if n := st.nodes[nid]; n.Type == "vpcs" && !n.Inert {
				withFiles = append(withFiles, *n)
			}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return fail(err)
	}
	if opts.Warn == nil {
		log := s.core.log.With("project", id)
		opts.Warn = func(msg string) {
			log.Warn("export", "msg", msg)
			s.core.cfg.Events.Emit(Event{Action: LogWarning, ProjectID: id, Message: msg})
		}
	}
	opts.Files = s.nodeFiles(ctx, p.ID, withFiles, opts.Warn)
	// Images come only from the image directories, never from a path a
	// node names as it is (GNS3 bug 3.1.3).
	opts.Images = nil
	if opts.IncludeImages {
		st.mu.RLock()
		nodes := make([]Node, 0, len(st.nodeOrder))
		for _, nid := range st.nodeOrder {
			nodes = append(nodes, *st.nodes[nid])
		}
		st.mu.RUnlock()
		opts.Images = s.exportImages(nodes, opts.Warn)
	}
	if p.Filename == "" {
		return fail(errorf(ErrConflict, "Cannot export project: it has no project file"))
	}
	// The file as saved: every change is saved before it is acknowledged,
	// and it holds what labtap does not model (drawings, unknown members).
	// The changes still in the Store's journal go into it first.
	data, err := s.core.fold(&p)
	if err != nil {
		return fail(&Error{Kind: ErrConflict, Msg: "Cannot export project: " + pathless(err), Err: err})
	}
	if data == nil { // not at hand: the file holds it
		if data, err = os.ReadFile(filepath.Join(p.Path, p.Filename)); err != nil {
			return fail(&Error{Kind: ErrConflict, Msg: "Cannot export project: " + pathless(err), Err: err})
		}
	}
	return &Export{Name: p.Name, s: s, st: st, end: end, dir: p.Path, opts: opts, file: data}, nil
}

// WriteTo writes the .gns3project to w and releases the project.
func (e *Export) WriteTo(w io.Writer) (int64, error) {
	defer e.end()
	defer e.st.ops.Unlock()
	cw := &countWriter{w: w}
	err := archive.Export(cw, e.dir, e.file, e.opts)
	id := e.st.project().ID
	if err != nil {
		e.s.core.log.Warn("export ended early", "project", id, "err", err)
	} else if e.announce {
		e.s.core.cfg.Events.Emit(Event{Action: LogInfo, ProjectID: id, Message: fmt.Sprintf("Project %s exported (%d bytes)", e.Name, cw.n)})
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// importSpec is how an archive becomes a project.
type importSpec struct {
	name        string // wanted name; "" takes the archive's
	keepCompute bool
	set         map[string]any // project file members to set
	// withSnapshots keeps the archive's snapshots/.
	withSnapshots bool
}

// Import makes project id from a .gns3project archive read from
// body, which is first written to a temporary file beside the projects
// (never held in memory): every node, link and drawing gets a new id, every node is placed
// on the local compute, and the project is registered closed with
// auto_start and auto_open off and auto_close on (GNS3 2.2). name, when
// not empty, is the wanted name; a taken name gets "-1", "-2", ... Node
// types labtap cannot run are kept as they are (they stay stopped). An id
// in use is 409, the archive is refused whole for any entry that could
// leave the project (section 3.1), and a failure leaves nothing behind.
func (s *Archives) Import(ctx context.Context, id string, body io.Reader, name string) (Project, error) {
	if err := uuid.Validate(id); err != nil {
		return Project{}, errorf(ErrInvalid, "Invalid project ID %s", id)
	}
	if _, err := s.core.lookup(id); err == nil {
		return Project{}, errorf(ErrConflict, "Project ID %s already exists", id)
	}
	if err := os.MkdirAll(s.core.cfg.ProjectsDir, 0o755); err != nil {
		return Project{}, refusal(err)
	}
	tmp, err := os.CreateTemp(s.core.cfg.ProjectsDir, ".upload-*.gns3project")
	if err != nil {
		return Project{}, refusal(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.Copy(tmp, body)
	if err != nil {
		if _, ok := errors.AsType[*Error](err); ok {
			return Project{}, err // the caller's limit
		}
		return Project{}, &Error{Kind: ErrInvalid, Msg: "Cannot read the project archive: " + pathless(err), Err: err}
	}
	set := map[string]any{"auto_start": false, "auto_open": false, "auto_close": true}
	return s.importArchive(ctx, id, tmp, size, importSpec{name: name, set: set, withSnapshots: true})
}

func (s *Archives) importArchive(ctx context.Context, id string, r io.ReaderAt, size int64, spec importSpec) (Project, error) {
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return Project{}, err
	}
	defer end()
	if _, err := s.core.lookup(id); err == nil {
		return Project{}, errorf(ErrConflict, "Project ID %s already exists", id)
	}
	zr, err := archive.Open(r, size)
	if err != nil {
		return Project{}, refusal(err)
	}
	if err := archive.Check(zr, s.core.cfg.ArchiveLimits); err != nil {
		return Project{}, refusal(err)
	}
	data, err := archive.ReadProjectFile(zr)
	if err != nil {
		return Project{}, refusal(err)
	}
	if spec.name == "" {
		if spec.name = archiveName(data); spec.name == "" {
			return Project{}, errorf(ErrConflict, "Cannot import project, the project.gns3 file is corrupted")
		}
	}
	if err := checkProjectName(spec.name); err != nil {
		return Project{}, err
	}
	root, err := filepath.Abs(s.core.cfg.ProjectsDir)
	if err != nil {
		return Project{}, refusal(err)
	}
	final := filepath.Join(root, id)
	if _, err := os.Lstat(final); err == nil {
		return Project{}, errorf(ErrConflict, "Project ID %s already exists", id)
	}
	name := s.freeProjectName(spec.name)
	imp, err := archive.ImportProjectFile(data, archive.ImportRewrite{
		ProjectID: id, Name: name, NewID: uuid.NewString, KeepComputeIDs: spec.keepCompute, Set: spec.set,
	})
	if err != nil {
		return Project{}, refusal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Project{}, refusal(err)
	}
	tmp, err := os.MkdirTemp(root, ".import-*")
	if err != nil {
		return Project{}, refusal(err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	skip := func(entry string) bool {
		return entry == archive.ProjectFile || entry == "images" || strings.HasPrefix(entry, "images/") ||
			!spec.withSnapshots && (entry == archive.SnapshotsDir || strings.HasPrefix(entry, archive.SnapshotsDir+"/"))
	}
	if err := archive.Extract(zr, tmp, s.core.cfg.ArchiveLimits, skip); err != nil {
		return Project{}, refusal(err)
	}
	s.installImages(id, zr)
	for old, niu := range imp.NodeDirs {
		if err := os.Rename(filepath.Join(tmp, old), filepath.Join(tmp, niu)); err != nil && !os.IsNotExist(err) {
			return Project{}, refusal(err)
		}
	}
	if err := retagSnapshots(tmp, id); err != nil {
		return Project{}, refusal(err)
	}
	p := Project{ID: id, Name: name, Path: tmp, Filename: fileName(name), Status: Closed}
	if err := atomicfile.Write(filepath.Join(tmp, p.Filename), imp.Data, 0o644); err != nil {
		return Project{}, refusal(err)
	}
	snap, err := s.core.cfg.Store.Load(&p)
	if err != nil {
		return Project{}, &Error{Kind: ErrConflict, Msg: "Invalid data in topology file: " + pathless(err), Err: err}
	}
	for _, n := range snap.Nodes {
		if err := checkProperties(n.Name, n.Properties); err != nil {
			return Project{}, err // as a request would be
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return Project{}, refusal(err)
	}
	done = true
	snap.Project.Path, snap.Project.Status = final, Closed
	s.core.mu.Lock()
	if _, taken := s.core.projects[id]; taken {
		s.core.mu.Unlock()
		os.RemoveAll(final)
		return Project{}, errorf(ErrConflict, "Project ID %s already exists", id)
	}
	st := newState(snap.Project)
	st.setStoredLocked(snap)
	s.core.projects[id] = st
	s.core.order = append(s.core.order, id)
	out := st.p
	s.core.mu.Unlock()
	s.core.cfg.Events.Emit(Event{Action: ProjectCreated, ProjectID: id, Project: &out})
	s.core.log.Info("project imported", "project", id, "name", name, "nodes", len(snap.Nodes), "links", len(snap.Links))
	if unrun := s.unrunnable(snap.Nodes); len(unrun) > 0 {
		s.core.log.Warn("imported project has node types this server cannot run; they stay stopped", "project", id, "types", unrun)
	}
	return out, nil
}

// archiveName is the name a project file gives, "" if none.
func archiveName(data []byte) string {
	var doc struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return ""
	}
	return doc.Name
}

// retagSnapshots points the snapshots of a project copied into dir at
// its new id.
func retagSnapshots(dir, id string) error {
	list, err := archive.ReadSnapshots(dir)
	if err != nil || len(list) == 0 {
		return nil // an unreadable list is left as it came; listing reports it
	}
	for i := range list {
		list[i].ProjectID = id
	}
	return archive.WriteSnapshots(dir, list)
}

// unrunnable lists the node types of nodes labtap cannot run.
func (s *Archives) unrunnable(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if !runnable(n.Type) && !slices.Contains(out, n.Type) {
			out = append(out, n.Type)
		}
	}
	return out
}

// checkProjectName bounds a project name taken from a client or archive:
// the project's own name check (CheckName), and not empty.
func checkProjectName(name string) error {
	if name == "" {
		return errorf(ErrInvalid, "Project name cannot be empty")
	}
	return CheckName("Project name", name)
}

// freeProjectName is name, or the first of "name-1", "name-2", ... that no
// project has (GNS3's get_free_project_name).
func (s *Archives) freeProjectName(name string) string {
	s.core.mu.RLock()
	defer s.core.mu.RUnlock()
	taken := s.core.nameTakenLocked
	if !taken(name) {
		return name
	}
	for i := 1; ; i++ {
		// Cut name, at a character, so that the numbered name stays within
		// MaxNameBytes as every name does.
		suffix, base := fmt.Sprintf("-%d", i), name
		for len(base)+len(suffix) > MaxNameBytes {
			_, size := utf8.DecodeLastRuneInString(base)
			base = base[:len(base)-size]
		}
		if n := base + suffix; !taken(n) {
			return n
		}
	}
}

// nodeFiles reads the files clients edit of nodes from their computes
// (VPCS: startup.vpc), named as the project directory has them. A node
// without one has none; a file that cannot be read is left as the
// directory has it, with a warning.
func (s *Archives) nodeFiles(ctx context.Context, projectID string, nodes []Node, warn func(string)) map[string][]byte {
	files := map[string][]byte{}
	for _, n := range nodes {
		data, err := s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, projectID, n.ID, "startup.vpc")
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			warn(fmt.Sprintf("Could not read the startup.vpc of %s from compute %s: %v", n.Name, n.ComputeID, err))
		default:
			files["project-files/vpcs/"+n.ID+"/startup.vpc"] = data
		}
	}
	return files
}

// DuplicateRequest is a request to duplicate a project.
type DuplicateRequest struct {
	Name      string // "" is the source's name
	ResetMACs bool
}

// Duplicate copies a project under a new id: its export (snapshots
// included, compute ids kept, MACs reset if asked) imported as a new,
// closed project with new node, link and drawing ids. The copy keeps the
// source's auto_close; auto_start and auto_open are off. Nodes may run, as
// in GNS3: the project is held while it is read, so no API change comes
// between its files, and the nodes' files come from their computes; a file
// a running emulator writes meanwhile (a QEMU disk) is copied as it is. The
// source is left as it is, opened or closed, and a failure leaves nothing
// behind.
func (s *Archives) Duplicate(ctx context.Context, id string, req DuplicateRequest) (Project, error) {
	src, err := s.core.project(id)
	if err != nil {
		return Project{}, err
	}
	if req.Name == "" {
		req.Name = src.Name // "name": null (GNS3 then takes a free name after the source's)
	}
	if err := checkProjectName(req.Name); err != nil {
		return Project{}, err
	}
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return Project{}, err
	}
	exp, err := s.export(ctx, id, ExportOptions{
		IncludeSnapshots: true, KeepComputeIDs: true, ResetMACs: req.ResetMACs, Compression: archive.Store,
		Warn: func(msg string) { s.core.log.Warn("duplicate", "project", id, "msg", msg) },
	}, end, true)
	if err != nil {
		return Project{}, err
	}
	tmp, err := os.CreateTemp(s.core.cfg.ProjectsDir, ".duplicate-*.gns3project")
	if err != nil {
		exp.WriteTo(io.Discard)
		return Project{}, refusal(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := exp.WriteTo(tmp); err != nil {
		return Project{}, &Error{Kind: ErrConflict, Msg: "Cannot duplicate project: " + pathless(err), Err: err}
	}
	info, err := tmp.Stat()
	if err != nil {
		return Project{}, refusal(err)
	}
	set := map[string]any{"auto_start": false, "auto_open": false, "auto_close": src.Settings.AutoClose}
	return s.importArchive(ctx, uuid.NewString(), tmp, info.Size(), importSpec{name: req.Name, keepCompute: true, set: set, withSnapshots: true})
}

// Snapshots lists a project's snapshots by creation time, then name. A
// closed project's too.
func (s *Archives) Snapshots(id string) ([]SnapshotInfo, error) {
	p, err := s.core.project(id)
	if err != nil {
		return nil, err
	}
	list, err := archive.ReadSnapshots(p.Path)
	if err != nil {
		return nil, &Error{Kind: ErrConflict, Msg: err.Error(), Err: err}
	}
	slices.SortStableFunc(list, func(a, b SnapshotInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.Name, b.Name))
	})
	if list == nil {
		list = []SnapshotInfo{}
	}
	return list, nil
}

// SnapshotCreate asks for a snapshot.
type SnapshotCreate struct {
	Name        string
	Description string // "" is GNS3's generated text
}

// CreateSnapshot exports an opened project, every node stopped, into
// snapshots/<snapshot_id>.gns3snapshot (uncompressed, compute ids kept)
// and adds it to snapshots.conf. Names are 1 to 255 printable characters,
// unique in the project; they never name a file.
func (s *Archives) CreateSnapshot(ctx context.Context, id string, req SnapshotCreate) (SnapshotInfo, error) {
	if req.Name == "" || utf8.RuneCountInString(req.Name) > MaxSnapshotName || strings.ContainsFunc(req.Name, unicode.IsControl) {
		return SnapshotInfo{}, errorf(ErrInvalid, "Snapshot name must be 1 to %d printable characters", MaxSnapshotName)
	}
	if utf8.RuneCountInString(req.Description) > 1024 {
		return SnapshotInfo{}, errorf(ErrInvalid, "Snapshot description must be at most 1024 characters")
	}
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer end()
	p, err := s.core.project(id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if p.Status != Opened {
		return SnapshotInfo{}, errNotOpened
	}
	list, err := archive.ReadSnapshots(p.Path)
	if err != nil {
		return SnapshotInfo{}, &Error{Kind: ErrConflict, Msg: err.Error(), Err: err}
	}
	if slices.ContainsFunc(list, func(x SnapshotInfo) bool { return x.Name == req.Name }) {
		return SnapshotInfo{}, errorf(ErrConflict, "The snapshot name %s already exists", req.Name)
	}
	exp, err := s.export(ctx, id, ExportOptions{KeepComputeIDs: true, Compression: archive.Store,
		Warn: func(msg string) { s.core.log.Warn("snapshot", "project", id, "msg", msg) }}, func() {}, false)
	if err != nil {
		return SnapshotInfo{}, err
	}
	now := time.Now()
	snap := SnapshotInfo{
		CreatedAt: now.Unix(), Description: cmp.Or(req.Description, archive.Describe(req.Name, now)),
		Name: req.Name, ProjectID: id, SnapshotID: uuid.NewString(),
	}
	snap.Filename = snap.SnapshotID + archive.SnapshotExt
	dir := filepath.Join(p.Path, archive.SnapshotsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		exp.WriteTo(io.Discard)
		return SnapshotInfo{}, &Error{Kind: ErrInternal, Msg: "Could not create the snapshot directory: " + pathless(err), Err: err}
	}
	tmp, err := atomicfile.Create(filepath.Join(dir, snap.Filename), 0o644)
	if err != nil {
		exp.WriteTo(io.Discard)
		return SnapshotInfo{}, &Error{Kind: ErrConflict, Msg: "Could not create snapshot file: " + pathless(err), Err: err}
	}
	if _, err = exp.WriteTo(tmp); err == nil {
		err = tmp.Commit()
	} else {
		tmp.Abort()
	}
	if err != nil {
		return SnapshotInfo{}, &Error{Kind: ErrConflict, Msg: "Could not create snapshot file: " + pathless(err), Err: err}
	}
	if err := archive.WriteSnapshots(p.Path, append(list, snap)); err != nil {
		os.Remove(filepath.Join(dir, snap.Filename))
		return SnapshotInfo{}, &Error{Kind: ErrConflict, Msg: "Could not write snapshot list: " + pathless(err), Err: err}
	}
	s.core.log.Info("snapshot created", "project", id, "snapshot", snap.SnapshotID)
	return snap, nil
}

// snapshot finds one snapshot of an opened project.
func (s *Archives) snapshot(id, snapshotID string) (Project, []SnapshotInfo, SnapshotInfo, error) {
	p, err := s.core.project(id)
	if err != nil {
		return Project{}, nil, SnapshotInfo{}, err
	}
	if p.Status != Opened {
		return Project{}, nil, SnapshotInfo{}, errNotOpened
	}
	list, err := archive.ReadSnapshots(p.Path)
	if err != nil {
		return Project{}, nil, SnapshotInfo{}, &Error{Kind: ErrConflict, Msg: err.Error(), Err: err}
	}
	i := slices.IndexFunc(list, func(x SnapshotInfo) bool { return x.SnapshotID == snapshotID })
	if i < 0 {
		return Project{}, nil, SnapshotInfo{}, errorf(ErrNotFound, "Snapshot ID %s doesn't exist", snapshotID)
	}
	return p, list, list[i], nil
}

// DeleteSnapshot forgets a snapshot and deletes its file.
func (s *Archives) DeleteSnapshot(ctx context.Context, id, snapshotID string) error {
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return err
	}
	defer end()
	p, list, snap, err := s.snapshot(id, snapshotID)
	if err != nil {
		return err
	}
	list = slices.DeleteFunc(list, func(x SnapshotInfo) bool { return x.SnapshotID == snapshotID })
	if err := archive.WriteSnapshots(p.Path, list); err != nil {
		return &Error{Kind: ErrConflict, Msg: "Could not write snapshot list: " + pathless(err), Err: err}
	}
	if f := archive.SnapshotPath(p.Path, snap); f != "" {
		if err := os.Remove(f); err != nil {
			s.core.log.Warn("delete snapshot file", "project", id, "snapshot", snapshotID, "err", err)
		}
	}
	return nil
}

// RestoreSnapshot puts an opened project back as a snapshot has it. The
// snapshot is unpacked and checked first, beside the project; only then
// are the project's nodes stopped and its directory swapped with the
// unpacked one (snapshots/ and captures carried over), and the project
// built again from it, with the ids and computes the snapshot holds. If
// anything fails, the project is put back as it was. Listeners get
// link.deleted, node.deleted and drawing.deleted for everything that was
// there, then node.created, link.created and drawing.created for
// everything restored, then
// snapshot.restored (the GUI reloads the project on it); never
// project.closed.
func (s *Archives) RestoreSnapshot(ctx context.Context, id, snapshotID string) (_ Project, err error) {
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return Project{}, err
	}
	defer end()
	st, err := s.core.lockOpened(id)
	if err != nil {
		return Project{}, err
	}
	defer st.unlock(&err)
	p, _, snapInfo, err := s.snapshot(id, snapshotID)
	if err != nil {
		return Project{}, err
	}
	file := archive.SnapshotPath(p.Path, snapInfo)
	if file == "" {
		return Project{}, errorf(ErrNotFound, "Snapshot ID %s doesn't exist", snapshotID)
	}
	if err := s.replaceLocked(ctx, st, p, file, false, "Cannot restore snapshot"); err != nil {
		return Project{}, err
	}
	out := st.project()
	info := snapInfo
	s.core.emitLocked(st, Event{Action: SnapshotRestored, Snapshot: &info})
	s.core.emitLocked(st, Event{Action: LogInfo, Message: fmt.Sprintf("Snapshot %s restored", info.Name)})
	s.core.emitLocked(st, Event{Action: ProjectOpened, Project: &out})
	s.core.log.Info("snapshot restored", "project", id, "snapshot", snapshotID)
	return out, nil
}

// Reset puts an opened project's contents back as project fromID has
// them (a class's template): fromID is copied as Duplicate copies it
// (nodes may run there; no snapshots), and the copy replaces project id's
// nodes, links, drawings and files as a snapshot restore does: id's nodes
// are stopped, its directory swapped atomically, and it is built again,
// keeping its id, name, path, settings, snapshots and captures; its
// nodes, links and drawings get new ids. If anything fails, the project
// is put back as it was. Listeners get what a restore sends them, but
// snapshot.restored.
func (s *Archives) Reset(ctx context.Context, id, fromID string) (_ Project, err error) {
	if id == fromID {
		return Project{}, errorf(ErrInvalid, "A project cannot be reset to itself")
	}
	if _, err := s.core.project(id); err != nil {
		return Project{}, err
	}
	src, err := s.core.project(fromID)
	if err != nil {
		return Project{}, err
	}
	endSrc, err := s.beginArchiveOp(fromID)
	if err != nil {
		return Project{}, err
	}
	exp, err := s.export(ctx, fromID, ExportOptions{KeepComputeIDs: true, Compression: archive.Store,
		Warn: func(msg string) { s.core.log.Warn("reset", "project", id, "from", fromID, "msg", msg) },
	}, endSrc, true)
	if err != nil {
		return Project{}, err
	}
	tmp, err := os.CreateTemp(s.core.cfg.ProjectsDir, ".duplicate-*.gns3project") // swept at start if left
	if err != nil {
		exp.WriteTo(io.Discard)
		return Project{}, refusal(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := exp.WriteTo(tmp); err != nil {
		return Project{}, &Error{Kind: ErrConflict, Msg: "Cannot reset project: " + pathless(err), Err: err}
	}
	end, err := s.beginArchiveOp(id)
	if err != nil {
		return Project{}, err
	}
	defer end()
	st, err := s.core.lockOpened(id)
	if err != nil {
		return Project{}, err
	}
	defer st.unlock(&err)
	p := st.project()
	if err := s.replaceLocked(ctx, st, p, tmp.Name(), true, "Cannot reset project"); err != nil {
		return Project{}, err
	}
	out := st.project()
	s.core.emitLocked(st, Event{Action: LogInfo, Message: fmt.Sprintf("Project reset to %s", src.Name)})
	s.core.emitLocked(st, Event{Action: ProjectOpened, Project: &out})
	s.core.log.Info("project reset", "project", id, "from", fromID)
	return out, nil
}

// replaceLocked puts the contents of the archive file (a snapshot, or an
// export of another project when newIDs) in place of opened project p's,
// whose state st is locked: the archive is unpacked and checked beside
// the project first; only then are p's nodes stopped, its directory
// swapped with the unpacked one (snapshots/ and captures carried over),
// and the project built again from it. If anything fails, the project is
// put back as it was, and the error's message begins with what.
func (s *Archives) replaceLocked(ctx context.Context, st *state, p Project, file string, newIDs bool, what string) error {
	id := p.ID
	tmp, snap, err := s.unpackSnapshot(p, file, newIDs)
	if err != nil {
		return err
	}
	// The nodes the archive brings back beyond the project's keep its
	// quotas, held until the restore (or reset) is done or undone (quota.go).
	st.mu.RLock()
	more := len(snap.Nodes) - len(st.nodes)
	st.mu.RUnlock()
	if more > 0 {
		want := len(snap.Nodes)
		release, err := s.core.admit(claim{projectID: id, add: Usage{Nodes: int64(more)},
			done: func(st *state) bool { return len(st.nodes) >= want }})
		if err != nil {
			os.RemoveAll(tmp)
			return err
		}
		defer release()
	}
	aside := restoreOld(p.Path)
	defer os.RemoveAll(tmp)   // after a failure, the snapshot's files
	defer os.RemoveAll(aside) // after a success, the project's old files

	// From here the project changes: stop it, swap, build.
	st.mu.RLock()
	old := st.snapshotLocked()
	computes := st.openComputesLocked()
	st.mu.RUnlock()
	// What drawing.deleted carries: each drawing whole, its SVG read now,
	// while its picture is still in the project's images.
	gone := *old
	gone.Drawings = slices.Clone(old.Drawings)
	for i := range gone.Drawings {
		gone.Drawings[i].SVG = s.drawings.resolveSVG(p, gone.Drawings[i].SVG)
	}
	s.core.closeOn(ctx, id, computes, "close project for a snapshot restore")
	if err := exchange(p.Path, tmp, aside); err != nil {
		s.reopen(ctx, st, old, nil)
		return &Error{Kind: ErrConflict, Msg: what + ": " + pathless(err), Err: err}
	}
	snap.Project.Path = p.Path
	if err := s.reopen(ctx, st, snap, &gone); err != nil {
		s.core.log.Warn("snapshot restore failed; putting the project back", "project", id, "err", err)
		if serr := exchange(p.Path, aside, tmp); serr != nil {
			s.core.log.Error("put back the project directory", "project", id, "err", serr)
		}
		if rerr := s.reopen(ctx, st, old, nil); rerr != nil {
			s.core.log.Error("reopen the project as it was", "project", id, "err", rerr)
		}
		return errorf(ErrConflict, "%s: %v", what, err) // 409 whatever the cause, as GNS3
	}
	return nil
}

// unpackSnapshot unpacks a snapshot file beside project p into a new
// directory holding its files and p's project file, and reads it back.
// With newIDs, its nodes, links and drawings get new ids (and their
// node directories follow).
func (s *Archives) unpackSnapshot(p Project, file string, newIDs bool) (string, *Snapshot, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", nil, &Error{Kind: ErrConflict, Msg: "Cannot restore snapshot: " + pathless(err), Err: err}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", nil, refusal(err)
	}
	zr, err := archive.Open(f, info.Size())
	if err != nil {
		return "", nil, refusal(err)
	}
	if err := archive.Check(zr, s.core.cfg.ArchiveLimits); err != nil {
		return "", nil, refusal(err)
	}
	data, err := archive.ReadProjectFile(zr)
	if err != nil {
		return "", nil, refusal(err)
	}
	set := map[string]any{"auto_start": p.Settings.AutoStart, "auto_open": p.Settings.AutoOpen, "auto_close": p.Settings.AutoClose}
	rw := archive.ImportRewrite{ProjectID: p.ID, Name: p.Name, KeepComputeIDs: true, Set: set}
	if newIDs {
		rw.NewID = uuid.NewString
	}
	imp, err := archive.ImportProjectFile(data, rw)
	if err != nil {
		return "", nil, refusal(err)
	}
	tmp := restoreNew(p.Path)
	os.RemoveAll(tmp) // left by a crash (Load sweeps them too)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", nil, refusal(err)
	}
	keep := func(entry string) bool {
		return entry == archive.ProjectFile || entry == archive.SnapshotsDir || strings.HasPrefix(entry, archive.SnapshotsDir+"/") ||
			entry == "images" || strings.HasPrefix(entry, "images/") || entry == "project-files/captures" || strings.HasPrefix(entry, "project-files/captures/")
	}
	err = archive.Extract(zr, tmp, s.core.cfg.ArchiveLimits, keep)
	for old, niu := range imp.NodeDirs {
		if err != nil {
			break
		}
		if rerr := os.Rename(filepath.Join(tmp, old), filepath.Join(tmp, niu)); rerr != nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}
	if err == nil {
		err = atomicfile.Write(filepath.Join(tmp, p.Filename), imp.Data, 0o644)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, refusal(err)
	}
	snap, err := s.core.cfg.Store.Load(&Project{ID: p.ID, Name: p.Name, Path: tmp, Filename: p.Filename, Settings: p.Settings})
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, &Error{Kind: ErrConflict, Msg: "Invalid data in topology file: " + pathless(err), Err: err}
	}
	return tmp, snap, nil
}

// A restore unpacks the snapshot into .<dir>.restore-new beside the
// project directory <dir>, then exchanges them; the project's old files
// wait in .<dir>.restore-old until the new ones are in use. Names derived
// from the project's directory let Load finish or undo a restore a crash
// cut short (sweepArchiveLeftovers).

func restoreNew(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-new")
}

func restoreOld(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-old")
}

// kept are what a restore carries from the project's old files to its new
// ones: the snapshots, and the captures (never in a snapshot).
var kept = []string{archive.SnapshotsDir, filepath.Join("project-files", "captures")}

// exchange puts incoming's files in place of dir's, which go to outgoing,
// carrying over the kept entries: first the kept entries move into
// incoming, then dir becomes outgoing and incoming becomes dir. At every
// step a crash leaves each file in dir, incoming or outgoing, which
// recoverRestore puts back together.
func exchange(dir, incoming, outgoing string) error {
	var moved []string
	undo := func() {
		for _, k := range moved {
			os.Rename(filepath.Join(incoming, k), filepath.Join(dir, k))
		}
	}
	for _, k := range kept {
		from, to := filepath.Join(dir, k), filepath.Join(incoming, k)
		if _, err := os.Lstat(from); err != nil {
			continue
		}
		os.RemoveAll(to)
		os.MkdirAll(filepath.Dir(to), 0o755)
		if err := os.Rename(from, to); err != nil {
			undo()
			return err
		}
		moved = append(moved, k)
	}
	os.RemoveAll(outgoing)
	if err := os.Rename(dir, outgoing); err != nil {
		undo()
		return err
	}
	if err := os.Rename(incoming, dir); err != nil {
		os.Rename(outgoing, dir)
		undo()
		return err
	}
	return nil
}

// sweepArchiveLeftovers removes what archive operations a crash cut short
// left in the projects directory, before projects load: uploads and
// unpacked imports (never registered), and restores, each finished as far
// as it got: the project directory is whichever of its old and new files
// were in place, with its kept entries wherever they were.
func (s *Archives) sweepArchiveLeftovers() {
	entries, err := os.ReadDir(s.core.cfg.ProjectsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(s.core.cfg.ProjectsDir, name)
		switch {
		case strings.HasPrefix(name, ".upload-"), strings.HasPrefix(name, ".duplicate-"), strings.HasPrefix(name, ".import-"):
			s.core.log.Warn("removing what an interrupted import left", "path", p)
			os.RemoveAll(p)
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".restore-old"):
			recoverRestore(filepath.Join(s.core.cfg.ProjectsDir, strings.TrimSuffix(strings.TrimPrefix(name, "."), ".restore-old")))
			s.core.log.Warn("finished an interrupted snapshot restore", "path", p)
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".restore-new"):
			recoverRestore(filepath.Join(s.core.cfg.ProjectsDir, strings.TrimSuffix(strings.TrimPrefix(name, "."), ".restore-new")))
			s.core.log.Warn("finished an interrupted snapshot restore", "path", p)
		}
	}
}

// recoverRestore puts project directory dir back together after a crash
// during a restore (see exchange).
func recoverRestore(dir string) {
	newDir, oldDir := restoreNew(dir), restoreOld(dir)
	if _, err := os.Lstat(dir); err != nil {
		// Between exchange's two renames: the old files are whole.
		if os.Rename(oldDir, dir) != nil {
			return // nothing to put back: leave everything for a person
		}
	}
	for _, from := range []string{newDir, oldDir} {
		for _, k := range kept {
			src, dst := filepath.Join(from, k), filepath.Join(dir, k)
			if _, err := os.Lstat(src); err != nil {
				continue
			}
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			os.MkdirAll(filepath.Dir(dst), 0o755)
			os.Rename(src, dst)
		}
		os.RemoveAll(from)
	}
}

// reopen replaces an opened project's nodes and links with snap's, built
// on their computes, saves it and announces the change: deletions of
// what was (before, if not nil; its drawings' SVG as it was), then
// creations. st.ops must be held.
func (s *Archives) reopen(ctx context.Context, st *state, snap *Snapshot, before *Snapshot) error {
	p := st.project()
	opened := newState(p)
	opened.p.Status = Opened
	opened.p.Settings, opened.p.Extra = snap.Project.Settings, snap.Project.Extra
	for _, d := range snap.Drawings {
		d.ProjectID = p.ID
		opened.drawings = append(opened.drawings, d)
	}
	if err := s.builder.build(ctx, opened, snap, nil); err != nil {
		s.core.closeOn(context.WithoutCancel(ctx), p.ID, slices.Collect(maps.Keys(opened.onComputes)), "close project after a failed restore")
		return err
	}
	if before != nil {
		for i := range before.Links {
			s.core.emitLocked(st, Event{Action: LinkDeleted, Link: &before.Links[i]})
		}
		for i := range before.Nodes {
			s.core.emitLocked(st, Event{Action: NodeDeleted, Node: &before.Nodes[i]})
		}
		for i := range before.Drawings {
			s.core.emitLocked(st, Event{Action: DrawingDeleted, Drawing: &before.Drawings[i]})
		}
	}
	st.mu.Lock()
	st.p = opened.p
	st.nodes, st.nodeOrder = opened.nodes, opened.nodeOrder
	st.links, st.linkOrder = opened.links, opened.linkOrder
	st.drawings = opened.drawings
	st.onComputes = opened.onComputes
	snapNow := st.snapshotLocked()
	st.mu.Unlock()
	s.core.saveLogged(st)
	if before != nil {
		for i := range snapNow.Nodes {
			s.core.emitLocked(st, Event{Action: NodeCreated, Node: &snapNow.Nodes[i]})
		}
		for i := range snapNow.Links {
			s.core.emitLocked(st, Event{Action: LinkCreated, Link: &snapNow.Links[i]})
		}
		for i := range snapNow.Drawings {
			d := snapNow.Drawings[i]
			d.SVG = s.drawings.resolveSVG(snapNow.Project, d.SVG)
			s.core.emitLocked(st, Event{Action: DrawingCreated, Drawing: &d})
		}
	}
	return nil
}

// runnable says whether labtap can run a node type at all.
func runnable(nodeType string) bool { return kindOf(nodeType) != nil }

// inertRefusal refuses to start an inert node; stopping one does nothing.
func inertRefusal(n *Node, status string) error {
	if !n.Inert || status == Stopped {
		return nil
	}
	return errorf(ErrConflict, "Node type %s is not supported by this server", n.Type)
}
