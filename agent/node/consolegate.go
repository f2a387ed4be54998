package node

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ConsoleGate decides who may connect to the agent's node consoles (VPCS,
// QEMU's telnet console, a container's console, aux and HTTP consoles):
// while it is closed (SetGated(true)), a console accepts a connection
// only from a client address the controller has granted for that node,
// and closes any other at once, after a line saying why. A grant lasts
// until its expiry (the controller renews it while its user keeps reading
// the node) or until it is revoked; a revocation also closes the
// connections it let in. A connection open when its grant merely expires
// stays open: expiry only stops new ones.
//
// An open gate (the default, and a nil *ConsoleGate) lets everyone in, as
// consoles always did. The agent's own connections to a console (the
// console WebSocket the controller bridges) pass the gate by the source
// port they were bound to (Dial), never by address: any local process
// shares the agent's loopback address.
//
// It is safe for concurrent use.
type ConsoleGate struct {
	now func() time.Time

	mu     sync.Mutex // guards everything below
	gated  bool
	grants map[string]map[netip.Addr]time.Time // node key -> client -> expiry
	conns  map[string]map[*gatedConn]struct{}  // node key -> connections let in by a grant
	self   map[netip.AddrPort]time.Time        // source ports of the agent's own dials, until when
}

// NewConsoleGate returns a gate, closed when gated is true.
func NewConsoleGate(gated bool) *ConsoleGate {
	return &ConsoleGate{now: time.Now, gated: gated,
		grants: map[string]map[netip.Addr]time.Time{}, conns: map[string]map[*gatedConn]struct{}{},
		self: map[netip.AddrPort]time.Time{}}
}

// ConsoleKey names a node for the gate.
func ConsoleKey(projectID, nodeID string) string {
	return strings.ToLower(projectID) + "/" + strings.ToLower(nodeID)
}

// SetGated closes (true) or opens the gate. Opening it keeps the grants,
// for when it is closed again.
func (g *ConsoleGate) SetGated(gated bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gated = gated
}

// Gated reports whether the gate is closed.
func (g *ConsoleGate) Gated() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gated
}

// Grant lets addr connect to the node's consoles for ttl from now (a
// renewal pushes the expiry out).
func (g *ConsoleGate) Grant(key string, addr netip.Addr, ttl time.Duration) {
	addr = addr.Unmap()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	m := g.grants[key]
	if m == nil {
		m = map[netip.Addr]time.Time{}
		g.grants[key] = m
	}
	m[addr] = now.Add(ttl)
	// Forget what expired, so the table stays as small as what is live.
	for k, m := range g.grants {
		for a, exp := range m {
			if !now.Before(exp) {
				delete(m, a)
			}
		}
		if len(m) == 0 {
			delete(g.grants, k)
		}
	}
}

// Revoke withdraws addr's grant on the node and closes the connections
// from addr the grant let in.
func (g *ConsoleGate) Revoke(key string, addr netip.Addr) {
	addr = addr.Unmap()
	g.mu.Lock()
	if m := g.grants[key]; m != nil {
		delete(m, addr)
		if len(m) == 0 {
			delete(g.grants, key)
		}
	}
	var cut []*gatedConn
	for c := range g.conns[key] {
		if c.from == addr {
			cut = append(cut, c)
		}
	}
	g.mu.Unlock()
	for _, c := range cut {
		c.Close()
	}
}

// admit reports whether a connection from remote may reach the node's
// console, and registers it when a grant lets it in.
func (g *ConsoleGate) admit(key string, remote netip.AddrPort, c *gatedConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until, ok := g.self[remote]; ok {
		delete(g.self, remote)
		if g.now().Before(until) {
			return true
		}
	}
	if !g.gated {
		return true
	}
	exp, ok := g.grants[key][remote.Addr().Unmap()]
	if !ok || !g.now().Before(exp) {
		return false
	}
	if g.conns[key] == nil {
		g.conns[key] = map[*gatedConn]struct{}{}
	}
	g.conns[key][c] = struct{}{}
	return true
}

func (g *ConsoleGate) forget(key string, c *gatedConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.conns[key]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(g.conns, key)
		}
	}
}

// Listener wraps a node console's listener so that its Accept returns only
// the connections the gate lets in. A nil gate returns ln.
func (g *ConsoleGate) Listener(ln net.Listener, key string) net.Listener {
	if g == nil {
		return ln
	}
	return &gatedListener{Listener: ln, gate: g, key: key}
}

// Wrap returns Listener bound to a node, the form node configurations
// take (ConsoleGate fields); a nil gate returns nil.
func (g *ConsoleGate) Wrap(key string) func(net.Listener) net.Listener {
	if g == nil {
		return nil
	}
	return func(ln net.Listener) net.Listener { return g.Listener(ln, key) }
}

// selfGrace is how long the source port of the agent's own dial stays
// let through, should the console not accept it at once.
const selfGrace = 10 * time.Second

// refusalGrace bounds the write of the line a refused client gets.
const refusalGrace = time.Second

type gatedListener struct {
	net.Listener
	gate *ConsoleGate
	key  string
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		remote := netip.AddrPort{}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			remote = a.AddrPort()
		}
		gc := &gatedConn{Conn: c, from: remote.Addr().Unmap(), gate: l.gate, key: l.key}
		if l.gate.admit(l.key, remote, gc) {
			return gc, nil
		}
		go refuse(c, remote.Addr().Unmap())
	}
}

// refuse tells a client why its connection ends, then closes it.
func refuse(c net.Conn, from netip.Addr) {
	c.SetWriteDeadline(time.Now().Add(refusalGrace))
	c.Write([]byte("labtap: this console is not open to " + from.String() +
		": open the project or the node through the server first, as a user allowed Node.Console on the project\r\n"))
	c.Close()
}

type gatedConn struct {
	net.Conn
	from netip.Addr
	gate *ConsoleGate
	key  string
	once sync.Once
}

func (c *gatedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.gate.forget(c.key, c) })
	return err
}

// Dial connects to a console at addr (host:port) as the agent itself: the
// socket is bound to its source port before it connects, and that port is
// let through once, whoever else shares the address.
func (g *ConsoleGate) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var bound netip.AddrPort
	d := net.Dialer{Timeout: 5 * time.Second}
	if g != nil {
		d.Control = func(network, address string, rc syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			var serr error
			err = rc.Control(func(fd uintptr) {
				var sa syscall.Sockaddr
				if ap.Addr().Is4() {
					sa = &syscall.SockaddrInet4{Addr: ap.Addr().As4()}
				} else {
					sa = &syscall.SockaddrInet6{Addr: ap.Addr().As16()}
				}
				if serr = syscall.Bind(int(fd), sa); serr != nil {
					return
				}
				var got syscall.Sockaddr
				if got, serr = syscall.Getsockname(int(fd)); serr != nil {
					return
				}
				switch s := got.(type) {
				case *syscall.SockaddrInet4:
					bound = netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
				case *syscall.SockaddrInet6:
					bound = netip.AddrPortFrom(netip.AddrFrom16(s.Addr).Unmap(), uint16(s.Port))
				}
			})
			if err != nil {
				return err
			}
			if serr != nil {
				return serr
			}
			g.mu.Lock()
			g.self[bound] = g.now().Add(selfGrace)
			g.mu.Unlock()
			return nil
		}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if g != nil && bound.IsValid() {
		// Accepted or not, the port is not the agent's any more once the
		// dial is over; an entry left (a refused connect) must not let a
		// later socket in.
		defer func() {
			if err != nil {
				g.mu.Lock()
				delete(g.self, bound)
				g.mu.Unlock()
			}
		}()
	}
	return c, err
}
