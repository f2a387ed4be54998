package project

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/labtap/labtap/capspec"
)

// movedFiles are the files of a node's directory that a move copies to
// the new compute, by node type. A type without an entry has no files
// that matter (a switch, a hub: its state is its properties).
var movedFiles = map[string][]string{
	"vpcs": {"startup.vpc"},
}

// notMovable says why a node type cannot move between computes ("" if
// it can): the disks of docker and QEMU nodes have no copy between
// agents yet, and their contents would be lost.
func notMovable(nodeType string) string {
	switch nodeType {
	case TypeDocker, TypeQemu:
		return "its disk has no copy between computes yet"
	}
	return ""
}

// MoveResult is a node after a move, with where it came from.
type MoveResult struct {
	Node Node
	From string
}

// Move moves a stopped node (a switch or hub may run) to another compute,
// computeID or ComputeAuto (placement, never its own compute). Its files
// go with it, its links are wired again (a tunnel where its peer stays on
// another compute, none where it joins its peer) and the project is
// saved; only then is the old copy deleted. A move fails as a whole:
// when any step fails, the node stays on its compute with its files and
// links as they were. A link that is capturing refuses the move: its
// capture file would be split between two computes (stop it, move, start
// it again).
func (s *Nodes) Move(ctx context.Context, projectID, nodeID, computeID string) (_ MoveResult, err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return MoveResult{}, err
	}
	defer st.unlock(&err)
	return s.moveLocked(ctx, st, projectID, nodeID, computeID, false)
}

// moveLocked is Move with st.ops held. lost is a move off a compute that
// is gone (Recover): nothing is read from it or deleted there, and the
// node's status there does not matter.
func (s *Nodes) moveLocked(ctx context.Context, st *state, projectID, nodeID, computeID string, lost bool) (MoveResult, error) {
	st.mu.RLock()
	n, err := st.nodeLocked(nodeID)
	var node Node
	var links []Link
	var peers map[string]Node
	if err == nil {
		node = *n
		peers = map[string]Node{}
		for _, id := range st.linkOrder {
			l := st.links[id]
			if !l.touches(nodeID) {
				continue
			}
			links = append(links, *l)
			for _, ep := range l.Endpoints {
				if p, ok := st.nodes[ep.NodeID]; ok && ep.NodeID != nodeID {
					peers[ep.NodeID] = *p
				}
			}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return MoveResult{}, err
	}
	if lost {
		for i := range links {
			if links[i].Capture.Active { // it ran on the lost compute, or lost its peer
				links[i].Capture.end(capspec.State{})
			}
		}
	} else if err := s.checkMove(node, links); err != nil {
		return MoveResult{}, err
	}
	from := node.ComputeID
	if computeID == "" || computeID == ComputeAuto {
		if computeID, err = s.core.placeNodeOff(st, projectID, node.Name, node.Type, node.Properties, from); err != nil {
			return MoveResult{}, err
		}
	} else if err := s.checkTarget(node, computeID); err != nil {
		return MoveResult{}, err
	}

	// 1. The copy: the node on the new compute, with its files.
	moved := node
	moved.ComputeID = computeID
	spec, err := s.nodeSpec(&moved, st.project().Settings.Variables)
	if err != nil {
		return MoveResult{}, err
	}
	if err := s.core.openOn(ctx, st, computeID); err != nil {
		return MoveResult{}, err
	}
	rt, err := s.core.cfg.Computes.CreateNode(ctx, computeID, projectID, spec)
	if err != nil {
		return MoveResult{}, err
	}
	dropCopy := func() {
		if derr := s.core.cfg.Computes.DeleteNode(context.WithoutCancel(ctx), computeID, projectID, nodeID); derr != nil && !isNotFound(derr) {
			s.core.log.Warn("remove the copy of a node whose move failed", "node", nodeID, "compute", computeID, "err", derr)
		}
	}
	if !lost {
		if err := s.copyFiles(ctx, node, computeID); err != nil {
			dropCopy()
			return MoveResult{}, err
		}
	}
	moved.applyRuntime(rt)

	// 2. The switch: its links wired again around the copy. Each link is
	// taken down and wired anew; a failure wires the ones done back as
	// they were.
	rewired := make([]Link, 0, len(links))
	nodesOf := func(l Link, self Node) []*Node {
		out := make([]*Node, 0, 2)
		for _, ep := range l.Endpoints {
			if ep.NodeID == nodeID {
				out = append(out, &self)
			} else {
				p := peers[ep.NodeID]
				out = append(out, &p)
			}
		}
		return out
	}
	// unwire takes a link down, on every compute but a lost one.
	unwire := func(ctx context.Context, l Link) error {
		if lost {
			l.Computes = slices.DeleteFunc(slices.Clone(l.Computes), func(c string) bool { return c == from })
		}
		return s.links.unwire(ctx, &l)
	}
	undo := func() {
		bg := context.WithoutCancel(ctx)
		for i, nl := range rewired {
			if nl.Wired {
				if err := unwire(bg, nl); err != nil {
					s.core.log.Warn("undo a moved link", "link", nl.ID, "err", err)
				}
			}
			old := links[i]
			if !old.Wired || len(old.Endpoints) != 2 {
				continue
			}
			again := old
			again.Wired, again.Computes, again.Tunnel = false, nil, nil
			if err := s.links.wire(bg, &again, nodesOf(old, node)); err != nil {
				s.core.log.Warn("wire a link back after a failed move", "link", old.ID, "err", err)
			}
		}
		dropCopy()
	}
	// peerLost: a link whose other end is on the lost compute too; it
	// is wired when that node is recovered.
	peerLost := func(l Link) bool {
		for _, ep := range l.Endpoints {
			if p, ok := peers[ep.NodeID]; ok && p.ComputeID == from {
				return true
			}
		}
		return false
	}
	for _, l := range links {
		// A link left unwired by the recovery of its other end is wired
		// with this one's.
		if len(l.Endpoints) != 2 || !l.Wired && !lost {
			rewired = append(rewired, l)
			continue
		}
		if l.Wired {
			if err := unwire(ctx, l); err != nil {
				undo()
				return MoveResult{}, err
			}
		}
		nl := l
		nl.Wired, nl.Computes, nl.Tunnel = false, nil, nil
		if lost && peerLost(l) {
			rewired = append(rewired, nl)
			continue
		}
		if err := s.links.wire(ctx, &nl, nodesOf(l, moved)); err != nil {
			// This link is down on both sides: wire it back too.
			rewired = append(rewired, nl)
			undo()
			return MoveResult{}, fmt.Errorf("move node %s: link %s: %w", node.Name, l.ID, err)
		}
		rewired = append(rewired, nl)
	}
	prevNode := *n
	prevLinks := make(map[string]Link, len(links))
	st.change(func() {
		*n = moved
		for _, nl := range rewired {
			if l, ok := st.links[nl.ID]; ok {
				prevLinks[nl.ID] = *l
				*l = nl
			}
		}
	})
	if err := s.core.save(st); err != nil {
		st.change(func() {
			*n = prevNode
			for id, l := range prevLinks {
				*st.links[id] = l
			}
		})
		undo()
		return MoveResult{}, err
	}

	// 3. The old copy goes: the project no longer names it, so a failure
	// leaves only files behind on the old compute, which is said.
	if lost {
		// Nothing to delete.
	} else if derr := s.core.cfg.Computes.DeleteNode(context.WithoutCancel(ctx), from, projectID, nodeID); derr != nil && !isNotFound(derr) {
		s.core.log.Warn("delete the old copy of a moved node", "node", nodeID, "compute", from, "err", derr)
		s.core.emitLog(st, fmt.Sprintf("Node %s moved to %s; its old copy on %s could not be deleted: %v", node.Name, computeID, from, derr))
	}
	s.core.log.Info("node moved", "project", projectID, "node", node.Name, "from", from, "to", computeID, "links", len(links))
	out := moved
	s.core.emit(st, NodeUpdated, &out, nil)
	for _, nl := range rewired {
		l := nl
		s.core.emit(st, LinkUpdated, nil, &l)
	}
	return MoveResult{Node: out, From: from}, nil
}

// checkMove says why a node cannot move now.
func (s *Nodes) checkMove(n Node, links []Link) error {
	if n.Inert {
		return errorf(ErrConflict, "Node %s cannot move: labtap does not run its type", n.Name)
	}
	if why := notMovable(n.Type); why != "" {
		return errorf(ErrConflict, "Node %s cannot move: %s", n.Name, why)
	}
	if n.Status != Stopped && !isAlwaysRunning(n.Type) {
		return errorf(ErrConflict, "Node %s cannot move while it is %s: stop it first", n.Name, n.Status)
	}
	for _, l := range links {
		if l.Capture.Active {
			return errorf(ErrConflict, "Node %s cannot move while link %s is capturing: stop the capture first", n.Name, l.ID)
		}
	}
	return nil
}

// checkTarget says why a node cannot move to a compute its client named.
func (s *Nodes) checkTarget(n Node, computeID string) error {
	if !s.core.cfg.Computes.Exists(computeID) {
		return computeNotFound(computeID)
	}
	if computeID == n.ComputeID {
		return errorf(ErrConflict, "Node %s is already on compute %s", n.Name, computeID)
	}
	if placer, ok := s.core.cfg.Computes.(Placer); ok && placer.Draining(computeID) {
		return errorf(ErrConflict, "Compute %s is draining: it takes no new nodes", computeID)
	}
	if !s.core.mayRun(computeID, n.Type) {
		return errorf(ErrConflict, "Node type %s is not supported by compute %s", n.Type, computeID)
	}
	return nil
}

// copyFiles copies a node's files from its compute to its copy's.
func (s *Nodes) copyFiles(ctx context.Context, n Node, to string) error {
	for _, name := range movedFiles[n.Type] {
		data, err := s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, n.ProjectID, n.ID, name)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("move node %s: read %s: %w", n.Name, name, err)
		}
		if err := s.core.cfg.Computes.WriteNodeFile(ctx, to, n.ProjectID, n.ID, name, data); err != nil {
			return fmt.Errorf("move node %s: write %s: %w", n.Name, name, err)
		}
	}
	return nil
}

// DrainReport is what moving the nodes off a compute did, project by
// project: the nodes moved, those left (running, or whose move failed),
// each with why.
type DrainReport struct {
	Moved []MovedNode `json:"moved"`
	Left  []LeftNode  `json:"left"`
}

// MovedNode is a node a drain moved.
type MovedNode struct {
	ProjectID string `json:"project_id"`
	NodeID    string `json:"node_id"`
	Name      string `json:"name"`
	ComputeID string `json:"compute_id"`
}

// LeftNode is a node a drain left on its compute, and why.
type LeftNode struct {
	ProjectID string `json:"project_id"`
	NodeID    string `json:"node_id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
}

// MoveOff moves every stopped node of the opened projects off a compute,
// by placement (a draining compute takes none). Started nodes stay and
// are reported, unless restart: then each is stopped, moved and started
// again on its new compute (started again where it was if its move
// fails). The nodes whose move failed are reported too, each whole where
// it was. Nodes of closed projects are not on any compute.
func (s *Nodes) MoveOff(ctx context.Context, computeID string, restart bool) DrainReport {
	rep := DrainReport{Moved: []MovedNode{}, Left: []LeftNode{}}
	for _, pn := range s.nodesOn(computeID) {
		projectID, n := pn.projectID, pn.node
		left := func(status string, err error) {
			rep.Left = append(rep.Left, LeftNode{ProjectID: projectID, NodeID: n.ID, Name: n.Name, Status: status, Reason: reason(err)})
		}
		bounce := restart && n.Status != Stopped && !isAlwaysRunning(n.Type)
		if bounce {
			// What would refuse the move refuses it before the stop.
			links, _ := s.links.OfNode(projectID, n.ID)
			stopped := n
			stopped.Status = Stopped
			if err := s.checkMove(stopped, links); err != nil {
				left(n.Status, err)
				continue
			}
			if _, err := s.Stop(ctx, projectID, n.ID); err != nil {
				left(n.Status, err)
				continue
			}
		}
		res, err := s.Move(ctx, projectID, n.ID, ComputeAuto)
		if err != nil {
			status := n.Status
			if bounce {
				if _, serr := s.Start(ctx, projectID, n.ID); serr != nil {
					status = Stopped
					err = fmt.Errorf("%s; and it could not be started again: %s", reason(err), reason(serr))
				}
			}
			left(status, err)
			continue
		}
		rep.Moved = append(rep.Moved, MovedNode{ProjectID: projectID, NodeID: n.ID, Name: n.Name, ComputeID: res.Node.ComputeID})
		if bounce {
			if _, err := s.Start(ctx, projectID, n.ID); err != nil {
				left(Stopped, fmt.Errorf("moved to %s but not started: %s", res.Node.ComputeID, reason(err)))
			}
		}
	}
	return rep
}

// Recover restarts elsewhere, by placement, every node the opened
// projects have on a compute that is gone (not connected): each is
// created anew on another compute from the project's entry for it (its
// properties, name, MAC, console type) and its links are wired to it
// there; with start, it is started. What only the lost compute held is
// lost: the node's directory there (a VPCS's startup.vpc, a docker
// container's changes, a QEMU disk's overlay) and the capture files on
// its disk; a capture on one of its links ends. A node that cannot be
// placed or created stays on the lost compute in the project, as it
// was, and is reported. A connected compute is refused: drain it with
// move instead, which keeps the nodes' files.
func (s *Nodes) Recover(ctx context.Context, computeID string, start bool) (DrainReport, error) {
	placer, ok := s.core.cfg.Computes.(Placer)
	if !ok {
		return DrainReport{}, errorf(ErrConflict, "Computes here cannot be recovered from")
	}
	if !s.core.cfg.Computes.Exists(computeID) {
		return DrainReport{}, computeNotFound(computeID)
	}
	for _, r := range placer.Rooms() {
		if r.ID == computeID && r.Connected {
			return DrainReport{}, errorf(ErrConflict, "Compute %s is connected: drain it with move to move its nodes with their files", computeID)
		}
	}
	rep := DrainReport{Moved: []MovedNode{}, Left: []LeftNode{}}
	for _, pn := range s.nodesOn(computeID) {
		projectID, n := pn.projectID, pn.node
		res, err := s.recoverOne(ctx, projectID, n.ID, computeID)
		if err != nil {
			rep.Left = append(rep.Left, LeftNode{ProjectID: projectID, NodeID: n.ID, Name: n.Name, Status: n.Status, Reason: reason(err)})
			continue
		}
		if start && !isAlwaysRunning(n.Type) {
			if _, err := s.Start(ctx, projectID, n.ID); err != nil {
				rep.Left = append(rep.Left, LeftNode{ProjectID: projectID, NodeID: n.ID, Name: n.Name, Status: res.Node.Status,
					Reason: "recreated on " + res.Node.ComputeID + " but not started: " + reason(err)})
			}
		}
		rep.Moved = append(rep.Moved, MovedNode{ProjectID: projectID, NodeID: n.ID, Name: n.Name, ComputeID: res.Node.ComputeID})
	}
	s.core.log.Info("nodes of a lost compute recovered", "compute", computeID, "recreated", len(rep.Moved), "left", len(rep.Left))
	return rep, nil
}

// recoverOne moves one node off a lost compute, if it is still there.
func (s *Nodes) recoverOne(ctx context.Context, projectID, nodeID, lost string) (_ MoveResult, err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return MoveResult{}, err
	}
	defer st.unlock(&err)
	if n, err := s.Get(projectID, nodeID); err != nil || n.ComputeID != lost {
		return MoveResult{}, errorf(ErrConflict, "Node %s is no longer on compute %s", nodeID, lost)
	}
	res, err := s.moveLocked(ctx, st, projectID, nodeID, ComputeAuto, true)
	if err == nil {
		s.core.emitLog(st, fmt.Sprintf("Node %s was recreated on compute %s: compute %s is lost, and with it the node's files there", res.Node.Name, res.Node.ComputeID, lost))
	}
	return res, err
}

// reason is an error's message for a client.
func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

// PlacedNode is a node of an opened project, as a compute holds it.
type PlacedNode struct {
	ProjectID string `json:"project_id"`
	NodeID    string `json:"node_id"`
	Name      string `json:"name"`
	NodeType  string `json:"node_type"`
	Status    string `json:"status"`
}

// OnCompute lists the nodes the opened projects have on a compute (a
// lost one's: what Recover would recreate elsewhere), project by project.
func (s *Nodes) OnCompute(computeID string) ([]PlacedNode, error) {
	if !s.core.cfg.Computes.Exists(computeID) {
		return nil, computeNotFound(computeID)
	}
	out := []PlacedNode{}
	for _, pn := range s.nodesOn(computeID) {
		n := pn.node
		out = append(out, PlacedNode{ProjectID: pn.projectID, NodeID: n.ID, Name: n.Name, NodeType: n.Type, Status: n.Status})
	}
	return out, nil
}

// projectNode is a node with its project's id.
type projectNode struct {
	projectID string
	node      Node
}

// nodesOn lists the nodes the opened projects have on compute computeID,
// project by project (nodes of closed projects are on no compute).
func (s *Nodes) nodesOn(computeID string) []projectNode {
	var out []projectNode
	for _, p := range s.core.all() {
		if p.Status != Opened {
			continue
		}
		nodes, err := s.List(p.ID)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if n.ComputeID == computeID {
				out = append(out, projectNode{p.ID, n})
			}
		}
	}
	return out
}
