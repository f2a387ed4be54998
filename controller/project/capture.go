package project

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/labtap/labtap/capspec"
)

// LocalCompute is the id of the controller's own compute.
const LocalCompute = "local"

// captureSide picks the endpoint whose node a capture depends on, as GNS3
// does: the first endpoint, in attachment order, matching the first rule
// that any matches. It returns -1 when no endpoint's node is started.
//
//  1. on compute "local", of an always-running type, started;
//  2. of an always-running type, started;
//  3. on compute "local", started;
//  4. started.
//
// The preference keeps a capture going when a VM is powered off and keeps
// the file next to the project the controller serves.
func captureSide(nodes []*Node) int {
	rules := []func(n *Node) bool{
		func(n *Node) bool { return n.ComputeID == LocalCompute && isAlwaysRunning(n.Type) },
		func(n *Node) bool { return isAlwaysRunning(n.Type) },
		func(n *Node) bool { return n.ComputeID == LocalCompute },
		func(n *Node) bool { return true },
	}
	for _, rule := range rules {
		for i, n := range nodes {
			if n.Status == Started && rule(n) {
				return i
			}
		}
	}
	return -1
}

// captureUsing is the id of a link other than except whose running capture
// writes a file named name (or, for a ring, is named name, or writes one
// of name's numbered files name-00001.pcap, ...), or "". ring says the
// asked capture is a ring itself: its numbered files must not be another
// capture's file either.
func (st *state) captureUsing(name, except string, ring bool) string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for id, l := range st.links {
		if id == except || !l.Capture.Active {
			continue
		}
		c := l.Capture
		switch {
		case c.FileName == name || c.Spec.FileName == name,
			c.Spec.Ring() && capspec.IsRingName(name, c.Spec.FileName),
			ring && (capspec.IsRingName(c.FileName, name) || capspec.IsRingName(c.Spec.FileName, name)):
			return id
		}
	}
	return ""
}

// Captures are the captures of links: started and stopped on the compute
// that writes them, their files, streams and counts.
type Captures struct {
	core  *core
	links *Links
}

// Start starts capturing a link's frames into a pcap file on the
// compute of the chosen side and returns the link, now capturing. The spec
// was checked at the API edge (capspec.Spec.Check); its FileName is the
// client's, which gets the vocabulary's naming rule here (capspec
// CleanFileName), or "" for GNS3's default name.
func (s *Captures) Start(ctx context.Context, projectID, linkID string, req capspec.Spec) (Link, error) {
	req = req.WithDefaults()
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Link{}, err
	}
	defer st.ops.Unlock()
	st.mu.RLock()
	// The project's budget, whatever the client sent: the agent keeps the
	// project's capture files within it.
	req.ProjectBudget = st.p.Settings.CaptureDiskBudget
	l, err := st.linkLocked(linkID)
	var nodes []*Node
	if err == nil {
		for _, ep := range l.Endpoints {
			nodes = append(nodes, st.nodes[ep.NodeID])
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	if l.Capture.Active {
		return Link{}, errorf(ErrConflict, "Packet capture is already active on this link")
	}
	side := -1
	if l.Wired {
		side = captureSide(nodes)
	}
	if side < 0 {
		return Link{}, errorf(ErrConflict, "Cannot capture because there is no running device on this link")
	}
	name := defaultCaptureName(portOf(nodes[0], l.Endpoints[0]), portOf(nodes[1], l.Endpoints[1]), capspec.Ext(req.Format))
	if req.FileName != "" {
		if name, err = capspec.CleanFileName(req.FileName, req.Format); err != nil {
			return Link{}, errorf(ErrInvalid, "%v", err)
		}
	}
	if other := st.captureUsing(name, linkID, req.Ring()); other != "" {
		return Link{}, errorf(ErrConflict, "Capture file name %s is in use by the running capture of link %s", name, other)
	}
	req.FileName = name
	release, err := s.core.admitCapture(projectID, linkID, &req)
	if err != nil {
		return Link{}, err
	}
	defer release()
	if l.Tunnel != nil && l.FilterSide != side {
		// Across computes the filters move to the capture side first, so the
		// file shows every frame after them, both ways (placement.go).
		moved := *l
		moved.FilterSide = side
		if err := s.links.push(ctx, &moved, nodes); err != nil {
			return Link{}, err
		}
		st.mu.Lock()
		l.FilterSide = side
		st.mu.Unlock()
	}
	computeID := nodes[side].ComputeID
	res, err := s.core.cfg.Computes.StartCapture(ctx, computeID, projectID, linkID, req)
	if err != nil {
		return Link{}, err
	}
	res.Active = true
	if res.FileName == "" {
		// The agent never overwrites a file: it may have taken name-N.
		if i := strings.LastIndexByte(res.FilePath, '/'); i >= 0 && i+1 < len(res.FilePath) {
			res.FileName = res.FilePath[i+1:]
		}
	}
	st.mu.Lock()
	l.Capture = Capture{State: res, ComputeID: computeID, Side: side}
	out := *l
	st.mu.Unlock()
	s.core.emit(st, LinkUpdated, nil, &out)
	return out, nil
}

func portOf(n *Node, ep Endpoint) capturePort {
	return capturePort{node: n.Name, adapter: ep.Adapter, port: ep.Port}
}

// Stop stops a link's capture, if any, and returns the link. The
// file keeps everything captured; the link keeps its name and path.
func (s *Captures) Stop(ctx context.Context, projectID, linkID string) (Link, error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Link{}, err
	}
	defer st.ops.Unlock()
	st.mu.RLock()
	_, err = st.linkLocked(linkID)
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	return s.stopLocked(ctx, st, linkID), nil
}

// stopLocked stops a link's capture and announces the link. A
// compute that cannot stop it is logged, not obeyed: the link reports what
// the user asked for, and a compute that lost the capture has nothing left
// to stop. st.ops must be held.
func (s *Captures) stopLocked(ctx context.Context, st *state, linkID string) Link {
	st.mu.RLock()
	l := st.links[linkID]
	c := l.Capture
	st.mu.RUnlock()
	var final capspec.State
	if c.Active {
		var err error
		final, err = s.core.cfg.Computes.StopCapture(ctx, c.ComputeID, l.ProjectID, linkID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			s.core.log.Warn("stop capture", "link", linkID, "compute", c.ComputeID, "err", err)
		}
	}
	st.mu.Lock()
	l.Capture.end(final)
	out := *l
	st.mu.Unlock()
	s.core.emit(st, LinkUpdated, nil, &out)
	return out
}

// stopOf stops the captures whose side is a node that is no longer
// started. st.ops must be held.
func (s *Captures) stopOf(ctx context.Context, st *state, nodeID string) {
	st.mu.RLock()
	var ids []string
	for _, id := range st.linkOrder {
		l := st.links[id]
		if l.Capture.Active && l.Endpoints[l.Capture.Side].NodeID == nodeID {
			ids = append(ids, id)
		}
	}
	st.mu.RUnlock()
	for _, id := range ids {
		s.stopLocked(ctx, st, id)
	}
}

// LinkWithCounts returns a link, and when it captures, with the counts of
// its capture as its compute reports them now (frames, bytes, dropped,
// filtered, files; the file being written). A compute that does not
// answer leaves the counts it reported last.
func (s *Captures) LinkWithCounts(ctx context.Context, projectID, linkID string) (Link, error) {
	l, err := s.links.Get(projectID, linkID)
	if err != nil || !l.Capture.Active {
		return l, err
	}
	now, err := s.core.cfg.Computes.CaptureState(ctx, l.Capture.ComputeID, projectID, linkID)
	if err != nil {
		s.core.log.Debug("capture counts", "link", linkID, "compute", l.Capture.ComputeID, "err", err)
		return l, nil
	}
	st, err := s.core.opened(projectID)
	if err != nil {
		return Link{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	cur, err := st.linkLocked(linkID)
	if err != nil {
		return Link{}, err
	}
	if cur.Capture.Active && cur.Capture.ComputeID == l.Capture.ComputeID && now.Active {
		cur.Capture.report(now)
	}
	return *cur, nil
}

// CaptureFile is the file a running capture writes, as it was when it was
// asked for: Size bytes ending on a whole record, a valid capture on its
// own.
type CaptureFile struct {
	Name string // the file's name (for a ring, the numbered file)
	Size int64
	Body io.ReadCloser
}

// File returns the file a link's running capture writes, as it is
// now, or once it stopped its last file, whole. The caller closes its
// Body.
func (s *Captures) File(ctx context.Context, projectID, linkID string) (CaptureFile, error) {
	c, err := s.last(projectID, linkID)
	if err != nil {
		return CaptureFile{}, err
	}
	if c.Active {
		return s.core.cfg.Computes.CaptureFile(ctx, c.ComputeID, projectID, linkID)
	}
	return s.OpenFile(ctx, projectID, c.ComputeID, c.FileName)
}

// last returns a link's running capture, or the last one it ran (whose
// file is still there to read); a conflict when it never captured.
func (s *Captures) last(projectID, linkID string) (Capture, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return Capture{}, err
	}
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	var c Capture
	var sideCompute string
	if err == nil {
		c = l.Capture
		if c.Side >= 0 && c.Side < len(l.Endpoints) {
			if n := st.nodes[l.Endpoints[c.Side].NodeID]; n != nil {
				sideCompute = n.ComputeID
			}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return Capture{}, err
	}
	if c.Active {
		return c, nil
	}
	if c.ComputeID = c.LastComputeID; c.ComputeID == "" {
		c.ComputeID = sideCompute // the controller restarted since: the files are on the side's compute
	}
	if c.ComputeID == "" || !capspec.ValidFileName(c.FileName) {
		return Capture{}, errorf(ErrConflict, "This link has no packet capture, running or stopped")
	}
	return c, nil
}

// Replay returns a link's capture to decode from its first record: the
// running one as a stream that ends when it stops (Stream), or once it
// stopped its last file, whole. The caller closes it.
func (s *Captures) Replay(ctx context.Context, projectID, linkID string) (io.ReadCloser, error) {
	c, err := s.last(projectID, linkID)
	if err != nil {
		return nil, err
	}
	if c.Active {
		return s.core.cfg.Computes.CaptureStream(ctx, c.ComputeID, projectID, linkID)
	}
	f, err := s.OpenFile(ctx, projectID, c.ComputeID, c.FileName)
	if err != nil {
		return nil, err
	}
	return f.Body, nil
}

// fileStore returns the computes' capture files, or a conflict where the
// computes do not serve them.
func (s *Captures) fileStore() (CaptureFileStore, error) {
	fs, ok := s.core.cfg.Computes.(CaptureFileStore)
	if !ok {
		return nil, errorf(ErrConflict, "The computes do not serve capture files")
	}
	return fs, nil
}

// Files lists every capture file of a project (opened or not) on every
// compute that answers: running, stopped and ring files, oldest first.
func (s *Captures) Files(ctx context.Context, projectID string) ([]capspec.FileInfo, error) {
	if _, err := s.core.project(projectID); err != nil {
		return nil, err
	}
	fs, err := s.fileStore()
	if err != nil {
		return nil, err
	}
	list := fs.CaptureFiles(ctx, projectID)
	slices.SortStableFunc(list, func(a, b capspec.FileInfo) int { return a.Modified.Compare(b.Modified) })
	return list, nil
}

// OpenFile returns a capture file of a project on a compute, by name: a
// stopped one whole, a running one up to its last whole record. The
// caller closes its Body.
func (s *Captures) OpenFile(ctx context.Context, projectID, computeID, name string) (CaptureFile, error) {
	fs, err := s.checkFile(projectID, computeID, name)
	if err != nil {
		return CaptureFile{}, err
	}
	return fs.OpenCaptureFile(ctx, computeID, projectID, name)
}

// DeleteFile removes a stopped capture file of a project on a compute; a
// running one is a conflict.
func (s *Captures) DeleteFile(ctx context.Context, projectID, computeID, name string) error {
	fs, err := s.checkFile(projectID, computeID, name)
	if err != nil {
		return err
	}
	return fs.DeleteCaptureFile(ctx, computeID, projectID, name)
}

// checkFile checks a request for a capture file: the project and the
// compute exist, and the name is a capture file's (capspec's rule).
func (s *Captures) checkFile(projectID, computeID, name string) (CaptureFileStore, error) {
	if _, err := s.core.project(projectID); err != nil {
		return nil, err
	}
	if !capspec.ValidFileName(name) || !capspec.CaptureExt(name) {
		return nil, errorf(ErrInvalid, "capture file name %q is not a plain file name ending in .pcap or .pcapng", name)
	}
	if !s.core.cfg.Computes.Exists(computeID) {
		return nil, errorf(ErrNotFound, "Compute ID %s doesn't exist", computeID)
	}
	return s.fileStore()
}

// running returns a link's capture, a conflict when none runs.
func (s *Captures) running(projectID, linkID string) (Capture, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return Capture{}, err
	}
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	var c Capture
	if err == nil {
		c = l.Capture
	}
	st.mu.RUnlock()
	if err != nil {
		return Capture{}, err
	}
	if !c.Active {
		return Capture{}, errorf(ErrConflict, "This link has no active packet capture")
	}
	return c, nil
}

// Stream returns a link's running capture as a stream: the file
// from its first byte, then each record as it is written, ending when the
// capture stops. The caller closes it.
func (s *Captures) Stream(ctx context.Context, projectID, linkID string) (io.ReadCloser, error) {
	c, err := s.running(projectID, linkID)
	if err != nil {
		return nil, err
	}
	return s.core.cfg.Computes.CaptureStream(ctx, c.ComputeID, projectID, linkID)
}
