package host

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/labtap/labtap/proto"
)

// DialConsole connects to a started node's telnet console, as a client of
// it would (the web UI's console goes through here: the controller bridges
// its WebSocket to this connection, for a remote agent too).
func (h *Host) DialConsole(ctx context.Context, projectID, nodeID string) (net.Conn, error) {
	n, err := h.node(projectID, nodeID)
	if err != nil {
		return nil, err
	}
	if st := n.runner.Status(); st != proto.StatusStarted {
		return nil, proto.Errorf(proto.CodeConflict, "Node %s is not started", n.spec.Name)
	}
	port, kind := n.runner.Console()
	if kind != "telnet" || port <= 0 {
		return nil, proto.Errorf(proto.CodeConflict, "Node %s has no telnet console", n.spec.Name)
	}
	addr := h.cfg.ConsoleBind
	if ip := net.ParseIP(addr); ip == nil || ip.IsUnspecified() {
		addr = "127.0.0.1"
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "Cannot connect to the console of node %s: %v", n.spec.Name, err)
	}
	return c, nil
}
