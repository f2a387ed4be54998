package project

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/labtap/labtap/capspec"
)

func newID() string { return uuid.NewString() }

// LinkCreate is a request to create a link.
type LinkCreate struct {
	// Endpoints are attached in order; each Label may be nil (default).
	Endpoints []Endpoint
	Filters   map[string][]any // nil: none
	Style     json.RawMessage  // nil: {}
	Suspend   bool
}

// defaultEndpointLabel is GNS3's label for an endpoint given none.
func defaultEndpointLabel(adapter, port int) Label {
	text, _ := json.Marshal(fmt.Sprintf("%d/%d", adapter, port))
	return Label{
		"text":  text,
		"style": json.RawMessage(`"font-family: TypeWriter;font-size: 10.0;font-weight: bold;fill: #000000;fill-opacity: 1.0;"`),
	}
}

// Links are the links of projects: their checks, their wiring on
// computes (UDP tunnels, filters) and their changes.
type Links struct {
	core *core
}

// List returns a project's links in creation order. For a closed project
// they are the links its file holds.
func (s *Links) List(projectID string) ([]Link, error) {
	st, err := s.core.lookup(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]Link, 0, len(st.linkOrder))
	for _, id := range st.linkOrder {
		out = append(out, *st.links[id])
	}
	return out, nil
}

// Get returns one link.
func (s *Links) Get(projectID, linkID string) (Link, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return Link{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	l, err := st.linkLocked(linkID)
	if err != nil {
		return Link{}, err
	}
	return *l, nil
}

func (st *state) linkLocked(id string) (*Link, error) {
	l, ok := st.links[id]
	if !ok {
		return nil, linkNotFound(id)
	}
	return l, nil
}

func (l *Link) touches(nodeID string) bool {
	return slices.ContainsFunc(l.Endpoints, func(e Endpoint) bool { return e.NodeID == nodeID })
}

// portUsedLocked reports whether a link of two endpoints uses a port. Port
// use is derived from the link table, never stored on nodes, so nothing can
// make it forget a link. st.mu must be held.
func (st *state) portUsedLocked(nodeID string, adapter, port int) bool {
	for _, l := range st.links {
		if len(l.Endpoints) != 2 {
			continue
		}
		for _, e := range l.Endpoints {
			if e.NodeID == nodeID && e.Adapter == adapter && e.Port == port {
				return true
			}
		}
	}
	return false
}

// Create checks a link (GNS3's checks, in GNS3's order), wires it on its
// compute when it has two endpoints, saves the project and returns it.
// Nothing changes when a check or the wiring fails.
func (s *Links) Create(ctx context.Context, projectID string, req LinkCreate) (_ Link, err error) {
	if len(req.Endpoints) > 2 {
		return Link{}, errorf(ErrInvalid, "A link has at most 2 endpoints, got %d", len(req.Endpoints))
	}
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Link{}, err
	}
	defer st.unlock(&err)
	filters, err := normalizeFilters(req.Filters)
	if err != nil {
		return Link{}, err
	}
	l := &Link{
		ID:        newID(),
		ProjectID: projectID,
		Filters:   filters,
		Style:     req.Style,
		Suspend:   req.Suspend,
		LinkType:  Ethernet,
	}
	if l.Style == nil {
		l.Style = json.RawMessage("{}")
	}
	st.mu.RLock()
	nodes, err := st.attachLocked(l, req.Endpoints)
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	if len(l.Endpoints) == 2 {
		if err := s.wire(ctx, l, nodes); err != nil {
			return Link{}, err
		}
	}
	st.change(func() {
		st.links[l.ID] = l
		st.linkOrder = append(st.linkOrder, l.ID)
	})
	if err := s.core.save(st); err != nil {
		st.change(func() {
			delete(st.links, l.ID)
			st.linkOrder = st.linkOrder[:len(st.linkOrder)-1]
		})
		s.unwire(context.WithoutCancel(ctx), l)
		return Link{}, err
	}
	out := *l
	if l.Wired {
		s.core.emit(st, LinkCreated, nil, &out)
	}
	return out, nil
}

// attachLocked checks each endpoint in order and adds it to l. It returns
// the endpoints' nodes. st.mu must be held.
func (st *state) attachLocked(l *Link, eps []Endpoint) ([]*Node, error) {
	var nodes []*Node
	for _, ep := range eps {
		n, err := st.nodeLocked(ep.NodeID)
		if err != nil {
			return nil, err
		}
		port, ok := n.port(ep.Adapter, ep.Port)
		if !ok {
			return nil, errorf(ErrNotFound, "Port %d/%d for %s not found", ep.Adapter, ep.Port, n.Name)
		}
		if st.portUsedLocked(n.ID, ep.Adapter, ep.Port) {
			return nil, errorf(ErrConflict, "Port is already used")
		}
		l.LinkType = port.LinkType
		for i, other := range nodes {
			if other.ID == n.ID {
				return nil, errorf(ErrConflict, "Cannot connect to itself")
			}
			// GNS3 refuses cloud↔cloud; labtap allows it between UDP ports:
			// patching two outside endpoints through a captured, filterable
			// link is what they are for. A host interface keeps GNS3's rule.
			if isCloudOrNAT(other.Type) && isCloudOrNAT(n.Type) && !(other.Type == TypeCloud && n.Type == TypeCloud &&
				cloudPortType(other, l.Endpoints[i].Port) == "udp" && cloudPortType(n, ep.Port) == "udp") {
				return nil, errorf(ErrConflict, "Connecting a %s to a %s is not allowed", other.Type, n.Type)
			}
			op, ok := other.port(l.Endpoints[i].Adapter, l.Endpoints[i].Port)
			if !ok {
				return nil, errorf(ErrNotFound, "Port %d/%d for %s not found", l.Endpoints[i].Adapter, l.Endpoints[i].Port, other.Name)
			}
			if op.LinkType != port.LinkType {
				return nil, errorf(ErrConflict, "Connecting a %s interface to a %s interface is not allowed", op.LinkType, port.LinkType)
			}
		}
		if ep.Label == nil {
			ep.Label = defaultEndpointLabel(ep.Adapter, ep.Port)
		}
		l.Endpoints = append(l.Endpoints, ep)
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func isCloudOrNAT(t string) bool { return t == "cloud" || t == "nat" }

// cloudPortType is the type of a cloud's port (its ports_mapping entry:
// "udp" or "ethernet"), "" if it has none.
func cloudPortType(n *Node, port int) string {
	list, _ := n.Properties["ports_mapping"].([]any)
	if port < 0 || port >= len(list) {
		return ""
	}
	m, _ := list[port].(map[string]any)
	t, _ := m["type"].(string)
	return t
}

// wire sets up a two-endpoint link's relays and marks it wired. Nodes on
// one compute get one relay there; nodes on two computes get a relay on
// each, joined by a UDP tunnel: a port is reserved on each compute first,
// then both relays are set up, and if the second fails the first is removed
// and both reservations released, so nothing is left half-built.
func (s *Links) wire(ctx context.Context, l *Link, nodes []*Node) error {
	a, b := nodes[0], nodes[1]
	if a.ComputeID == b.ComputeID {
		if err := s.core.cfg.Computes.PutLink(ctx, a.ComputeID, l.ProjectID, sameComputeWiring(l, nodes)); err != nil {
			return err
		}
		l.Wired, l.Computes = true, []string{a.ComputeID}
		return nil
	}
	st, err := s.core.lookup(l.ProjectID)
	if err != nil {
		return err
	}
	for _, n := range nodes { // a compute that has no node yet needs the project
		if err := s.core.openOn(ctx, st, n.ComputeID); err != nil {
			return err
		}
	}
	var ports [2]int
	release := func() {
		for i, n := range nodes {
			if ports[i] != 0 {
				if err := s.core.cfg.Computes.ReleaseTunnelPort(context.WithoutCancel(ctx), n.ComputeID, l.ProjectID, tunnelID(l.ID, i)); err != nil {
					s.core.log.Warn("release tunnel port", "link", l.ID, "compute", n.ComputeID, "err", err)
				}
			}
		}
	}
	for i, n := range nodes {
		p, err := s.core.cfg.Computes.ReserveTunnelPort(ctx, n.ComputeID, l.ProjectID, tunnelID(l.ID, i))
		if err != nil {
			release()
			return err
		}
		ports[i] = p
	}
	l.Tunnel = &TunnelPorts{Hosts: [2]string{s.core.cfg.Computes.TunnelHost(a.ComputeID), s.core.cfg.Computes.TunnelHost(b.ComputeID)}, Ports: ports}
	l.FilterSide = filterSide(nodes, l.Capture)
	ws := crossWirings(l, nodes)
	if err := s.core.cfg.Computes.PutLink(ctx, a.ComputeID, l.ProjectID, ws[0]); err != nil {
		release()
		l.Tunnel = nil
		return err
	}
	if err := s.core.cfg.Computes.PutLink(ctx, b.ComputeID, l.ProjectID, ws[1]); err != nil {
		if derr := s.core.cfg.Computes.DeleteLink(context.WithoutCancel(ctx), a.ComputeID, l.ProjectID, l.ID); derr != nil {
			s.core.log.Warn("roll back half a link", "link", l.ID, "compute", a.ComputeID, "err", derr)
		}
		release()
		l.Tunnel = nil
		return err
	}
	l.Wired, l.Computes = true, []string{a.ComputeID, b.ComputeID}
	return nil
}

// tunnelID names the tunnel port reservation of one side of a link.
func tunnelID(linkID string, side int) string { return fmt.Sprintf("%s-%d", linkID, side) }

// sameComputeWiring is the one relay of a link whose nodes share a compute.
func sameComputeWiring(l *Link, nodes []*Node) Wiring {
	return Wiring{
		LinkID:       l.ID,
		A:            wireEnd(nodes[0], l.Endpoints[0]),
		B:            wireEnd(nodes[1], l.Endpoints[1]),
		Filters:      activeFilters(l.Filters),
		Suspend:      l.Suspend,
		DataLinkType: dataLinkTypeOf(l.LinkType),
	}
}

// crossWirings are the two relays of a link across computes: on each, the
// node's port and the tunnel to the other side, oriented like the link (A
// is always the first endpoint's side, so directions agree in captures).
// Only the filter side applies the filters; both apply suspend.
func crossWirings(l *Link, nodes []*Node) [2]Wiring {
	t := l.Tunnel
	tunnelTo := func(self int) WireEnd {
		peer := 1 - self
		return WireEnd{Name: wireEnd(nodes[peer], l.Endpoints[peer]).Name,
			Tunnel: &TunnelEnd{LocalPort: t.Ports[self], RemoteHost: t.Hosts[peer], RemotePort: t.Ports[peer]}}
	}
	var out [2]Wiring
	for side := range 2 {
		w := Wiring{LinkID: l.ID, Suspend: l.Suspend, DataLinkType: dataLinkTypeOf(l.LinkType)}
		if side == 0 {
			w.A, w.B = wireEnd(nodes[0], l.Endpoints[0]), tunnelTo(0)
		} else {
			w.A, w.B = tunnelTo(1), wireEnd(nodes[1], l.Endpoints[1])
		}
		if side == l.FilterSide {
			w.Filters = activeFilters(l.Filters)
		}
		out[side] = w
	}
	return out
}

// push sends a wired link's current relays to its computes (after its
// filters, suspend or filter side changed).
func (s *Links) push(ctx context.Context, l *Link, nodes []*Node) error {
	if !l.Wired {
		return nil
	}
	if l.Tunnel == nil {
		return s.core.cfg.Computes.PutLink(ctx, l.Computes[0], l.ProjectID, sameComputeWiring(l, nodes))
	}
	ws := crossWirings(l, nodes)
	for side, n := range nodes {
		if err := s.core.cfg.Computes.PutLink(ctx, n.ComputeID, l.ProjectID, ws[side]); err != nil {
			return err
		}
	}
	return nil
}

// pushAll is push that tries every compute even when one fails, and
// returns the first error.
func (s *Links) pushAll(ctx context.Context, l *Link, nodes []*Node) error {
	if !l.Wired {
		return nil
	}
	if l.Tunnel == nil {
		return s.core.cfg.Computes.PutLink(ctx, l.Computes[0], l.ProjectID, sameComputeWiring(l, nodes))
	}
	ws := crossWirings(l, nodes)
	var first error
	for side, n := range nodes {
		if err := s.core.cfg.Computes.PutLink(ctx, n.ComputeID, l.ProjectID, ws[side]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// checkBPF has every compute of a link compile the bpf filter of an
// update, without holding the project's lock.
func (s *Links) checkBPF(ctx context.Context, projectID, linkID string, filters map[string][]any) error {
	f, err := normalizeFilters(filters)
	if err != nil {
		return err
	}
	exprs := activeFilters(f).BPF
	if len(exprs) == 0 {
		return nil
	}
	l, err := s.Get(projectID, linkID)
	if err != nil || !l.Wired {
		return err
	}
	for _, c := range slices.Compact(slices.Clone(l.Computes)) {
		if err := s.core.cfg.Computes.CheckFilters(ctx, c, dataLinkTypeOf(l.LinkType), exprs); err != nil {
			return err
		}
	}
	return nil
}

// pushOrRevert sets a link's relays to next, all or nothing: if any
// compute fails (or times out, and may have applied it anyway), every
// compute of the link is set back to prev, so that the link's relays do
// what the link says.
func (s *Links) pushOrRevert(ctx context.Context, prev, next *Link, nodes []*Node) error {
	err := s.push(ctx, next, nodes)
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := s.pushAll(rctx, prev, nodes); rerr != nil {
		s.core.log.Error("set a link's relays back after a failed update", "project", prev.ProjectID, "link", prev.ID, "err", rerr)
	}
	return err
}

// dataLinkTypeOf is the data link type BPF filters of a link compile for.
func dataLinkTypeOf(linkType string) string {
	if linkType == Serial {
		return "DLT_C_HDLC"
	}
	return capspec.DefaultDataLinkType
}

func wireEnd(n *Node, ep Endpoint) WireEnd {
	name := n.Name
	if p, ok := n.port(ep.Adapter, ep.Port); ok {
		name += " " + p.Name
	}
	return WireEnd{NodeID: n.ID, Adapter: ep.Adapter, Port: ep.Port, Name: name}
}

// unwire removes a link's relays (their tunnel sockets go with them); a
// compute that does not know the link is fine. It returns the first other
// error.
func (s *Links) unwire(ctx context.Context, l *Link) error {
	var first error
	for _, c := range l.Computes {
		if err := s.core.cfg.Computes.DeleteLink(ctx, c, l.ProjectID, l.ID); err != nil && !isNotFound(err) && first == nil {
			first = err
		}
	}
	return first
}

// LinkUpdate is a change to a link (PUT). Nil members leave things as they
// are.
type LinkUpdate struct {
	Filters map[string][]any // nil: unchanged; empty: no filters
	Style   json.RawMessage  // nil: unchanged
	Suspend *bool
	// Labels replaces endpoint labels: each entry names a node of the link
	// and its new label (entries for other nodes are ignored, as in GNS3).
	Labels []Endpoint
}

// Update applies a change to a link in GNS3's order (filters, style,
// suspend, labels), announcing each effective step. Everything is checked,
// and the relay updated, before anything changes: a refused update changes
// nothing (GNS3 applies the first steps, then fails).
func (s *Links) Update(ctx context.Context, projectID, linkID string, u LinkUpdate) (_ Link, err error) {
	if u.Filters != nil {
		// A bpf filter can take its compute seconds to compile: it is
		// compiled (and kept there) before the project is locked, so the
		// relay update under the lock is quick.
		if err := s.checkBPF(ctx, projectID, linkID, u.Filters); err != nil {
			return Link{}, err
		}
	}
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Link{}, err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	cur, err := st.linkLocked(linkID)
	var plan linkPlan
	var nodes []*Node
	if err == nil {
		for _, e := range cur.Endpoints {
			nodes = append(nodes, st.nodes[e.NodeID])
		}
		plan, err = planLinkUpdate(*cur, u, func(id string) bool { _, ok := st.nodes[id]; return ok })
	}
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	next := plan.next
	if plan.relay {
		if err := s.pushOrRevert(ctx, cur, &next, nodes); err != nil {
			return Link{}, err
		}
	}
	if plan.announce == 0 {
		return *cur, nil
	}
	st.change(func() {
		*cur = next
	})
	// The link is changed on its computes: kept when its save fails, and
	// the failure answered.
	if err := s.core.saveKept(st); err != nil {
		return Link{}, err
	}
	for range plan.announce {
		out := next
		s.core.emit(st, LinkUpdated, nil, &out)
	}
	return next, nil
}

// AvailableFilters lists the filters a link can apply: the whole catalogue,
// whatever its nodes (GNS3 offers none on links between switches and hubs;
// our relay filters every link).
func (s *Links) AvailableFilters(projectID, linkID string) ([]FilterType, error) {
	if _, err := s.Get(projectID, linkID); err != nil {
		return nil, err
	}
	return Filters, nil
}

// OfNode returns the wired links touching a node.
func (s *Links) OfNode(projectID, nodeID string) ([]Link, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if _, err := st.nodeLocked(nodeID); err != nil {
		return nil, err
	}
	var out []Link
	for _, id := range st.linkOrder {
		if l := st.links[id]; l.Wired && l.touches(nodeID) {
			out = append(out, *l)
		}
	}
	return out, nil
}

// Delete removes a link: its relays (which ends a capture, leaving a
// valid file) and its entry.
func (s *Links) Delete(ctx context.Context, projectID, linkID string) (err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return err
	}
	defer st.unlock(&err)
	return s.deleteLocked(ctx, st, linkID)
}

// deleteLocked removes a link, saves the project and announces it.
// st.ops must be held.
func (s *Links) deleteLocked(ctx context.Context, st *state, linkID string) error {
	old, err := s.removeLocked(ctx, st, linkID)
	if err != nil {
		return err
	}
	// Taken down on its computes: the link stays deleted if the save
	// fails, and the delete answers the failure.
	serr := s.core.saveKept(st)
	s.emitGone(st, old)
	return serr
}

// removeLocked takes a link down on its computes and out of the
// project, without saving or announcing it, and returns it as it was.
// st.ops must be held.
func (s *Links) removeLocked(ctx context.Context, st *state, linkID string) (Link, error) {
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	var old Link
	if err == nil {
		old = *l
	}
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	if err := s.unwire(ctx, &old); err != nil {
		return Link{}, err
	}
	st.mu.Lock()
	delete(st.links, linkID)
	st.linkOrder = slices.DeleteFunc(st.linkOrder, func(x string) bool { return x == linkID })
	st.mu.Unlock()
	return old, nil
}

// emitGone announces a removed link.
func (s *Links) emitGone(st *state, old Link) {
	if old.Capture.Active {
		// Its capture ended with the link: say so first, so a client never
		// believes a deleted link was still capturing.
		old.Capture.end(capspec.State{})
		stopped := old
		s.core.emit(st, LinkUpdated, nil, &stopped)
	}
	s.core.emit(st, LinkDeleted, nil, &old)
}
