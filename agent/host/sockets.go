package host

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/proto"
)

// sockets opens the relay's UDP sockets (node ports, tunnel ends, cloud
// ports) with the configured buffers, and runs their receive loops until
// each is closed or the host ends. It holds no lock: wg and the once are
// safe for concurrent use.
type sockets struct {
	ctx            context.Context // the host's lifetime: receive loops end with it
	wg             sync.WaitGroup  // the receive loops
	bufferBytes    int             // Config.SocketBuffer
	noGRO          bool            // Config.NoUDPGRO
	warnBufferOnce sync.Once       // the kernel granted smaller socket buffers than asked
	log            *slog.Logger
}

// goServe runs a port's receive loop until the port is closed or the host
// ends.
func (s *sockets) goServe(p *bridge.UDPPort) {
	s.wg.Go(func() {
		if err := p.Serve(s.ctx); err != nil {
			s.log.Error("relay port failed", "port", p.LocalAddr(), "err", err)
		}
	})
}

// listenUDP opens a relay socket with the configured buffer size, and
// warns once when the kernel grants less than asked.
func (s *sockets) listenUDP(cfg bridge.UDPConfig) (*bridge.UDPPort, error) {
	cfg.BufferBytes = s.bufferBytes
	cfg.NoGRO = s.noGRO
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = bridge.DefaultBufferBytes
	}
	p, err := bridge.ListenUDP(cfg)
	if err != nil {
		return nil, err
	}
	// Linux reports twice what was granted.
	if st := p.Stats(); st.RecvBuffer < 2*cfg.BufferBytes || st.SendBuffer < 2*cfg.BufferBytes {
		s.warnBufferOnce.Do(func() {
			s.log.Warn("the kernel granted smaller UDP socket buffers than asked: bursts may be lost; raise net.core.rmem_max and wmem_max, or run the agent as root",
				"asked", cfg.BufferBytes, "recv_granted", st.RecvBuffer/2, "send_granted", st.SendBuffer/2)
		})
	}
	return p, nil
}

// loopbackAny binds an agent socket that faces local emulators.
var loopbackAny = netip.MustParseAddrPort("127.0.0.1:0")

// openTunnel opens a UDP tunnel end: bound to localPort on every address,
// connected to peer, as tunnelPeer resolved it.
func (s *sockets) openTunnel(localPort int, peer netip.AddrPort) (*bridge.UDPPort, error) {
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(localPort))
	if peer.Addr().Is6() {
		local = netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(localPort))
	}
	port, err := s.listenUDP(bridge.UDPConfig{
		Local:   local,
		Peer:    peer,
		Connect: true,
	})
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "tunnel: %v", err)
	}
	return port, nil
}

// tunnelAddr is the address reserved tunnel ports are bound to: TunnelBind,
// else where the agent's API listens (every address included), else
// loopback.
func tunnelAddr(cfg Config) netip.Addr {
	for _, s := range []string{cfg.TunnelBind, cfg.ConsoleBind} {
		if a, err := netip.ParseAddr(s); err == nil {
			return a.Unmap()
		}
	}
	return netip.MustParseAddr("127.0.0.1")
}
