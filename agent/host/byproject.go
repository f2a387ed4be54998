package host

import (
	"context"
	"net"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/proto"
)

// The calls the API makes on one project's nodes, links and tunnel ports:
// each finds the open project by its id (waiting until it is ready) and
// hands the call to the project, which owns the state and its lock, or to
// the node, for a call on one node alone.

// CreateNode creates a node; creating an existing node returns it
// unchanged, but for a switch whose port types or VLANs changed, which are
// applied in place.
func (h *Host) CreateNode(ctx context.Context, projectID string, spec proto.NodeSpec) (proto.NodeState, error) {
	factory, err := h.shared.checkNode(spec) // bad input is refused whatever the project
	if err != nil {
		return proto.NodeState{}, err
	}
	p, err := h.projects.project(projectID)
	if err != nil {
		return proto.NodeState{}, err
	}
	return p.createNode(ctx, spec, factory)
}

// Node returns a node's state.
func (h *Host) Node(projectID, nodeID string) (proto.NodeState, error) {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return proto.NodeState{}, err
	}
	return h.shared.nodeState(n), nil
}

// SetNodeStatus starts or stops a node and returns its new state. Asking
// for the status a node already has succeeds and changes nothing.
func (h *Host) SetNodeStatus(ctx context.Context, projectID, nodeID, status string) (proto.NodeState, error) {
	p, err := h.projects.project(projectID)
	if err != nil {
		return proto.NodeState{}, err
	}
	return p.setNodeStatus(ctx, nodeID, status)
}

// DeleteNode stops a node, removes the links on its ports and forgets it.
// Its directory stays. Deleting an unknown node does nothing.
func (h *Host) DeleteNode(ctx context.Context, projectID, nodeID string) error {
	p, err := h.projects.project(projectID)
	if err != nil {
		return err
	}
	return p.deleteNode(ctx, nodeID)
}

// NodeFile reads a regular file of a node's directory (confined to it).
func (h *Host) NodeFile(projectID, nodeID, name string) ([]byte, error) {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return nil, err
	}
	return n.readFile(name)
}

// WriteNodeFile replaces a file of a node's directory (confined to it).
func (h *Host) WriteNodeFile(projectID, nodeID, name string, data []byte) error {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return err
	}
	return n.writeFile(name, data)
}

// CopyNodeDir copies a node's directory into another node's (a duplicate).
func (h *Host) CopyNodeDir(projectID, fromID, toID string) error {
	p, err := h.projects.project(projectID)
	if err != nil {
		return err
	}
	return p.copyNodeDir(fromID, toID)
}

// ResizeDisk grows a disk of a stopped QEMU node (GNS3's resize_disk).
func (h *Host) ResizeDisk(ctx context.Context, projectID, nodeID string, r proto.ResizeDisk) error {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return err
	}
	return n.resizeDisk(ctx, r)
}

// ResetConsole disconnects every client of a node's console; a node
// without one is left as it is.
func (h *Host) ResetConsole(projectID, nodeID string) error {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return err
	}
	return n.resetConsole()
}

// DialConsole connects to a started node's telnet console, as a client of
// it would.
func (h *Host) DialConsole(ctx context.Context, projectID, nodeID string) (net.Conn, error) {
	n, err := h.projects.node(projectID, nodeID)
	if err != nil {
		return nil, err
	}
	return n.dialConsole(ctx, h.cfg.ConsoleBind, h.Consoles)
}

// PutLink creates a link's relay, or updates the filters and suspend state
// of an existing one.
func (h *Host) PutLink(projectID string, spec proto.LinkSpec) error {
	if err := checkID("link", spec.LinkID); err != nil {
		return err
	}
	p, err := h.projects.project(projectID)
	if err != nil {
		// A bad filter or tunnel host is refused first, as a link PUT
		// on an open project would.
		if spec.DataLinkType == "" {
			spec.DataLinkType = capspec.DefaultDataLinkType
		}
		if _, _, _, bad := h.shared.prepareLink(spec, compiledBPF{}, false); bad != nil {
			return bad
		}
		return err
	}
	return p.putLink(spec)
}

// Link returns a link's state.
func (h *Host) Link(projectID, linkID string) (proto.LinkState, error) {
	p, err := h.projects.project(projectID)
	if err != nil {
		return proto.LinkState{}, err
	}
	return p.link(linkID)
}

// DeleteLink removes a link's relay; an unknown link is fine.
func (h *Host) DeleteLink(projectID, linkID string) error {
	p, err := h.projects.project(projectID)
	if err != nil {
		return err
	}
	return p.deleteLink(linkID)
}

// ReserveTunnelPort binds a UDP port for a tunnel end and holds it.
func (h *Host) ReserveTunnelPort(projectID, id string) (proto.TunnelPort, error) {
	if err := checkReservationID(id); err != nil {
		return proto.TunnelPort{}, err
	}
	p, err := h.projects.project(projectID)
	if err != nil {
		return proto.TunnelPort{}, err
	}
	return p.reserveTunnelPort(id)
}

// ReleaseTunnelPort frees a reservation no link took; an unknown one is fine.
func (h *Host) ReleaseTunnelPort(projectID, id string) error {
	p, err := h.projects.project(projectID)
	if err != nil {
		return err
	}
	return p.releaseTunnelPort(id)
}
