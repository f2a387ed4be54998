package project

import (
	"context"
	"errors"
	"io"
	"strings"
)

// DefaultDataLinkType is the data link type of a capture that names none.
const DefaultDataLinkType = "DLT_EN10MB"

// CaptureStart is a request to start a capture on a link.
type CaptureStart struct {
	// DataLinkType is a DLT_ name; "" means DLT_EN10MB.
	DataLinkType string
	// FileName is the client's name, sanitised before use; "" means the
	// default name.
	FileName string
	// Format is "pcap" (the default when empty) or "pcapng", which records
	// who sent each frame (one interface per direction). pcapng is labtap's
	// extension: GNS3 clients never ask for it.
	Format string
}

// Capture formats.
const (
	FormatPcap   = "pcap"
	FormatPcapng = "pcapng"
)

// LocalCompute is the id of the controller's own compute.
const LocalCompute = "local"

// captureSide picks the endpoint whose node a capture depends on (api-v2.md
// 3.3): the first endpoint, in attachment order, matching the first rule
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
// writes a file named name, or "".
func (st *state) captureUsing(name, except string) string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for id, l := range st.links {
		if id != except && l.Capture.Active && l.Capture.FileName == name {
			return id
		}
	}
	return ""
}

// StartCapture starts capturing a link's frames into a pcap file on the
// compute of the chosen side and returns the link, now capturing.
func (s *Service) StartCapture(ctx context.Context, projectID, linkID string, req CaptureStart) (Link, error) {
	if req.DataLinkType == "" {
		req.DataLinkType = DefaultDataLinkType // the API checks the others; so does the agent
	}
	st, err := s.lockOpened(projectID)
	if err != nil {
		return Link{}, err
	}
	defer st.ops.Unlock()
	st.mu.RLock()
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
	ext := extPcap
	switch req.Format {
	case "", FormatPcap:
		req.Format = FormatPcap
	case FormatPcapng:
		ext = ".pcapng"
	default:
		return Link{}, errorf(ErrInvalid, "capture_format %q: want %q or %q", req.Format, FormatPcap, FormatPcapng)
	}
	name := defaultCaptureName(portOf(nodes[0], l.Endpoints[0]), portOf(nodes[1], l.Endpoints[1]), ext)
	if req.FileName != "" {
		if name, err = sanitizeCaptureName(req.FileName, ext); err != nil {
			return Link{}, errorf(ErrInvalid, "capture_file_name %q: %v", req.FileName, err)
		}
	}
	if other := st.captureUsing(name, linkID); other != "" {
		return Link{}, errorf(ErrConflict, "Capture file name %s is in use by the running capture of link %s", name, other)
	}
	if l.Tunnel != nil && l.FilterSide != side {
		// Across computes the filters move to the capture side first, so the
		// file shows every frame after them, both ways (placement.go).
		moved := *l
		moved.FilterSide = side
		if err := s.push(ctx, &moved, nodes); err != nil {
			return Link{}, err
		}
		st.mu.Lock()
		l.FilterSide = side
		st.mu.Unlock()
	}
	computeID := nodes[side].ComputeID
	res, err := s.cfg.Computes.StartCapture(ctx, computeID, projectID, linkID, CaptureRequest{FileName: name, DataLinkType: req.DataLinkType, Format: req.Format})
	if err != nil {
		return Link{}, err
	}
	if i := strings.LastIndexByte(res.FilePath, '/'); i >= 0 && i+1 < len(res.FilePath) {
		name = res.FilePath[i+1:] // the agent never overwrites a file: it may have taken name-N
	}
	st.mu.Lock()
	l.Capture = Capture{Active: true, FileName: name, FilePath: res.FilePath, ComputeID: computeID, Side: side}
	out := *l
	st.mu.Unlock()
	s.emit(st, LinkUpdated, nil, &out)
	return out, nil
}

func portOf(n *Node, ep Endpoint) capturePort {
	return capturePort{node: n.Name, adapter: ep.Adapter, port: ep.Port}
}

// StopCapture stops a link's capture, if any, and returns the link. The
// file keeps everything captured; the link keeps its name and path.
func (s *Service) StopCapture(ctx context.Context, projectID, linkID string) (Link, error) {
	st, err := s.lockOpened(projectID)
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
	return s.stopCaptureLocked(ctx, st, linkID), nil
}

// stopCaptureLocked stops a link's capture and announces the link. A
// compute that cannot stop it is logged, not obeyed: the link reports what
// the user asked for, and a compute that lost the capture has nothing left
// to stop. st.ops must be held.
func (s *Service) stopCaptureLocked(ctx context.Context, st *state, linkID string) Link {
	st.mu.RLock()
	l := st.links[linkID]
	c := l.Capture
	st.mu.RUnlock()
	if c.Active {
		if err := s.cfg.Computes.StopCapture(ctx, c.ComputeID, l.ProjectID, linkID); err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("stop capture", "link", linkID, "compute", c.ComputeID, "err", err)
		}
	}
	st.mu.Lock()
	l.Capture.end()
	out := *l
	st.mu.Unlock()
	s.emit(st, LinkUpdated, nil, &out)
	return out
}

// stopCapturesOf stops the captures whose side is a node that is no longer
// started. st.ops must be held.
func (s *Service) stopCapturesOf(ctx context.Context, st *state, nodeID string) {
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
		s.stopCaptureLocked(ctx, st, id)
	}
}

// CaptureStream returns a link's running capture as a stream: the file
// from its first byte, then each record as it is written, ending when the
// capture stops. The caller closes it.
func (s *Service) CaptureStream(ctx context.Context, projectID, linkID string) (io.ReadCloser, error) {
	st, err := s.opened(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	var c Capture
	if err == nil {
		c = l.Capture
	}
	st.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if !c.Active {
		return nil, errorf(ErrConflict, "This link has no active packet capture")
	}
	return s.cfg.Computes.CaptureStream(ctx, c.ComputeID, projectID, linkID)
}
