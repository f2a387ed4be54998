// Package bridge moves frames between the ends of a link: UDP sockets facing
// emulators or peer agents, one frame per datagram, relayed by a [Link] that
// applies the link's state (suspend, filters) and hands each forwarded frame
// to a capture [Tap].
//
// The package knows nothing of HTTP, projects or capture files: a Tap is any
// value with a WritePacket method.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
)

// Handler receives the frames a port reads. HandleFrame is called from the
// port's receive goroutine, one frame at a time; it must not keep frame after
// it returns (copy it to queue it).
type Handler interface {
	HandleFrame(frame []byte)
}

// Port is one end of a link: it sends frames out and delivers the frames it
// receives to its handler.
type Port interface {
	// Send transmits one frame. It does not keep frame.
	Send(frame []byte) error
	// SetHandler sets who receives this port's frames; nil drops them.
	SetHandler(h Handler)
}

// UDPConfig configures a UDPPort.
type UDPConfig struct {
	// Local is the address to bind; port 0 picks a free port.
	Local netip.AddrPort
	// Peer is where frames are sent, and the only source frames are accepted
	// from. It may be left unset and given later with SetPeer.
	Peer netip.AddrPort
	// Connect binds the socket to Peer in the kernel (connect(2)), as peers
	// such as uBridge and dynamips expect; it needs Peer set. Unconnected
	// ports filter sources themselves and can change peer.
	Connect bool
	// BufferBytes sizes the socket's receive and send buffers; the kernel
	// caps it at net.core.rmem_max/wmem_max. Zero means 4 MiB.
	BufferBytes int
}

// UDPPort is a UDP socket that carries one frame per datagram. Run its
// receive loop with Serve; stop it with Close. Its methods are safe for
// concurrent use.
type UDPPort struct {
	conn      *net.UDPConn
	local     netip.AddrPort
	connected bool
	peer      atomic.Pointer[netip.AddrPort] // nil: no peer yet
	handler   atomic.Pointer[handlerBox]     // nil: frames are dropped

	rxFrames, rxBytes  atomic.Uint64
	txFrames, txBytes  atomic.Uint64
	unrouted, strays   atomic.Uint64 // dropped: no handler; wrong source
	rxErrors, txErrors atomic.Uint64
}

type handlerBox struct{ h Handler }

// ListenUDP opens a UDP port.
func ListenUDP(cfg UDPConfig) (*UDPPort, error) {
	if cfg.Connect && !cfg.Peer.IsValid() {
		return nil, errors.New("bridge: a connected port needs a peer")
	}
	laddr := net.UDPAddrFromAddrPort(cfg.Local)
	var (
		conn *net.UDPConn
		err  error
	)
	if cfg.Connect {
		conn, err = net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(cfg.Peer))
	} else {
		conn, err = net.ListenUDP("udp", laddr)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: open udp %v: %w", cfg.Local, err)
	}
	size := cfg.BufferBytes
	if size <= 0 {
		size = 4 << 20
	}
	// Small default buffers (208 KiB) overflow within a few ms of a burst;
	// the kernel silently caps these at its maximum, which is fine.
	_ = conn.SetReadBuffer(size)
	_ = conn.SetWriteBuffer(size)
	p := &UDPPort{
		conn:      conn,
		local:     conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		connected: cfg.Connect,
	}
	if cfg.Peer.IsValid() {
		p.SetPeer(cfg.Peer)
	}
	return p, nil
}

// LocalAddr returns the address the port is bound to.
func (p *UDPPort) LocalAddr() netip.AddrPort { return p.local }

// SetPeer changes where an unconnected port sends frames and whom it
// accepts them from. An invalid address means no peer: frames are dropped
// both ways. A connected port keeps its peer and ignores the call.
func (p *UDPPort) SetPeer(peer netip.AddrPort) {
	if p.connected {
		return
	}
	if !peer.IsValid() {
		p.peer.Store(nil)
		return
	}
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	p.peer.Store(&peer)
}

// SetHandler sets who receives this port's frames; nil drops them.
func (p *UDPPort) SetHandler(h Handler) {
	if h == nil {
		p.handler.Store(nil)
		return
	}
	p.handler.Store(&handlerBox{h})
}

// Send transmits one frame to the peer. It does not keep frame. Sending with
// no peer, or to a peer that is not listening yet, drops the frame and
// counts it: that is normal while a link's ends come up one after the other.
func (p *UDPPort) Send(frame []byte) error {
	var err error
	if p.connected {
		_, err = p.conn.Write(frame)
	} else if peer := p.peer.Load(); peer != nil {
		_, err = p.conn.WriteToUDPAddrPort(frame, *peer)
	} else {
		p.unrouted.Add(1)
		return nil
	}
	if err != nil {
		p.txErrors.Add(1)
		if transient(err) {
			return nil
		}
		return fmt.Errorf("bridge: send on %v: %w", p.local, err)
	}
	p.txFrames.Add(1)
	p.txBytes.Add(uint64(len(frame)))
	return nil
}

// Serve reads frames and hands them to the handler until the port is closed
// or ctx is done, then returns nil. It returns an error only if the socket
// fails for good.
func (p *UDPPort) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.conn.Close() }) // unblocks the read
	defer stop()
	buf := make([]byte, 64<<10) // room for any datagram: a short buffer silently truncates
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			p.rxErrors.Add(1)
			if transient(err) {
				continue
			}
			return fmt.Errorf("bridge: receive on %v: %w", p.local, err)
		}
		if n == 0 {
			continue
		}
		if !p.connected {
			peer := p.peer.Load()
			if peer == nil || from.Port() != peer.Port() || from.Addr().Unmap() != peer.Addr() {
				p.strays.Add(1)
				continue
			}
		}
		p.rxFrames.Add(1)
		p.rxBytes.Add(uint64(n))
		if hb := p.handler.Load(); hb != nil {
			hb.h.HandleFrame(buf[:n])
		} else {
			p.unrouted.Add(1)
		}
	}
}

// Close closes the socket, which ends Serve. It is safe to call twice.
func (p *UDPPort) Close() error {
	err := p.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// PortStats counts what went through a UDPPort.
type PortStats struct {
	RxFrames, RxBytes, TxFrames, TxBytes uint64
	// Unrouted frames had nowhere to go (no handler, or no peer to send to);
	// Strays came from an address other than the peer.
	Unrouted, Strays   uint64
	RxErrors, TxErrors uint64
}

// Stats returns the port's counters.
func (p *UDPPort) Stats() PortStats {
	return PortStats{
		RxFrames: p.rxFrames.Load(), RxBytes: p.rxBytes.Load(),
		TxFrames: p.txFrames.Load(), TxBytes: p.txBytes.Load(),
		Unrouted: p.unrouted.Load(), Strays: p.strays.Load(),
		RxErrors: p.rxErrors.Load(), TxErrors: p.txErrors.Load(),
	}
}

// transient reports errors a relay skips: the ICMP-driven errors a UDP
// socket reports while its peer is not there yet or the network blinks.
func transient(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETDOWN) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN)
}
