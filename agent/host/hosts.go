package host

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/proto"
)

// What an agent needs to take part in a lab that spans hosts: tunnel ports
// reserved for links across agents, events the controller follows, a
// listing of what runs for a controller that restarted, and captures made
// whole again after the agent itself died.

// reservationTTL is how long a tunnel port waits for the link that
// reserved it: a controller that dies mid-setup leaks nothing for long.
const reservationTTL = 2 * time.Minute

// reservation is a UDP port held for one end of a tunnel, until a link
// takes it over or it expires.
type reservation struct {
	port  *bridge.UDPPort
	timer *time.Timer
}

// ReserveTunnelPort binds a UDP port for a tunnel end and holds it. The
// same id gets the same port. The socket is bound to the agent's tunnel
// address, so what it sends comes from the address its peer expects.
func (h *Host) ReserveTunnelPort(projectID, id string) (proto.TunnelPort, error) {
	if id == "" || len(id) > 100 || strings.ContainsAny(id, "/\\") {
		return proto.TunnelPort{}, proto.Errorf(proto.CodeInvalid, "reservation id %q", id)
	}
	p, err := h.projects.lockProject(projectID)
	if err != nil {
		return proto.TunnelPort{}, err
	}
	r, ok := p.reserved[id]
	p.mu.Unlock()
	if ok {
		return proto.TunnelPort{Port: int(r.port.LocalAddr().Port())}, nil
	}
	// Opening the socket takes no lock.
	port, err := h.relay.listenUDP(bridge.UDPConfig{Local: netip.AddrPortFrom(h.tunnelAddr, 0)})
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		// An advertised address that is not this host's (behind NAT):
		// every address it is.
		port, err = h.relay.listenUDP(bridge.UDPConfig{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0)})
	}
	if err != nil {
		return proto.TunnelPort{}, proto.Errorf(proto.CodeConflict, "reserve a tunnel port: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		port.Close()
		return proto.TunnelPort{}, notOpen(projectID)
	}
	if r, ok := p.reserved[id]; ok { // reserved meanwhile
		port.Close()
		return proto.TunnelPort{Port: int(r.port.LocalAddr().Port())}, nil
	}
	r = &reservation{port: port}
	r.timer = time.AfterFunc(reservationTTL, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.reserved[id] == r {
			delete(p.reserved, id)
			r.port.Close()
		}
	})
	p.reserved[id] = r
	return proto.TunnelPort{Port: int(port.LocalAddr().Port())}, nil
}

// ReleaseTunnelPort frees a reservation no link took; an unknown one is fine.
func (h *Host) ReleaseTunnelPort(projectID, id string) error {
	p, err := h.projects.lockProject(projectID)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if r, ok := p.reserved[id]; ok {
		delete(p.reserved, id)
		r.timer.Stop()
		r.port.Close()
	}
	return nil
}

// takeReservationLocked hands over the reserved socket bound to local
// port, now facing peer, or nil when no reservation holds that port. p.mu
// must be held.
func (p *project) takeReservationLocked(local int, peer netip.AddrPort) *bridge.UDPPort {
	for id, r := range p.reserved {
		if int(r.port.LocalAddr().Port()) == local {
			delete(p.reserved, id)
			r.timer.Stop()
			r.port.SetPeer(peer)
			return r.port
		}
	}
	return nil
}

// releaseAllLocked closes every reservation of a project. p.mu must be held.
func (p *project) releaseAllLocked() {
	for id, r := range p.reserved {
		delete(p.reserved, id)
		r.timer.Stop()
		r.port.Close()
	}
}

// Events fans the agent's events out to the controllers that follow them.
// Publishing never blocks: a follower that falls behind is dropped (its
// stream ends; it reconnects and reconciles).
type Events struct {
	mu     sync.Mutex
	subs   map[chan proto.Event]struct{}
	closed bool // the agent ended: new followers get a closed stream
}

// Subscribe follows the agent's events until cancel is called. The channel
// is closed when the follower is dropped or cancels.
func (e *Events) Subscribe() (<-chan proto.Event, func()) {
	ch := make(chan proto.Event, 256)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	if e.subs == nil {
		e.subs = make(map[chan proto.Event]struct{})
	}
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if _, ok := e.subs[ch]; ok {
				delete(e.subs, ch)
				close(ch)
			}
		})
	}
}

// closeAll ends every follower's stream: the agent is ending.
func (e *Events) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		delete(e.subs, ch)
		close(ch)
	}
	e.closed = true
}

// publish gives ev to every follower; it never blocks.
func (e *Events) publish(ev proto.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
			delete(e.subs, ch)
			close(ch)
		}
	}
}

// nodeStopped reports a node's status after it stopped, asked to or not:
// the controller ignores a report that changes nothing, and learns of an
// emulator that died.
func (h *Host) nodeStopped(n *hostNode) {
	if n.runner == nil {
		return // failed while being built: nobody knows of it
	}
	st := h.nodeState(n)
	h.Events.publish(proto.Event{Kind: proto.EventNodeStatus, ProjectID: n.projectID, NodeID: n.spec.NodeID, Node: &st})
}

// State lists what the agent runs: every open project, its nodes, its
// links with their specs, and the captures running on them.
func (h *Host) State() proto.AgentState {
	out := proto.AgentState{Projects: []proto.ProjectState{}}
	for _, p := range h.projects.openProjects() {
		select {
		case <-p.opened:
		default:
			continue // still opening: nothing runs in it yet
		}
		ps := proto.ProjectState{ProjectID: p.id, Nodes: []proto.NodeState{}, Links: []proto.LinkStatus{}}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			continue
		}
		for _, n := range p.nodes {
			ps.Nodes = append(ps.Nodes, h.nodeState(n))
		}
		p.caps.mu.Lock()
		for _, l := range p.links {
			ls := proto.LinkStatus{LinkID: l.spec.LinkID, Spec: l.spec}
			if c := p.caps.byLink[l.spec.LinkID]; c != nil && !c.done && c.tap != nil {
				st := stateOf(c, true)
				ls.Capture = &st
			}
			ps.Links = append(ps.Links, ls)
		}
		p.caps.mu.Unlock()
		p.mu.Unlock()
		out.Projects = append(out.Projects, ps)
	}
	return out
}

// Capture files are marked while they are written: "<name>.writing" holds
// nothing and is removed when the capture ends cleanly. A marker found when
// a project opens means the agent died while writing: the file is cut back
// to its last whole record, so every reader sees a valid capture.
const writingSuffix = ".writing"

// markWriting marks a capture file as being written, durably (dir is
// root's folder, opened, for its sync): the capture writes no record
// before it returns (captures.RingHooks.Created). A mark that cannot be
// made is skipped, as before: a crash may then leave the file's last
// record torn, unrepaired.
func (o *Captures) markWriting(root *os.Root, dir *os.File, name string) {
	if o.hooks.marking != nil {
		o.hooks.marking(name)
	}
	f, err := root.Create(name + writingSuffix)
	if err != nil {
		return
	}
	f.Close()
	_ = dir.Sync()
}

// unmarkWriting removes the mark of a capture that ended cleanly.
func unmarkWriting(root *os.Root, name string) {
	_ = root.Remove(name + writingSuffix)
}

// repairCaptures repairs the captures a dead agent left marked in the
// captures folder of a project being opened. It holds only the project's
// nameMu, which nothing else waits for until the project is opened.
func (o *Captures) repairCaptures(p *project) {
	p.caps.nameMu.Lock()
	defer p.caps.nameMu.Unlock()
	root, err := p.caps.rootLocked()
	if err != nil {
		o.log.Error("captures not repaired: their folder cannot be opened or made durable", "err", err)
		return
	}
	entries, err := os.ReadDir(root.Name())
	if err != nil {
		o.log.Error("captures not repaired: their folder cannot be read", "err", err)
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), writingSuffix)
		if !ok || !capspec.ValidFileName(name) {
			continue
		}
		if o.hooks.repairing != nil {
			o.hooks.repairing()
		}
		cut, err := captures.Repair(root, name)
		if err != nil {
			o.log.Warn("repair a capture left by a crash", "project", p.id, "file", name, "err", err)
			continue
		}
		unmarkWriting(root, name)
		o.log.Info("capture left by a crash repaired", "project", p.id, "file", name, "bytes_cut", cut)
	}
}
