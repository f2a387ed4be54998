// Package labcapture captures a whole project: every link of it, on
// whichever compute each runs, into one pcapng with one interface per link
// and direction ("PC1 Ethernet0 → SW1 Ethernet1"), written by the
// controller into the project's captures folder and streamed live while it
// grows.
//
// Each link is captured on its compute as a pcapng capture of its own (the
// one the link already runs, or one this package starts); the controller
// follows the links' capture streams and merges their records into the
// project's file in timestamp order, within a reorder window (order.go):
// each link direction's frames in their order, the file in time order
// within each agent as long as its streams arrive within the window of each
// other. Links created while the capture runs join it, and so do links
// whose capture stopped (a node stopped) once it can run again.
package labcapture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
)

// Projects is what a project capture needs of the projects.
// ServiceProjects adapts a *project.Service to it.
type Projects interface {
	Project(id string) (project.Project, error)
	Links(projectID string) ([]project.Link, error)
	Nodes(projectID string) ([]project.Node, error)
	StartCapture(ctx context.Context, projectID, linkID string, spec capspec.Spec) (project.Link, error)
	StopCapture(ctx context.Context, projectID, linkID string) (project.Link, error)
	Link(projectID, linkID string) (project.Link, error)
	CaptureStream(ctx context.Context, projectID, linkID string) (io.ReadCloser, error)
}

// Config configures a Service.
type Config struct {
	Projects Projects
	// Every is how often a running capture looks for links to join; zero
	// means half a second.
	Every time.Duration
	// Window is how long a record may wait for older records of links
	// that are silent: the merge's reorder window, and so the live
	// stream's delay when some link is idle. Zero means DefaultWindow.
	Window time.Duration
	Logger *slog.Logger
}

// Service runs the project captures. Make one with New; Close ends every
// capture.
type Service struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]*run // by project id
	wg      sync.WaitGroup  // every run's goroutines
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Every <= 0 {
		cfg.Every = 500 * time.Millisecond
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	return &Service{cfg: cfg, log: cfg.Logger, running: make(map[string]*run)}
}

// DefaultWindow is the merge's reorder window: an agent writes out its
// captures every 10 ms, and a loaded controller or network may take a few
// hundred more to relay them.
const DefaultWindow = 500 * time.Millisecond

// State describes a project capture.
type State = capspec.ProjectState

var errNotCapturing = &project.Error{Kind: project.ErrConflict, Msg: "The project is not being captured"}

// run is one project's capture.
type run struct {
	s         *Service
	projectID string
	stem      string // of the names of the link captures it starts
	name      string
	path      string

	stopJoining context.CancelFunc // ends the loop that joins links
	streamCtx   context.Context    // the links' streams are read under it
	endStreams  context.CancelFunc

	mu       sync.Mutex // guards the fields below and the writes to f
	f        *os.File
	bw       *bufio.Writer
	ng       *pcapgo.NgWriter // nil until the first interface
	ifaces   map[ifaceKey]int // merged interface ids
	links    map[string]*member
	order    *reorder // records waiting for their turn
	frames   uint64
	stopping bool // no link joins any more
	ended    bool // the file is complete

	kick    chan struct{} // capacity 1: a record was queued (releaseLoop)
	size    atomic.Int64  // bytes of the file that hold whole blocks
	changed chan struct{} // closed and replaced at each change of size, and at the end
	done    chan struct{} // closed when the capture has ended and the file is complete
}

type ifaceKey struct {
	link string
	dir  int // 0: A sends, 1: B sends; -1: a pcap link capture (no direction)
}

// member is a link taking part: its stream is being merged.
type member struct {
	started string // the link capture's file name when this capture started it
	seq     int    // link captures it started, for their names
	active  bool   // a stream is being merged now
}

// Start starts capturing a project: spec names the file (FileName, cleaned
// as a link capture's; "" gives "<project>_all.pcapng") and may filter
// (Filter, applied by each link's capture). It is a conflict when the
// project captures already or the file exists: no capture overwrites
// another.
func (s *Service) Start(ctx context.Context, projectID string, spec capspec.Spec) (State, error) {
	p, err := s.cfg.Projects.Project(projectID)
	if err != nil {
		return State{}, err
	}
	name := capspec.CleanStem(p.Name) + "_all.pcapng"
	if spec.FileName != "" {
		if name, err = capspec.CleanFileName(spec.FileName, capspec.FormatPcapng); err != nil {
			return State{}, &project.Error{Kind: project.ErrInvalid, Msg: err.Error()}
		}
	}
	joinCtx, stopJoining := context.WithCancel(context.WithoutCancel(ctx))
	streamCtx, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	if r, ok := s.running[projectID]; ok {
		s.mu.Unlock()
		stopJoining()
		endStreams()
		return r.state(), &project.Error{Kind: project.ErrConflict, Msg: "The project is being captured already, into " + r.name}
	}
	r, err := s.create(projectID, p.Path, name)
	if err != nil {
		s.mu.Unlock()
		stopJoining()
		endStreams()
		return State{}, err
	}
	// Before s.mu is let go: a Stop that finds the run calls them.
	r.stopJoining, r.endStreams, r.streamCtx = stopJoining, endStreams, streamCtx
	s.mu.Unlock()
	r.reconcile(joinCtx, spec.Filter) // the links there are join before Start returns
	s.wg.Go(func() { r.loop(joinCtx, spec.Filter) })
	s.wg.Go(r.releaseLoop)
	s.log.Info("project capture started", "project", projectID, "file", r.path)
	return r.state(), nil
}

// create creates the file of a project's capture in the project's
// directory projectDir and registers the run. s.mu must be held.
func (s *Service) create(projectID, projectDir, name string) (*run, error) {
	// Through the project's directory, never made here: a project deleted
	// since Start looked it up stays deleted (MkdirAll made it again).
	proot, err := os.OpenRoot(projectDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &project.Error{Kind: project.ErrNotFound, Msg: "Project ID " + projectID + " doesn't exist", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("project capture: %w", err)
	}
	defer proot.Close()
	sub := filepath.Join("project-files", "captures")
	if err := proot.MkdirAll(sub, 0o755); err != nil {
		return nil, fmt.Errorf("project capture: %w", err)
	}
	root, err := proot.OpenRoot(sub)
	if err != nil {
		return nil, fmt.Errorf("project capture: %w", err)
	}
	defer root.Close()
	dir := filepath.Join(projectDir, sub)
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, &project.Error{Kind: project.ErrConflict, Msg: "Capture file " + name + " exists: no capture overwrites another"}
	}
	if err != nil {
		return nil, fmt.Errorf("project capture: %w", err)
	}
	r := &run{
		s: s, projectID: projectID, name: name, path: filepath.Join(dir, name),
		stem:    capspec.CleanStem(name[:len(name)-len(".pcapng")]),
		f:       f,
		bw:      bufio.NewWriterSize(f, 256<<10),
		ifaces:  make(map[ifaceKey]int),
		links:   make(map[string]*member),
		order:   newReorder(s.cfg.Window),
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.running[projectID] = r
	return r, nil
}

// Stop stops a project's capture: the link captures it started stop, what
// their streams still carry is merged, and the file is complete when it
// returns. Stopping a project that is not captured is a conflict.
func (s *Service) Stop(ctx context.Context, projectID string) (State, error) {
	s.mu.Lock()
	r, ok := s.running[projectID]
	if ok {
		delete(s.running, projectID)
	}
	s.mu.Unlock()
	if !ok {
		return State{ProjectID: projectID}, errNotCapturing
	}
	r.stop(ctx)
	return r.state(), nil
}

// Get returns the state of a project's capture.
func (s *Service) Get(projectID string) State {
	s.mu.Lock()
	r, ok := s.running[projectID]
	s.mu.Unlock()
	if !ok {
		return State{ProjectID: projectID}
	}
	return r.state()
}

// Stream returns the project's capture as a live pcapng stream: the file
// from its first byte, then each block as it is written, ending when the
// capture stops or ctx is done. The caller closes it.
func (s *Service) Stream(ctx context.Context, projectID string) (io.ReadCloser, error) {
	s.mu.Lock()
	r, ok := s.running[projectID]
	s.mu.Unlock()
	if !ok {
		return nil, errNotCapturing
	}
	rf, err := os.Open(r.path)
	if err != nil {
		return nil, fmt.Errorf("project capture: %w", err)
	}
	pr, pw := io.Pipe()
	s.wg.Go(func() {
		defer rf.Close()
		pw.CloseWithError(r.follow(ctx, rf, pw))
	})
	return pr, nil
}

// Close stops every project capture and waits for their goroutines.
func (s *Service) Close(ctx context.Context) {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.running))
	for id, r := range s.running {
		runs = append(runs, r)
		delete(s.running, id)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.stop(ctx)
	}
	s.wg.Wait()
}

func (r *run) state() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := State{ProjectID: r.projectID, Capturing: !r.ended, FileName: r.name, FilePath: r.path,
		Interfaces: len(r.ifaces), Frames: r.frames, Bytes: uint64(r.size.Load())}
	for _, m := range r.links {
		if m.active {
			st.Links++
		}
	}
	return st
}

// loop joins links until the capture stops.
func (r *run) loop(ctx context.Context, filter string) {
	tick := time.NewTicker(r.s.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if r.projectGone() {
				// Nothing else stops it: a deleted project's capture held
				// its deleted file open, a closed one's asked for links
				// forever.
				r.s.end(r)
				return
			}
			r.reconcile(ctx, filter)
		}
	}
}

// projectGone reports a project deleted or closed since its capture began.
func (r *run) projectGone() bool {
	p, err := r.s.cfg.Projects.Project(r.projectID)
	return errors.Is(err, project.ErrNotFound) || err == nil && p.Status == project.Closed
}

// end stops r unless a Stop or Close took it first.
func (s *Service) end(r *run) {
	s.mu.Lock()
	mine := s.running[r.projectID] == r
	if mine {
		delete(s.running, r.projectID)
	}
	s.mu.Unlock()
	if mine {
		r.stop(context.Background())
		s.log.Info("project capture ended with its project", "project", r.projectID)
	}
}

// reconcile joins every link that can be merged and is not: a link whose
// capture runs is followed as it is; a wired link that does not capture
// gets a pcapng capture of its own.
func (r *run) reconcile(ctx context.Context, filter string) {
	links, err := r.s.cfg.Projects.Links(r.projectID)
	if err != nil {
		return
	}
	for _, l := range links {
		if !l.Wired {
			continue
		}
		r.mu.Lock()
		m := r.links[l.ID]
		if m == nil {
			m = &member{}
			r.links[l.ID] = m
		}
		busy := m.active || r.stopping
		r.mu.Unlock()
		if busy {
			continue
		}
		if !l.Capture.Active {
			m.seq++
			spec := capspec.Spec{Format: capspec.FormatPcapng, Filter: filter,
				FileName: fmt.Sprintf("%s-%s-%d.pcapng", r.stem, l.ID[:min(8, len(l.ID))], m.seq)}
			started, err := r.s.cfg.Projects.StartCapture(ctx, r.projectID, l.ID, spec)
			if err != nil {
				r.s.log.Debug("project capture: a link cannot capture yet", "link", l.ID, "err", err)
				continue
			}
			r.mu.Lock()
			m.started = started.Capture.FileName
			r.mu.Unlock()
		}
		stream, err := r.s.cfg.Projects.CaptureStream(r.streamCtx, r.projectID, l.ID)
		if err != nil {
			r.s.log.Debug("project capture: follow a link", "link", l.ID, "err", err)
			continue
		}
		names, err := r.names(l)
		if err != nil {
			stream.Close()
			continue
		}
		r.mu.Lock()
		if r.stopping { // stop came meanwhile, and did not see this link
			r.mu.Unlock()
			stream.Close()
			if m.started != "" {
				r.s.cfg.Projects.StopCapture(context.WithoutCancel(ctx), r.projectID, l.ID)
			}
			continue
		}
		m.active = true
		// The link's interfaces are in the file from now on, so the file
		// (and the stream) begins as soon as one link joins.
		lt := layers.LinkTypeEthernet
		c, _ := r.s.cfg.Projects.Link(r.projectID, l.ID)
		if v, ok := capspec.LinkType(c.Capture.Spec.DataLinkType); ok {
			lt = layers.LinkType(v)
		}
		keys := []ifaceKey{{l.ID, 0}, {l.ID, 1}}
		if c.Capture.Spec.Format == capspec.FormatPcap {
			keys = []ifaceKey{{l.ID, -1}}
		}
		for _, k := range keys {
			if _, err := r.ifaceLocked(k, nameOf(names, k.dir), lt); err != nil {
				r.s.log.Warn("project capture: add an interface", "link", l.ID, "err", err)
			}
			r.order.open(k)
		}
		if err := r.flushLocked(); err != nil {
			r.s.log.Warn("project capture: write", "err", err)
		}
		r.mu.Unlock()
		r.s.wg.Go(func() {
			defer stream.Close()
			if err := r.merge(l.ID, names, stream); err != nil && ctx.Err() == nil {
				r.s.log.Warn("project capture: a link's stream ended", "link", l.ID, "err", err)
			}
			r.mu.Lock()
			m.active = false
			for _, k := range keys {
				r.order.close(k)
			}
			r.releaseLocked(time.Now(), false) // the others wait for it no more
			r.signalLocked()
			r.mu.Unlock()
		})
	}
}

// names returns the names of a link's two directions: "PC1 Ethernet0 →
// SW1 Ethernet1" for what A sends, and the other way.
func (r *run) names(l project.Link) ([2]string, error) {
	nodes, err := r.s.cfg.Projects.Nodes(r.projectID)
	if err != nil || len(l.Endpoints) != 2 {
		return [2]string{}, fmt.Errorf("link %s: no two endpoints", l.ID)
	}
	var ends [2]string
	for i, ep := range l.Endpoints {
		ends[i] = ep.NodeID
		for _, n := range nodes {
			if n.ID != ep.NodeID {
				continue
			}
			ends[i] = n.Name
			for _, p := range n.Ports() {
				if p.AdapterNumber == ep.Adapter && p.PortNumber == ep.Port {
					ends[i] += " " + p.Name
				}
			}
		}
	}
	return [2]string{ends[0] + " → " + ends[1], ends[1] + " → " + ends[0]}, nil
}

// merge copies the records of one link's capture stream (pcapng, or pcap
// for a link that captures so already) into the project's file, until the
// stream ends.
func (r *run) merge(linkID string, names [2]string, stream io.Reader) error {
	br := bufio.NewReaderSize(stream, 256<<10)
	magic, err := br.Peek(4)
	if err != nil {
		return err
	}
	var read func() ([]byte, gopacket.CaptureInfo, error)
	var linkType func(i int) layers.LinkType
	ng := magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a
	if ng {
		nr, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{})
		if err != nil {
			return err
		}
		read = nr.ReadPacketData
		linkType = func(i int) layers.LinkType {
			if intf, err := nr.Interface(i); err == nil {
				return intf.LinkType
			}
			return layers.LinkTypeEthernet
		}
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return err
		}
		read = pr.ReadPacketData
		linkType = func(int) layers.LinkType { return pr.LinkType() }
	}
	for {
		data, ci, err := read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		key := ifaceKey{link: linkID, dir: ci.InterfaceIndex & 1}
		if !ng { // a pcap capture does not say who sent a frame
			key.dir = -1
		}
		if err := r.push(&record{key: key, name: nameOf(names, key.dir), lt: linkType(ci.InterfaceIndex), ci: ci, data: data}); err != nil {
			return err
		}
	}
}

// nameOf names the interface of a direction; -1 is both (a pcap link
// capture does not say who sent a frame).
func nameOf(names [2]string, dir int) string {
	if dir < 0 {
		return strings.Replace(names[0], " → ", " ↔ ", 1)
	}
	return names[dir]
}

// push queues one record of a link's stream and writes what is due: the
// records that are in timestamp order now (order.go).
func (r *run) push(rec *record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return nil
	}
	rec.at = time.Now()
	if err := r.order.push(rec, r.emitLocked); err != nil {
		return err
	}
	if _, _, err := r.releaseLocked(rec.at, false); err != nil {
		return err
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return nil
}

// releaseLocked writes the records due at now (every record, with force)
// and lets followers see them; it says when the next queued record will be
// due (ok false: none waits). r.mu must be held.
func (r *run) releaseLocked(now time.Time, force bool) (next time.Time, ok bool, err error) {
	if r.ended {
		return time.Time{}, false, nil
	}
	before := r.frames
	next, ok, err = r.order.release(now, force, r.emitLocked)
	if r.frames != before {
		if ferr := r.flushLocked(); err == nil {
			err = ferr
		}
	}
	return next, ok, err
}

// releaseLoop writes the records that waited the reorder window for silent
// links, until the capture ends.
func (r *run) releaseLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		next, ok, err := r.releaseLocked(time.Now(), false)
		r.mu.Unlock()
		if err != nil {
			r.s.log.Warn("project capture: write", "err", err)
		}
		wait := time.Hour
		if ok {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-r.kick:
		case <-timer.C:
		case <-r.done:
			return
		}
	}
}

// emitLocked writes one record to the project's file, adding its
// interface first if it is new. r.mu must be held; the caller flushes.
func (r *run) emitLocked(rec *record) error {
	id, err := r.ifaceLocked(rec.key, rec.name, rec.lt)
	if err != nil {
		return err
	}
	ci := rec.ci
	ci.InterfaceIndex = id
	if err := r.ng.WritePacket(ci, rec.data); err != nil {
		return err
	}
	r.frames++
	return nil
}

// ifaceLocked returns the file's interface of key, adding it (and the
// file's header, for the first) when it is new. r.mu must be held.
func (r *run) ifaceLocked(key ifaceKey, name string, lt layers.LinkType) (int, error) {
	id, ok := r.ifaces[key]
	if !ok {
		intf := pcapgo.NgInterface{Name: name, OS: runtime.GOOS, LinkType: lt, SnapLength: 65535, TimestampResolution: 9}
		if r.ng == nil {
			ng, err := pcapgo.NewNgWriterInterface(r.bw, intf, pcapgo.NgWriterOptions{
				SectionInfo: pcapgo.NgSectionInfo{OS: runtime.GOOS, Application: "labtap (project capture)"},
			})
			if err != nil {
				return 0, err
			}
			r.ng, id = ng, 0
		} else {
			var err error
			if id, err = r.ng.AddInterface(intf); err != nil {
				return 0, err
			}
		}
		r.ifaces[key] = id
	}
	return id, nil
}

// flushLocked writes what is buffered and tells followers. r.mu must be
// held.
func (r *run) flushLocked() error {
	if r.ng != nil {
		if err := r.ng.Flush(); err != nil {
			return err
		}
	}
	if err := r.bw.Flush(); err != nil {
		return err
	}
	if off, err := r.f.Seek(0, io.SeekCurrent); err == nil {
		r.size.Store(off)
	}
	r.signalLocked()
	return nil
}

// signalLocked wakes whoever waits for a change. r.mu must be held.
func (r *run) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// stop ends the capture: the link captures it started stop (their streams
// then end), the merges finish, and the file is closed.
func (r *run) stop(ctx context.Context) {
	r.stopJoining()
	r.mu.Lock()
	r.stopping = true
	var started []string
	for id, m := range r.links {
		if m.started != "" && m.active {
			started = append(started, id)
		}
	}
	r.mu.Unlock()
	for _, id := range started {
		if _, err := r.s.cfg.Projects.StopCapture(ctx, r.projectID, id); err != nil {
			r.s.log.Warn("project capture: stop a link's capture", "link", id, "err", err)
		}
	}
	// The streams of links captured by someone else go on: stop merging
	// them once the ones this capture started are done.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	r.waitMerges(started, deadline.C)
	r.endStreams() // the links captured by someone else: their capture goes on
	r.waitMerges(nil, deadline.C)
	r.mu.Lock()
	if _, _, err := r.releaseLocked(time.Now(), true); err != nil {
		r.s.log.Warn("project capture: write", "err", err)
	}
	r.ended = true
	_ = r.flushLocked()
	if err := r.f.Close(); err != nil {
		r.s.log.Warn("project capture: close", "file", r.path, "err", err)
	}
	r.mu.Unlock()
	close(r.done)
	r.s.log.Info("project capture stopped", "project", r.projectID, "file", r.path, "frames", r.state().Frames)
}

// waitMerges waits until the links ids (every link, for nil) no longer
// merge, or until deadline.
func (r *run) waitMerges(ids []string, deadline <-chan time.Time) {
	for {
		r.mu.Lock()
		busy := false
		for id, m := range r.links {
			if m.active && (ids == nil || slices.Contains(ids, id)) {
				busy = true
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if !busy {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			r.s.log.Warn("project capture: link streams still open at stop", "project", r.projectID)
			return
		}
	}
}

// follow copies the file to w from its first byte, then what is appended,
// until the capture ends (nil) or ctx is done.
func (r *run) follow(ctx context.Context, rf *os.File, w io.Writer) error {
	buf := make([]byte, 256<<10)
	var off int64
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		ended := false
		select {
		case <-r.done:
			ended = true
		default:
		}
		limit := r.size.Load()
		for off < limit {
			n, err := rf.ReadAt(buf[:min(int64(len(buf)), limit-off)], off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				off += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if n == 0 {
				break
			}
		}
		if ended {
			return nil
		}
		select {
		case <-ch:
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
