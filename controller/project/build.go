package project

import (
	"context"
	"slices"
)

// builder puts a stored project's nodes and links on their computes, when
// a project opens and when a snapshot restore reopens it.
type builder struct {
	core  *core
	nodes *Nodes
	links *Links
}

// build creates a stored project's nodes and links on their computes into
// st, which nobody else sees yet. Links whose endpoints are missing or
// taken are dropped, with a log line, as GNS3 does.
func (s *builder) build(ctx context.Context, st *state, snap *Snapshot, running []Running) (err error) {
	for _, stored := range snap.Nodes {
		n := stored
		if s.keepInert(st, n) {
			continue
		}
		if !s.core.cfg.Computes.Exists(n.ComputeID) {
			return computeNotFound(n.ComputeID)
		}
		if !s.core.mayRun(n.ComputeID, n.Type) {
			return errorf(ErrConflict, "Node type %s is not supported by compute %s", n.Type, n.ComputeID)
		}
		if err := s.core.openOn(ctx, st, n.ComputeID); err != nil {
			return err
		}
		n.ProjectID = st.p.ID
		n.Properties = withDefaults(n.Type, n.Properties)
		n.MACIndex = -1
		if usesMAC(n.Type) {
			n.MACIndex = st.freeMACLocked()
		}
		spec, err := s.nodes.nodeSpec(&n, st.p.Settings.Variables)
		if err != nil {
			return err
		}
		rt, err := s.core.cfg.Computes.CreateNode(ctx, n.ComputeID, st.p.ID, spec)
		if err != nil {
			return err
		}
		n.applyRuntime(rt)
		s.place(st, &n)
	}
	for _, stored := range snap.Links {
		if s.keepUnwired(st, stored) {
			continue
		}
		filters, err := normalizeFilters(stored.Filters)
		if err != nil {
			s.core.log.Warn("link filters ignored", "link", stored.ID, "err", err)
			filters = map[string][]any{}
		}
		l := &Link{ID: stored.ID, ProjectID: st.p.ID, Filters: filters, Style: stored.Style, Suspend: stored.Suspend, LinkType: Ethernet, Extra: stored.Extra}
		var nodes []*Node
		for _, ep := range stored.Endpoints {
			got, err := st.attachLocked(l, []Endpoint{ep})
			if err != nil {
				s.core.log.Warn("link endpoint skipped", "link", l.ID, "node", ep.NodeID, "err", err)
				continue
			}
			// attachLocked checks against the endpoints already in l.
			nodes = append(nodes, got...)
		}
		if len(l.Endpoints) != 2 {
			s.core.log.Warn("link dropped: it does not have two endpoints", "link", l.ID)
			continue
		}
		if t := adoptedTunnel(l.ID, nodes, running); t != nil && nodes[0].ComputeID != nodes[1].ComputeID {
			// The relays run: set them up again as they are (idempotent).
			l.Tunnel, l.Wired, l.Computes = t, true, []string{nodes[0].ComputeID, nodes[1].ComputeID}
			if c, ok := adoptedCapture(l, nodes, running); ok {
				l.Capture = c
			}
			l.FilterSide = filterSide(nodes, l.Capture)
			if err := s.links.push(ctx, l, nodes); err != nil {
				return err
			}
		} else if err := s.links.wire(ctx, l, nodes); err != nil {
			return err
		} else if c, ok := adoptedCapture(l, nodes, running); ok {
			l.Capture = c
		}
		st.links[l.ID] = l
		st.linkOrder = append(st.linkOrder, l.ID)
	}
	return nil
}

// keepInert keeps a stored node of a type labtap cannot run (a GNS3
// project's iou, dynamips, virtualbox, ... node, or one its compute says
// it does not run) as it is, stopped, on no compute, so the project opens
// and its file keeps the node. It reports whether n was such a
// node. st is being built.
func (s *builder) keepInert(st *state, n Node) bool {
	if runnable(n.Type) && (!s.core.cfg.Computes.Exists(n.ComputeID) || s.core.mayRun(n.ComputeID, n.Type)) {
		return false
	}
	n.ProjectID, n.Inert, n.MACIndex, n.Status = st.p.ID, true, -1, Stopped
	s.place(st, &n)
	s.core.log.Warn("node kept stopped: this server cannot run its type", "project", st.p.ID, "node", n.ID, "type", n.Type)
	return true
}

// keepUnwired keeps a stored link to an inert node as the file has it,
// not wired (it carries no frames), so saving the project keeps it. It
// reports whether l was such a link. st is being built.
func (s *builder) keepUnwired(st *state, l Link) bool {
	inert := slices.ContainsFunc(l.Endpoints, func(e Endpoint) bool {
		n, ok := st.nodes[e.NodeID]
		return ok && n.Inert
	})
	if !inert {
		return false
	}
	l.ProjectID, l.Wired, l.Computes, l.Tunnel, l.Capture = st.p.ID, false, nil, nil, Capture{}
	if l.LinkType == "" {
		l.LinkType = Ethernet
	}
	st.links[l.ID] = &l
	st.linkOrder = append(st.linkOrder, l.ID)
	return true
}

// place adds a stored node to the project being built, with the symbol's
// size and the default label where its file has none.
func (s *builder) place(st *state, n *Node) {
	if n.Width == 0 || n.Height == 0 {
		n.Width, n.Height = s.core.cfg.Symbols(n.Symbol)
	}
	if n.Label == nil {
		n.Label = nodeLabel(nil, n.Name, n.Height)
	}
	st.nodes[n.ID] = n
	st.nodeOrder = append(st.nodeOrder, n.ID)
}
