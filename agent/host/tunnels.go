package host

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/proto"
)

// Tunnel ports reserved for the ends of links across agents.

// reservationTTL is how long a tunnel port waits for the link that
// reserved it: a controller that dies mid-setup leaks nothing for long.
const reservationTTL = 2 * time.Minute

// reservation is a UDP port held for one end of a tunnel, until a link
// takes it over or it expires.
type reservation struct {
	port  *bridge.UDPPort
	timer *time.Timer
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

// checkReservationID checks the id a tunnel port is reserved by.
func checkReservationID(id string) error {
	if id == "" || len(id) > 100 || strings.ContainsAny(id, "/\\") {
		return proto.Errorf(proto.CodeInvalid, "reservation id %q", id)
	}
	return nil
}

// reserveTunnelPort binds a UDP port for a tunnel end and holds it. The
// same id gets the same port. The socket is bound to the agent's tunnel
// address, so what it sends comes from the address its peer expects.
func (p *project) reserveTunnelPort(id string) (proto.TunnelPort, error) {
	err := p.lock()
	if err != nil {
		return proto.TunnelPort{}, err
	}
	r, ok := p.reserved[id]
	p.mu.Unlock()
	if ok {
		return proto.TunnelPort{Port: int(r.port.LocalAddr().Port())}, nil
	}
	// Opening the socket takes no lock.
	port, err := p.ag.relay.listenUDP(bridge.UDPConfig{Local: netip.AddrPortFrom(p.ag.tunnelAddr, 0)})
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		// An advertised address that is not this host's (behind NAT):
		// every address it is.
		port, err = p.ag.relay.listenUDP(bridge.UDPConfig{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0)})
	}
	if err != nil {
		return proto.TunnelPort{}, proto.Errorf(proto.CodeConflict, "reserve a tunnel port: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		port.Close()
		return proto.TunnelPort{}, notOpen(p.id)
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

// releaseTunnelPort frees a reservation no link took; an unknown one is fine.
func (p *project) releaseTunnelPort(id string) error {
	err := p.lock()
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
