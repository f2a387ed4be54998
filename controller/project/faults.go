package project

import (
	"context"
	"fmt"
	"github.com/labtap/labtap/capspec"
	"slices"
)

// What computes report without being asked, and what the Service does
// about it. Each is announced on the project stream like any other change,
// in order with the changes made through the API.

// Reports hear what computes report by themselves (captures that ended or
// rotated, nodes that changed or warn) and computes that are lost or come
// back, and bring the projects in line. It satisfies compute.Listener and
// compute.Warner.
type Reports struct {
	core  *core
	nodes *Nodes
	links *Links
}

// CaptureEnded records that a compute ended a link's capture by itself (its
// disk filled, or it reached a limit it was given): the link stops
// capturing, keeping its file name and path (the file holds every whole
// record written), and a log.warning (a failure) or log.info (a limit)
// says why. A report about a capture that is not running there is ignored.
func (s *Reports) CaptureEnded(ctx context.Context, computeID, projectID, linkID string, last capspec.State) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return
	}
	defer st.ops.Unlock()
	out, ok := st.changeCapture(computeID, linkID, func(c *Capture) { c.end(last) })
	if !ok {
		return
	}
	s.core.emit(st, LinkUpdated, nil, &out)
	if last.Limit != "" && last.Err == "" {
		s.core.log.Info("capture ended at its limit", "project", projectID, "link", linkID, "compute", computeID, "why", last.Limit)
		s.core.emitLogAt(st, LogInfo, fmt.Sprintf("The capture %s on link %s stopped: %s", out.Capture.FileName, linkID, last.Limit))
		return
	}
	s.core.log.Warn("capture ended by itself", "project", projectID, "link", linkID, "compute", computeID, "reason", last.Err)
	s.core.emitLog(st, fmt.Sprintf("The capture %s on link %s stopped on compute %s: %s", out.Capture.FileName, linkID, computeID, last.Err))
}

// CaptureRotated records that a link's capture began its next file (a
// ring of files): the link shows that file, and is announced.
func (s *Reports) CaptureRotated(ctx context.Context, computeID, projectID, linkID string, now capspec.State) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return
	}
	defer st.ops.Unlock()
	out, ok := st.changeCapture(computeID, linkID, func(c *Capture) { c.report(now) })
	if !ok {
		return
	}
	s.core.emit(st, LinkUpdated, nil, &out)
}

// changeCapture applies change to a link's capture if it is running on
// computeID, and returns the link as changed; a report about a capture that
// is not running there changes nothing. st.ops must be held.
func (st *state) changeCapture(computeID, linkID string, change func(*Capture)) (Link, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l, ok := st.links[linkID]
	if !ok || !l.Capture.Active || l.Capture.ComputeID != computeID {
		return Link{}, false
	}
	change(&l.Capture)
	return *l, true
}

// NodeWarning relays what a compute tells a node's users (a VM that runs
// without KVM) as a log.warning notification of the node's project.
func (s *Reports) NodeWarning(ctx context.Context, computeID, projectID, nodeID, message string) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return
	}
	st.mu.RLock()
	n, ok := st.nodes[nodeID]
	st.mu.RUnlock()
	if !ok || n.ComputeID != computeID {
		return
	}
	// Not emitLog: st.ops is not held, and a warning is no change to
	// keep in order with the changes.
	s.core.cfg.Events.Emit(Event{Action: LogWarning, ProjectID: projectID, Message: message})
}

// NodeChanged records that a compute reports a node changed by itself (an
// emulator that died). Captures that depended on a node that is no longer
// started stop, as when it is stopped through the API.
//
// The report may be stale by the time it is handled (the node was started
// again through the API meanwhile), so the node is asked for again, in turn
// with the API's operations, and that answer is what counts; rt is only
// used if the compute cannot answer now.
func (s *Reports) NodeChanged(ctx context.Context, computeID, projectID, nodeID string, rt NodeRuntime) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return
	}
	defer st.ops.Unlock()
	now, err := s.core.cfg.Computes.Node(ctx, computeID, projectID, nodeID)
	switch {
	case err == nil:
		rt = now
	case isNotFound(err):
		return // deleted meanwhile, or the project was closed there
	}
	s.applyReported(ctx, st, computeID, nodeID, rt)
}

// applyReported updates a node from a compute's report and announces it.
// st.ops must be held.
func (s *Reports) applyReported(ctx context.Context, st *state, computeID, nodeID string, rt NodeRuntime) {
	st.mu.RLock()
	n, ok := st.nodes[nodeID]
	st.mu.RUnlock()
	if !ok || n.ComputeID != computeID {
		return
	}
	if before, after := s.nodes.updateRuntime(ctx, st, n, rt); shownChanged(before, after) {
		s.core.emit(st, NodeUpdated, &after, nil)
	}
}

// ComputeLost records that a compute cannot be reached (it died, or the
// network to it did): every capture it was writing is over, as far as
// anyone can tell, and the links say so at once. The files on that compute
// keep every whole record written before. Nodes keep their last known
// status until the compute is back and tells.
func (s *Reports) ComputeLost(ctx context.Context, computeID string) {
	for _, p := range s.core.all() {
		st, err := s.core.lockOpened(p.ID)
		if err != nil {
			continue
		}
		var ended []Link
		st.mu.Lock()
		delete(st.onComputes, computeID) // it must be told of the project again
		for _, id := range st.linkOrder {
			l := st.links[id]
			if l.Capture.Active && l.Capture.ComputeID == computeID {
				l.Capture.end(capspec.State{})
				ended = append(ended, *l)
			}
		}
		st.mu.Unlock()
		for i := range ended {
			s.core.log.Warn("capture lost with its compute", "project", p.ID, "link", ended[i].ID, "compute", computeID)
			s.core.emit(st, LinkUpdated, nil, &ended[i])
			s.core.emitLog(st, fmt.Sprintf("The capture %s on link %s stopped: compute %s cannot be reached (the file on it keeps every whole frame written)", ended[i].Capture.FileName, ended[i].ID, computeID))
		}
		st.ops.Unlock()
	}
}

// ComputeBack reconciles a compute that can be reached again, given what
// it reports it still runs (running; nil if it could not tell). It may have
// been cut off, and kept everything, or restarted, and lost everything:
// every opened project with nodes there is opened on it again, its nodes
// created again (a node that still runs is found as it is; one that died
// comes back stopped), and its links set up again. A link the compute
// still runs keeps its relay, tunnel ports included, and a capture it is
// still writing is taken back: the link says capturing again. A link it
// lost is built again; one that crosses to another compute is rebuilt on
// both sides, since a restarted agent's tunnel ports are new.
func (s *Reports) ComputeBack(ctx context.Context, computeID string, running []Running) {
	for _, p := range s.core.all() {
		kept := map[string]RunningLink{}
		for _, r := range running {
			if r.ComputeID == computeID && r.ProjectID == p.ID {
				for _, rl := range r.Links {
					kept[rl.ID] = rl
				}
			}
		}
		st, err := s.core.lockOpened(p.ID)
		if err != nil {
			continue
		}
		s.reconcile(ctx, st, computeID, kept)
		st.ops.Unlock()
	}
}

// reconcile brings one project back on a compute, which still runs the
// relays in kept. st.ops must be held.
func (s *Reports) reconcile(ctx context.Context, st *state, computeID string, kept map[string]RunningLink) {
	st.mu.RLock()
	uses := slices.Contains(st.openComputesLocked(), computeID)
	var nodes []Node
	for _, id := range st.nodeOrder {
		if n := st.nodes[id]; n.ComputeID == computeID && !n.Inert {
			nodes = append(nodes, *n)
		}
	}
	var links []*Link
	for _, id := range st.linkOrder {
		if l := st.links[id]; l.Wired && slices.Contains(l.Computes, computeID) {
			links = append(links, l)
		}
	}
	pid, vars := st.p.ID, st.p.Settings.Variables
	st.mu.RUnlock()
	if !uses {
		return
	}
	if err := s.core.openOn(ctx, st, computeID); err != nil {
		s.core.log.Warn("reconcile: open project", "project", pid, "compute", computeID, "err", err)
		return
	}
	for _, n := range nodes {
		spec, err := s.nodes.nodeSpec(&n, vars)
		if err != nil {
			s.core.log.Warn("reconcile: node", "project", pid, "node", n.ID, "err", err)
			continue
		}
		rt, err := s.core.cfg.Computes.CreateNode(ctx, computeID, pid, spec)
		if err != nil {
			s.core.log.Warn("reconcile: node", "project", pid, "node", n.ID, "err", err)
			continue
		}
		s.applyReported(ctx, st, computeID, n.ID, rt)
	}
	for _, l := range links {
		st.mu.RLock()
		cur := *l
		var ends []*Node
		for _, e := range l.Endpoints {
			ends = append(ends, st.nodes[e.NodeID])
		}
		st.mu.RUnlock()
		rl, still := kept[l.ID]
		side := slices.IndexFunc(ends, func(n *Node) bool { return n.ComputeID == computeID })
		if cur.Tunnel == nil || still && side >= 0 && rl.Tunnel != nil && rl.Tunnel.LocalPort == cur.Tunnel.Ports[side] {
			if err := s.links.push(ctx, &cur, ends); err != nil {
				s.core.log.Warn("reconcile: link", "project", pid, "link", l.ID, "err", err)
			}
			if still && rl.Capture != nil {
				s.retakeCapture(ctx, st, l, ends, computeID, rl.Capture)
			}
			continue
		}
		s.links.unwire(ctx, &cur) // the surviving side's half, with its old tunnel
		cur.Wired, cur.Computes, cur.Tunnel = false, nil, nil
		if err := s.links.wire(ctx, &cur, ends); err != nil {
			s.core.log.Warn("reconcile: cross-compute link", "project", pid, "link", l.ID, "err", err)
		}
		st.mu.Lock()
		l.Wired, l.Computes, l.Tunnel, l.FilterSide = cur.Wired, cur.Computes, cur.Tunnel, cur.FilterSide
		st.mu.Unlock()
	}
	s.core.log.Info("compute reconciled", "project", pid, "compute", computeID, "nodes", len(nodes), "links", len(links))
}

// retakeCapture takes back a capture a compute kept writing while it could
// not be reached, unless the link captures elsewhere meanwhile: then the
// compute's is stopped, so the file the link names is the only one
// growing. st.ops must be held.
func (s *Reports) retakeCapture(ctx context.Context, st *state, l *Link, ends []*Node, computeID string, c *capspec.State) {
	st.mu.Lock()
	if l.Capture.Active {
		other := l.Capture.ComputeID != computeID
		st.mu.Unlock()
		if other {
			if _, err := s.core.cfg.Computes.StopCapture(ctx, computeID, l.ProjectID, l.ID); err != nil && !isNotFound(err) {
				s.core.log.Warn("reconcile: stop a stale capture", "project", l.ProjectID, "link", l.ID, "compute", computeID, "err", err)
			}
		}
		return
	}
	taken, ok := capturedOn(ends, l.Tunnel != nil, computeID, *c)
	if !ok { // no end of the link is on that compute any more
		st.mu.Unlock()
		return
	}
	l.Capture = taken
	out := *l
	st.mu.Unlock()
	s.core.log.Info("capture taken back from a compute that was cut off", "project", l.ProjectID, "link", l.ID, "compute", computeID)
	s.core.emit(st, LinkUpdated, nil, &out)
}
