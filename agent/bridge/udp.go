package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
	// BufferBytes sizes the socket's receive and send buffers. The kernel
	// caps it at net.core.rmem_max/wmem_max unless the agent may force more
	// (CAP_NET_ADMIN); Stats reports what it granted. Zero means
	// DefaultBufferBytes.
	BufferBytes int
	// NoGSO turns UDP segmentation offload off for sends: every frame then
	// costs one trip through the kernel's UDP stack. For measurements; a port
	// also turns it off by itself when the kernel or the path refuses it.
	NoGSO bool
	// NoGRO keeps the kernel from handing over a run of datagrams a peer
	// sent as one GSO buffer in one piece: each datagram is then queued and
	// read on its own. For measurements; a kernel without UDP_GRO (before
	// 5.0) leaves it off by itself.
	NoGRO bool
}

// DefaultBufferBytes is the socket buffer size a UDPPort asks for: enough to
// ride out the 100 ms or so a busy host may keep the relay off its CPU, at
// 100k frames/s of 1500 B, where the kernel's default (208 KiB) overflows
// within a few. Measured on a 2-CPU VM with the agent pinned to a CPU that
// other builds and tests loaded (load average 19-23): cloud-switch-cloud at
// a steady 100k frames/s of 1500 B, capture on, lost 1.29% and 3.23% of the
// frames at its socket with 4 MiB, 0 and 0 with 16 MiB (scripts/bench, runs
// alternated). It is a bound, not an allocation: a socket holds that much
// only while its reader is behind.
const DefaultBufferBytes = 16 << 20

// UDPPort is a UDP socket that carries one frame per datagram. It reads in
// batches (recvmmsg), takes runs a peer sent with GSO in one piece (UDP_GRO),
// and sends runs of equal-sized frames as one GSO buffer (sendmmsg with
// UDP_SEGMENT). Run its receive loop with Serve; stop it with
// Close. Its methods are safe for concurrent use.
type UDPPort struct {
	conn      *net.UDPConn
	rc        syscall.RawConn
	local     netip.AddrPort
	family    int // of the socket: AF_INET or AF_INET6 (dual stack)
	connected bool
	peer      atomic.Pointer[peerAddr]   // nil: no peer yet
	handler   atomic.Pointer[handlerBox] // nil: frames are dropped
	gso       atomic.Bool                // sends may use UDP_SEGMENT
	gro       bool                       // the socket has UDP_GRO on

	smu sync.Mutex // guards sb: one send call at a time
	sb  *sendBatch

	rcvBuf, sndBuf int // granted by the kernel, as getsockopt reports them

	rxFrames, rxBytes  atomic.Uint64
	txFrames, txBytes  atomic.Uint64
	unrouted, strays   atomic.Uint64 // dropped: no handler or no peer; wrong source
	rxErrors, txErrors atomic.Uint64
	gsoSends           atomic.Uint64 // messages sent as a GSO run of 2+ frames
	groRuns            atomic.Uint64 // messages received as a GRO run of 2+ frames
}

type handlerBox struct{ h Handler }

var _ Port = (*UDPPort)(nil)

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
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("bridge: open udp %v: %w", cfg.Local, err)
	}
	p := &UDPPort{
		conn:      conn,
		rc:        rc,
		local:     conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		connected: cfg.Connect,
		sb:        newSendBatch(),
	}
	p.gso.Store(!cfg.NoGSO)
	size := cfg.BufferBytes
	if size <= 0 {
		size = DefaultBufferBytes
	}
	rc.Control(func(fd uintptr) {
		p.family = unix.AF_INET6
		if sa, err := unix.Getsockname(int(fd)); err == nil {
			if _, ok := sa.(*unix.SockaddrInet4); ok {
				p.family = unix.AF_INET
			}
		}
		if !cfg.NoGRO {
			p.gro = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
		p.rcvBuf = setBuffer(int(fd), unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, size)
		p.sndBuf = setBuffer(int(fd), unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, size)
	})
	if cfg.Peer.IsValid() {
		p.peer.Store(newPeerAddr(cfg.Peer))
	}
	return p, nil
}

// setBuffer asks for a socket buffer of size bytes, forcing it past the
// system maximum when the process may (root), and returns what the kernel
// granted. Linux doubles the value to account for its bookkeeping, and
// reports the doubled value.
func setBuffer(fd, opt, force, size int) int {
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, size)
	if got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err == nil && got >= 2*size {
		return got
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size) // EPERM without CAP_NET_ADMIN
	got, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	return got
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
	p.peer.Store(newPeerAddr(peer))
}

// SetHandler sets who receives this port's frames; nil drops them.
func (p *UDPPort) SetHandler(h Handler) {
	if h == nil {
		p.handler.Store(nil)
		return
	}
	p.handler.Store(&handlerBox{h})
}

// Send transmits frames to the peer, in order, and returns how many the
// kernel took. It does not keep frames. Sending with no peer, or to a peer
// that is not listening yet, drops the frames and counts them: that is
// normal while a link's ends come up one after the other.
func (p *UDPPort) Send(frames [][]byte) int {
	if len(frames) == 0 {
		return 0
	}
	var (
		name    unsafe.Pointer
		namelen uint32
	)
	peer := p.peer.Load()
	if !p.connected {
		if peer == nil {
			p.unrouted.Add(uint64(len(frames)))
			return 0
		}
		if p.family == unix.AF_INET && peer.is4 {
			name, namelen = unsafe.Pointer(&peer.sa4), unix.SizeofSockaddrInet4
		} else {
			name, namelen = unsafe.Pointer(&peer.sa6), unix.SizeofSockaddrInet6
		}
	}
	p.smu.Lock()
	defer p.smu.Unlock()
	sent := 0
	for len(frames) > 0 {
		nframes, nmsgs := p.sb.build(frames, p.gso.Load(), name, namelen)
		sent += p.sendMsgs(frames[:nframes], nmsgs, peer)
		frames = frames[nframes:]
	}
	return sent
}

// sendMsgs sends the messages sb holds for frames. p.smu must be held.
func (p *UDPPort) sendMsgs(frames [][]byte, nmsgs int, peer *peerAddr) int {
	sb := p.sb
	sent, first, bytes := 0, 0, 0 // frames and bytes sent; index of the first frame of message off
	defer func() {
		clear(sb.iovs[:len(frames)]) // keep no reference to the caller's frames
		p.txFrames.Add(uint64(sent))
		p.txBytes.Add(uint64(bytes))
	}()
	for off := 0; off < nmsgs; {
		n, errno, err := sb.send(p.rc, off, nmsgs-off)
		if err != nil { // closed
			p.txErrors.Add(uint64(len(frames) - first))
			return sent
		}
		for range n {
			segs := sb.segs[off]
			for _, f := range frames[first : first+segs] {
				bytes += len(f)
			}
			if segs > 1 {
				p.gsoSends.Add(1)
			}
			sent += segs
			first += segs
			off++
		}
		if errno == 0 && n > 0 {
			continue
		}
		// Message off failed; the ones after it were not tried.
		segs := sb.segs[off]
		if segs > 1 && gsoRefused(errno) {
			// This path cannot take GSO: send the run frame by frame, and
			// stop asking (one refusal is enough to know).
			p.gso.Store(false)
			sent += p.sendEach(frames[first:first+segs], peer)
		} else {
			p.txErrors.Add(uint64(segs))
		}
		first += segs
		off++
	}
	return sent
}

// sendEach sends frames one datagram at a time, without GSO, to peer (nil
// on a connected port). It is the fallback for a run the kernel refused;
// p.smu must be held.
func (p *UDPPort) sendEach(frames [][]byte, peer *peerAddr) int {
	sent := 0
	for _, f := range frames {
		var err error
		if p.connected {
			_, err = p.conn.Write(f)
		} else {
			_, err = p.conn.WriteToUDPAddrPort(f, peer.ap)
		}
		if err != nil {
			p.txErrors.Add(1)
			continue
		}
		p.txBytes.Add(uint64(len(f)))
		sent++
	}
	return sent
}

// Serve reads frames and hands them to the handler, a batch at a time,
// until the port is closed or ctx is done, then returns nil. It returns an
// error only if the socket fails for good.
func (p *UDPPort) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.conn.Close() }) // unblocks the read
	defer stop()
	rb, err := newRecvBatch(maxBatch, !p.connected, p.gro)
	if err != nil {
		return fmt.Errorf("bridge: receive on %v: %w", p.local, err)
	}
	defer rb.free() // no frame outlives HandleFrames, so none refers to the slots now
	for {
		n, err := rb.read(p.rc)
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
		frames := rb.frames[:0]
		var peer *peerAddr
		if !p.connected {
			peer = p.peer.Load()
		}
		bytes := 0
		for i := range n {
			f := rb.frame(i)
			if len(f) == 0 {
				continue
			}
			seg := rb.segSize(i)
			if !p.connected && (peer == nil || !rb.from(i, peer)) {
				p.strays.Add(uint64(segments(len(f), seg)))
				continue
			}
			bytes += len(f)
			if seg > 0 && seg < len(f) { // a GRO run: cut it back into its datagrams
				p.groRuns.Add(1)
				for len(f) > seg {
					frames = append(frames, f[:seg:seg])
					f = f[seg:]
				}
			}
			frames = append(frames, f)
		}
		rb.frames = frames[:0] // keep what append grew
		if len(frames) == 0 {
			continue
		}
		p.rxFrames.Add(uint64(len(frames)))
		p.rxBytes.Add(uint64(bytes))
		if hb := p.handler.Load(); hb != nil {
			hb.h.HandleFrames(frames)
		} else {
			p.unrouted.Add(uint64(len(frames)))
		}
		clear(frames) // the slots are reused: keep no reference to them
	}
}

// segments returns how many datagrams a message of n bytes holds, given its
// GRO segment size (0: a single datagram).
func segments(n, seg int) int {
	if seg <= 0 || seg >= n {
		return 1
	}
	return (n + seg - 1) / seg
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
	// GSOSends counts messages that carried a run of frames in one GSO
	// buffer; GSO is false once the port has stopped using it.
	GSOSends uint64
	GSO      bool
	// GRORuns counts messages received as a run of frames in one piece;
	// GRO is whether the socket takes them.
	GRORuns uint64
	GRO     bool
	// RecvBuffer and SendBuffer are the socket buffer sizes the kernel
	// granted, as getsockopt reports them (twice the usable size).
	RecvBuffer, SendBuffer int
}

// Stats returns the port's counters.
func (p *UDPPort) Stats() PortStats {
	return PortStats{
		RxFrames: p.rxFrames.Load(), RxBytes: p.rxBytes.Load(),
		TxFrames: p.txFrames.Load(), TxBytes: p.txBytes.Load(),
		Unrouted: p.unrouted.Load(), Strays: p.strays.Load(),
		RxErrors: p.rxErrors.Load(), TxErrors: p.txErrors.Load(),
		GSOSends: p.gsoSends.Load(), GSO: p.gso.Load(),
		GRORuns: p.groRuns.Load(), GRO: p.gro,
		RecvBuffer: p.rcvBuf, SendBuffer: p.sndBuf,
	}
}

// transient reports errors a relay skips: the ICMP-driven errors a UDP
// socket reports while its peer is not there yet or the network blinks.
func transient(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETDOWN) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN)
}
