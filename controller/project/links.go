package project

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/uuid"
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

// Links returns a project's links in creation order. For a closed project
// they are the links its file holds.
func (s *Service) Links(projectID string) ([]Link, error) {
	st, err := s.lookup(projectID)
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

// Link returns one link.
func (s *Service) Link(projectID, linkID string) (Link, error) {
	st, err := s.opened(projectID)
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

// CreateLink checks a link (api-v2.md 4.2, in that order), wires it on its
// compute when it has two endpoints, saves the project and returns it.
// Nothing changes when a check or the wiring fails.
func (s *Service) CreateLink(ctx context.Context, projectID string, req LinkCreate) (Link, error) {
	if len(req.Endpoints) > 2 {
		return Link{}, errorf(ErrInvalid, "A link has at most 2 endpoints, got %d", len(req.Endpoints))
	}
	st, err := s.opened(projectID)
	if err != nil {
		return Link{}, err
	}
	st.ops.Lock()
	defer st.ops.Unlock()
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
	st.mu.Lock()
	st.links[l.ID] = l
	st.linkOrder = append(st.linkOrder, l.ID)
	st.mu.Unlock()
	if err := s.save(st); err != nil {
		st.mu.Lock()
		delete(st.links, l.ID)
		st.linkOrder = st.linkOrder[:len(st.linkOrder)-1]
		st.mu.Unlock()
		s.unwire(context.WithoutCancel(ctx), l)
		return Link{}, err
	}
	out := *l
	if l.Wired {
		s.emit(st, LinkCreated, nil, &out)
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
			if isCloudOrNAT(other.Type) && isCloudOrNAT(n.Type) {
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

// wire sets up a two-endpoint link's relay on its compute and marks it
// wired.
func (s *Service) wire(ctx context.Context, l *Link, nodes []*Node) error {
	a, b := nodes[0], nodes[1]
	if a.ComputeID != b.ComputeID {
		return errorf(ErrConflict, "Links between nodes on different computes (%s, %s) are not supported yet", a.ComputeID, b.ComputeID)
	}
	if err := s.cfg.Computes.PutLink(ctx, a.ComputeID, l.ProjectID, wiringOf(l, nodes)); err != nil {
		return err
	}
	l.Wired = true
	l.Computes = []string{a.ComputeID}
	return nil
}

// wiringOf describes a link's relay for its compute.
func wiringOf(l *Link, nodes []*Node) Wiring {
	return Wiring{
		LinkID:       l.ID,
		A:            wireEnd(nodes[0], l.Endpoints[0]),
		B:            wireEnd(nodes[1], l.Endpoints[1]),
		Filters:      activeFilters(l.Filters),
		Suspend:      l.Suspend,
		DataLinkType: dataLinkTypeOf(l.LinkType),
	}
}

// dataLinkTypeOf is the data link type BPF filters of a link compile for.
func dataLinkTypeOf(linkType string) string {
	if linkType == Serial {
		return "DLT_C_HDLC"
	}
	return DefaultDataLinkType
}

func wireEnd(n *Node, ep Endpoint) WireEnd {
	name := n.Name
	if p, ok := n.port(ep.Adapter, ep.Port); ok {
		name += " " + p.Name
	}
	return WireEnd{NodeID: n.ID, Adapter: ep.Adapter, Port: ep.Port, Name: name}
}

// unwire removes a link's relays; a compute that does not know the link is
// fine. It returns the first other error.
func (s *Service) unwire(ctx context.Context, l *Link) error {
	var first error
	for _, c := range l.Computes {
		if err := s.cfg.Computes.DeleteLink(ctx, c, l.ProjectID, l.ID); err != nil && !isNotFound(err) && first == nil {
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

// UpdateLink applies a change to a link in GNS3's order (filters, style,
// suspend, labels), announcing each effective step. Everything is checked,
// and the relay updated, before anything changes: a refused update changes
// nothing (GNS3 applies the first steps, then fails).
func (s *Service) UpdateLink(ctx context.Context, projectID, linkID string, u LinkUpdate) (Link, error) {
	st, err := s.opened(projectID)
	if err != nil {
		return Link{}, err
	}
	st.ops.Lock()
	defer st.ops.Unlock()
	st.mu.RLock()
	cur, err := st.linkLocked(linkID)
	var next Link
	var nodes []*Node
	if err == nil {
		next = *cur
		for _, e := range cur.Endpoints {
			nodes = append(nodes, st.nodes[e.NodeID])
		}
		for _, lb := range u.Labels {
			if _, ok := st.nodes[lb.NodeID]; !ok {
				err = nodeNotFound(lb.NodeID)
				break
			}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return Link{}, err
	}
	var steps []bool // which of filters, style, suspend, labels changed
	if u.Filters != nil {
		f, err := normalizeFilters(u.Filters)
		if err != nil {
			return Link{}, err
		}
		steps = append(steps, !reflect.DeepEqual(f, cur.Filters))
		next.Filters = f
	} else {
		steps = append(steps, false)
	}
	if u.Style != nil && !bytes.Equal(u.Style, cur.Style) {
		next.Style = u.Style
		steps = append(steps, true)
	} else {
		steps = append(steps, false)
	}
	if u.Suspend != nil && *u.Suspend != cur.Suspend {
		next.Suspend = *u.Suspend
		steps = append(steps, true)
	} else {
		steps = append(steps, false)
	}
	if u.Labels != nil {
		eps := slices.Clone(cur.Endpoints)
		for _, lb := range u.Labels {
			for i := range eps {
				if eps[i].NodeID == lb.NodeID && len(lb.Label) > 0 {
					eps[i].Label = lb.Label
				}
			}
		}
		next.Endpoints = eps
	}
	steps = append(steps, u.Labels != nil) // GNS3 announces labels even when unchanged
	relayChanged := steps[0] || steps[2]
	if relayChanged && cur.Wired {
		for _, c := range cur.Computes {
			if err := s.cfg.Computes.PutLink(ctx, c, projectID, wiringOf(&next, nodes)); err != nil {
				return Link{}, err
			}
		}
	}
	if !slices.Contains(steps, true) {
		return *cur, nil
	}
	st.mu.Lock()
	*cur = next
	st.mu.Unlock()
	if err := s.save(st); err != nil {
		s.log.Error("save project", "project", projectID, "err", err)
	}
	for _, changed := range steps {
		if changed {
			out := next
			s.emit(st, LinkUpdated, nil, &out)
		}
	}
	return next, nil
}

// AvailableFilters lists the filters a link can apply: the whole catalogue,
// whatever its nodes (GNS3 offers none on links between switches and hubs;
// our relay filters every link).
func (s *Service) AvailableFilters(projectID, linkID string) ([]FilterType, error) {
	if _, err := s.Link(projectID, linkID); err != nil {
		return nil, err
	}
	return Filters, nil
}

// NodeLinks returns the wired links touching a node.
func (s *Service) NodeLinks(projectID, nodeID string) ([]Link, error) {
	st, err := s.opened(projectID)
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

// DeleteLink removes a link: its relays (which ends a capture, leaving a
// valid file) and its entry.
func (s *Service) DeleteLink(ctx context.Context, projectID, linkID string) error {
	st, err := s.opened(projectID)
	if err != nil {
		return err
	}
	st.ops.Lock()
	defer st.ops.Unlock()
	return s.deleteLinkLocked(ctx, st, linkID)
}

// deleteLinkLocked removes a link. st.ops must be held.
func (s *Service) deleteLinkLocked(ctx context.Context, st *state, linkID string) error {
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	var old Link
	if err == nil {
		old = *l
	}
	st.mu.RUnlock()
	if err != nil {
		return err
	}
	if err := s.unwire(ctx, &old); err != nil {
		return err
	}
	st.mu.Lock()
	delete(st.links, linkID)
	st.linkOrder = slices.DeleteFunc(st.linkOrder, func(x string) bool { return x == linkID })
	st.mu.Unlock()
	if err := s.save(st); err != nil {
		s.log.Error("save project", "project", st.p.ID, "err", err)
	}
	if old.Capture.Active {
		// Its capture ended with the link: say so first, so a client never
		// believes a deleted link was still capturing.
		old.Capture.Active, old.Capture.ComputeID = false, ""
		stopped := old
		s.emit(st, LinkUpdated, nil, &stopped)
	}
	s.emit(st, LinkDeleted, nil, &old)
	return nil
}
