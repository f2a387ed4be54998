package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A PacketPort is a network interface of the agent's host read and written
// with an AF_PACKET socket: the host end of a veth pair whose other end is
// a container's eth<n>. Each datagram is one
// Ethernet frame. Like a UDPPort it reads in batches (recvmmsg) and sends in
// batches (sendmmsg), so a link, its filters, suspend and captures work on
// it unchanged.
//
// A PacketPort outlives the interfaces it is attached to: a container's
// veth dies with it at every stop and is made again at every start, so the
// port is attached to the new interface (Attach) and detached at stop
// (Detach). While detached it drops and counts what it is given to send.
// Its methods are safe for concurrent use.
type PacketPort struct {
	bufferBytes int

	mu       sync.Mutex // guards cur and closed: one attach or detach at a time
	cur      *packetSock
	closed   bool
	sock     atomic.Pointer[packetSock] // cur, for Send without the lock
	handler  atomic.Pointer[handlerBox]
	smu      sync.Mutex // guards sb: one send call at a time
	sb       *sendBatch
	counters packetCounters
}

type packetCounters struct {
	rxFrames, rxBytes  atomic.Uint64
	txFrames, txBytes  atomic.Uint64
	unrouted, detached atomic.Uint64 // dropped: no handler; no interface to send to
	truncated, vlans   atomic.Uint64 // frames larger than a slot; tags put back in
	rxErrors, txErrors atomic.Uint64
}

// packetSock is one AF_PACKET socket bound to one interface, and the
// goroutine that reads it.
type packetSock struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int
	done    chan struct{} // closed when the receive loop has returned
}

var _ Port = (*PacketPort)(nil)

// NewPacketPort returns a detached port. bufferBytes sizes the receive and
// send buffers of each socket it opens (0: DefaultBufferBytes).
func NewPacketPort(bufferBytes int) *PacketPort {
	if bufferBytes <= 0 {
		bufferBytes = DefaultBufferBytes
	}
	return &PacketPort{bufferBytes: bufferBytes, sb: newSendBatch()}
}

// Attach opens a packet socket on the interface ifindex of the calling
// thread's network namespace and relays its frames from now on, in place of
// the interface the port was attached to before. It needs CAP_NET_RAW.
func (p *PacketPort) Attach(ifindex int) error {
	return p.attach(ifindex, false)
}

// AttachPromiscuous is Attach on an interface whose frames to other MAC
// addresses must be heard too (a host's NIC given to a cloud): it puts
// the interface in promiscuous mode for as long as the socket is open.
// The kernel counts such requests, so the interface leaves promiscuous
// mode when the last socket that asked for it closes.
func (p *PacketPort) AttachPromiscuous(ifindex int) error {
	return p.attach(ifindex, true)
}

func (p *PacketPort) attach(ifindex int, promisc bool) error {
	s, err := openPacketSock(ifindex, p.bufferBytes, promisc)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		s.f.Close()
		return errors.New("bridge: packet port closed")
	}
	p.detachLocked()
	p.cur = s
	p.sock.Store(s)
	go p.serve(s)
	return nil
}

// Detach closes the port's socket, if any, and waits for its receive loop
// to end. Frames sent meanwhile are dropped and counted.
func (p *PacketPort) Detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.detachLocked()
}

func (p *PacketPort) detachLocked() {
	s := p.cur
	if s == nil {
		return
	}
	p.cur = nil
	p.sock.Store(nil)
	p.smu.Lock() // no send is using the socket while it closes
	s.f.Close()
	p.smu.Unlock()
	<-s.done
}

// Ifindex returns the interface the port is attached to, 0 if none.
func (p *PacketPort) Ifindex() int {
	if s := p.sock.Load(); s != nil {
		return s.ifindex
	}
	return 0
}

// Close detaches the port for good; Attach fails afterwards. It is safe to
// call twice.
func (p *PacketPort) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.detachLocked()
	return nil
}

// SetHandler sets who receives this port's frames; nil drops them.
func (p *PacketPort) SetHandler(h Handler) {
	if h == nil {
		p.handler.Store(nil)
		return
	}
	p.handler.Store(&handlerBox{h})
}

func openPacketSock(ifindex, bufferBytes int, promisc bool) (*packetSock, error) {
	// Protocol 0 receives nothing until bind names one: no frame of another
	// interface slips in between socket and bind.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bridge: packet socket: %w", os.NewSyscallError("socket", err))
	}
	fail := func(call string, err error) (*packetSock, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("bridge: packet socket on interface %d: %w", ifindex, os.NewSyscallError(call, err))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return fail("setsockopt PACKET_AUXDATA", err)
	}
	// What the host itself sends out of the interface (IPv6 neighbour
	// discovery, DHCP or LLDP daemons) is not the lab's: never relay it.
	// Kernels before 4.20 lack the option; the receive loop checks the
	// packet type as well.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	// Frames go straight to the driver: no qdisc to walk (a veth has none
	// worth having), and none that drops frames until the kernel's link
	// watch activates it, up to a second after the interface came up.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	setBuffer(fd, unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, bufferBytes)
	setBuffer(fd, unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, bufferBytes)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	if promisc {
		mreq := &unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, mreq); err != nil {
			return fail("setsockopt PACKET_ADD_MEMBERSHIP", err)
		}
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("packet:%d", ifindex)) // non-blocking: served by the netpoller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bridge: packet socket on interface %d: %w", ifindex, err)
	}
	return &packetSock{f: f, rc: rc, ifindex: ifindex, done: make(chan struct{})}, nil
}

// Send transmits frames out of the interface, in order, one frame per
// datagram, and returns how many the kernel took. While the port is
// detached (the container is stopped) frames are dropped and counted.
func (p *PacketPort) Send(frames [][]byte) int {
	if len(frames) == 0 {
		return 0
	}
	p.smu.Lock()
	defer p.smu.Unlock()
	s := p.sock.Load()
	if s == nil {
		p.counters.detached.Add(uint64(len(frames)))
		return 0
	}
	sent := 0
	for len(frames) > 0 {
		// Unaddressed messages go out of the interface the socket is bound to.
		nframes, nmsgs := p.sb.build(frames, false, nil, 0)
		sent += p.sendMsgs(s, frames[:nframes], nmsgs)
		frames = frames[nframes:]
	}
	return sent
}

// sendMsgs sends the messages sb holds, one frame each. p.smu must be held.
func (p *PacketPort) sendMsgs(s *packetSock, frames [][]byte, nmsgs int) int {
	sb := p.sb
	sent, bytes := 0, 0
	defer func() {
		clear(sb.iovs[:len(frames)])
		p.counters.txFrames.Add(uint64(sent))
		p.counters.txBytes.Add(uint64(bytes))
	}()
	for off := 0; off < nmsgs; {
		n, errno, err := sb.send(s.rc, off, nmsgs-off)
		if err != nil { // closed under us
			p.counters.detached.Add(uint64(nmsgs - off))
			return sent
		}
		for _, f := range frames[off : off+n] {
			bytes += len(f)
		}
		sent += n
		off += n
		if errno == 0 && n > 0 {
			continue
		}
		if errors.Is(errno, unix.ENXIO) || errors.Is(errno, unix.ENETDOWN) || errors.Is(errno, unix.ENODEV) {
			// The interface went away with its container: the rest would fail too.
			p.counters.detached.Add(uint64(nmsgs - off))
			return sent
		}
		p.counters.txErrors.Add(1) // this frame (too short, larger than the MTU): skip it
		off++
	}
	return sent
}

// packetSlot is the receive room of one frame: the largest frame a veth at
// MTU 65535 delivers, after vlanRoom bytes kept free in front of it to put
// a VLAN tag back without moving the payload.
const (
	vlanRoom   = 4
	packetSlot = vlanRoom + 14 + 65535 + 1 // +1: a frame that fills the slot was truncated
)

// sizeofAuxdata is the size of struct tpacket_auxdata.
const sizeofAuxdata = int(unsafe.Sizeof(unix.TpacketAuxdata{}))

// auxSpace is the room for the PACKET_AUXDATA control message.
var auxSpace = unix.CmsgSpace(sizeofAuxdata)

// packetRecv is the receive state of one socket, owned by its loop: each
// frame's slot keeps vlanRoom bytes free in front of it, its source address
// says its direction, and its PACKET_AUXDATA (auxSpace each, in ctrl) any
// VLAN tag the kernel took out.
type packetRecv struct {
	mmsgRecv
	names []unix.RawSockaddrLinklayer
}

func newPacketRecv(n int) (*packetRecv, error) {
	b := &packetRecv{names: make([]unix.RawSockaddrLinklayer, n)}
	if err := b.init(n, packetSlot, vlanRoom); err != nil {
		return nil, err
	}
	b.nameBase, b.nameSize = unsafe.Pointer(&b.names[0]), unix.SizeofSockaddrLinklayer
	b.ctrl, b.ctrlSize = make([]byte, n*auxSpace), auxSpace
	return b, nil
}

// serve reads s until it is closed and hands the frames to the handler.
func (p *PacketPort) serve(s *packetSock) {
	defer close(s.done)
	rb, err := newPacketRecv(maxBatch)
	if err != nil {
		p.counters.rxErrors.Add(1)
		return
	}
	defer rb.free()
	c := &p.counters
	for {
		n, err := rb.read(s.rc)
		var serr *os.SyscallError
		if errors.As(err, &serr) {
			c.rxErrors.Add(1)
			if transient(err) { // ENETDOWN: the interface went down, and may come back
				continue
			}
			return
		}
		if err != nil {
			return // the socket was closed (Detach)
		}
		frames := rb.frames[:0]
		bytes := 0
		for i := range n {
			if rb.names[i].Pkttype == unix.PACKET_OUTGOING {
				continue // sent by this host (kernels without PACKET_IGNORE_OUTGOING)
			}
			h := &rb.hdrs[i]
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 || int(h.Len) > packetSlot-vlanRoom-1 {
				c.truncated.Add(1)
				continue
			}
			slot := rb.mem[i*packetSlot : (i+1)*packetSlot]
			f := slot[vlanRoom : vlanRoom+int(h.Len)]
			if tpid, tci, ok := auxVLAN(rb.ctrl[i*auxSpace : i*auxSpace+int(h.Hdr.Controllen)]); ok {
				f = insertVLAN(slot, int(h.Len), tpid, tci)
				c.vlans.Add(1)
			}
			bytes += len(f)
			frames = append(frames, f[:len(f):len(f)])
		}
		rb.frames = frames[:0]
		if len(frames) == 0 {
			continue
		}
		c.rxFrames.Add(uint64(len(frames)))
		c.rxBytes.Add(uint64(bytes))
		if hb := p.handler.Load(); hb != nil {
			hb.h.HandleFrames(frames)
		} else {
			c.unrouted.Add(uint64(len(frames)))
		}
		clear(frames)
	}
}

// auxVLAN returns the VLAN tag the kernel took out of a frame and reported
// in its PACKET_AUXDATA control message (a tag the sender's NIC would have
// inserted: TX VLAN offload), and false when there is none.
func auxVLAN(ctrl []byte) (tpid, tci uint16, ok bool) {
	msgs, err := unix.ParseSocketControlMessage(ctrl)
	if err != nil {
		return 0, 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < sizeofAuxdata {
			continue
		}
		aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
		if aux.Status&unix.TP_STATUS_VLAN_VALID == 0 {
			return 0, 0, false
		}
		tpid = unix.ETH_P_8021Q
		if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && aux.Vlan_tpid != 0 {
			tpid = aux.Vlan_tpid
		}
		return tpid, aux.Vlan_tci, true
	}
	return 0, 0, false
}

// insertVLAN puts a VLAN tag back into the frame of n bytes that sits at
// slot[vlanRoom:], after its MAC addresses, as it was on the wire, and
// returns the tagged frame (slot[:n+4]). Only the 12 address bytes move.
func insertVLAN(slot []byte, n int, tpid, tci uint16) []byte {
	if n < 12 {
		return slot[vlanRoom : vlanRoom+n]
	}
	copy(slot[:12], slot[vlanRoom:vlanRoom+12])
	binary.BigEndian.PutUint16(slot[12:], tpid)
	binary.BigEndian.PutUint16(slot[14:], tci)
	return slot[:n+vlanRoom]
}

// PacketStats counts what went through a PacketPort.
type PacketStats struct {
	RxFrames, RxBytes, TxFrames, TxBytes uint64
	// Unrouted frames had no handler; Detached ones were to be sent while
	// no interface was attached (the container was stopped).
	Unrouted, Detached uint64
	// Truncated frames were larger than the port takes; VLANTags counts
	// tags put back into received frames.
	Truncated, VLANTags uint64
	RxErrors, TxErrors  uint64
	Ifindex             int
}

// Stats returns the port's counters.
func (p *PacketPort) Stats() PacketStats {
	c := &p.counters
	return PacketStats{
		RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(),
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(),
		Unrouted: c.unrouted.Load(), Detached: c.detached.Load(),
		Truncated: c.truncated.Load(), VLANTags: c.vlans.Load(),
		RxErrors: c.rxErrors.Load(), TxErrors: c.txErrors.Load(),
		Ifindex: p.Ifindex(),
	}
}
