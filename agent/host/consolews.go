package host

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// SetConsoleAccess applies the controller's word on who may connect to
// node consoles: the gate closed or open, grants and revocations. It
// checks the whole body before applying any of it.
func (h *Host) SetConsoleAccess(a proto.ConsoleAccess) error {
	if a.Gated == nil {
		return proto.Errorf(proto.CodeInvalid, "gated is required")
	}
	if len(a.Grants)+len(a.Revoke) > proto.MaxConsoleGrants {
		return proto.Errorf(proto.CodeInvalid, "at most %d console grants and revocations in one call", proto.MaxConsoleGrants)
	}
	type entry struct {
		key  string
		addr netip.Addr
		ttl  time.Duration
	}
	check := func(list []proto.ConsoleGrant, grant bool) ([]entry, error) {
		out := make([]entry, 0, len(list))
		for _, g := range list {
			if err := checkID("project", g.ProjectID); err != nil {
				return nil, err
			}
			if err := checkID("node", g.NodeID); err != nil {
				return nil, err
			}
			addr, err := netip.ParseAddr(g.Address)
			if err != nil || addr.Zone() != "" {
				return nil, proto.Errorf(proto.CodeInvalid, "console grant: address %.64q is not an IP address", g.Address)
			}
			e := entry{key: node.ConsoleKey(g.ProjectID, g.NodeID), addr: addr.Unmap()}
			if grant {
				if g.TTLSeconds < 1 || g.TTLSeconds > proto.MaxConsoleGrantTTL {
					return nil, proto.Errorf(proto.CodeInvalid, "console grant: ttl_s must be 1 to %d", proto.MaxConsoleGrantTTL)
				}
				e.ttl = time.Duration(g.TTLSeconds) * time.Second
			}
			out = append(out, e)
		}
		return out, nil
	}
	grants, err := check(a.Grants, true)
	if err != nil {
		return err
	}
	revoke, err := check(a.Revoke, false)
	if err != nil {
		return err
	}
	h.Consoles.SetGated(*a.Gated)
	for _, e := range revoke {
		h.Consoles.Revoke(e.key, e.addr)
	}
	for _, e := range grants {
		h.Consoles.Grant(e.key, e.addr, e.ttl)
	}
	return nil
}

// dialConsole connects to a started node's telnet console, as a client of
// it would (the web UI's console goes through here: the controller bridges
// its WebSocket to this connection, for a remote agent too).
func (n *hostNode) dialConsole(ctx context.Context, bind string, gate *node.ConsoleGate) (net.Conn, error) {
	if st := n.runner.Status(); st != proto.StatusStarted {
		return nil, proto.Errorf(proto.CodeConflict, "Node %s is not started", n.spec.Name)
	}
	port, kind := n.runner.Console()
	if kind != "telnet" || port <= 0 {
		return nil, proto.Errorf(proto.CodeConflict, "Node %s has no telnet console", n.spec.Name)
	}
	addr := bind
	if ip := net.ParseIP(addr); ip == nil || ip.IsUnspecified() {
		addr = "127.0.0.1"
	}
	// Through the gate as the agent itself: the caller has been let in
	// already (the controller checks who may open the console WebSocket).
	c, err := gate.Dial(ctx, net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "Cannot connect to the console of node %s: %v", n.spec.Name, err)
	}
	return c, nil
}
