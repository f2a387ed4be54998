package bridge

import (
	"errors"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Batched UDP I/O on Linux: recvmmsg(2) reads up to a batch of datagrams in
// one call, and sendmmsg(2) writes a batch of messages, each of which may be
// a run of equal-sized frames sent as one UDP GSO buffer (UDP_SEGMENT): the
// kernel walks its UDP/IP stack once per run and cuts the datagrams apart on
// delivery, which is what halves the cost of a frame.
//
// Receiving is the mirror image: with UDP_GRO on, a run a peer sent as one
// GSO buffer (another agent, a load generator) reaches the socket as one
// piece, and is cut back into its datagrams here by slicing, instead of the
// kernel making, queueing and freeing one buffer per datagram. Datagrams
// sent one by one (emulators) arrive one by one, as before.
//
// golang.org/x/net/ipv4's ReadBatch allocates an address per message, so the
// system calls are made here, on buffers allocated once per port: nothing is
// allocated per frame or per batch.

// maxBatch is the most messages one receive or send call carries. A
// received message is one datagram, or a GRO run of up to maxSegments.
const maxBatch = 64

// maxSendFrames is the most frames one send call takes (its iovecs): 16
// GSO runs of 64 small frames, or 64 messages of larger ones.
const maxSendFrames = 1024

// slotSize is the receive room of one message: the largest UDP payload (or
// GRO run, which the kernel keeps under 64 KiB) fits, so nothing is
// truncated.
const slotSize = 64 << 10

// groSpace is the room for the UDP_GRO control message (an int: the size
// of the run's segments).
var groSpace = unix.CmsgSpace(4)

// GSO limits: a run holds at most maxSegments frames and maxGSOBytes bytes
// (the largest IPv4 UDP payload). Kernels before 6.x accept 64 segments.
const (
	maxSegments = 64
	maxGSOBytes = 65507
)

// mmsgRecv is what the UDP and the packet ports' receive batches share: n
// message slots of slot bytes in one mmap'd area (only the pages frames
// touch become resident), one mmsghdr and iovec per message (the iovec
// starting skip bytes into its slot), each message's source address and
// control buffer where the port asks for them, and the recvmmsg call made
// through the netpoller. It is owned by the port's receive loop.
type mmsgRecv struct {
	mem    []byte
	slot   int
	hdrs   []unix.Mmsghdr
	iovs   []unix.Iovec
	frames [][]byte // reused result slice; grows to the largest batch seen

	// Where message i's source address (nameSize bytes at nameBase +
	// i*nameSize) and control message (ctrlSize bytes of ctrl) go; nil
	// when the port asks for none. The owner's typed slices keep them.
	nameBase unsafe.Pointer
	nameSize int
	ctrl     []byte
	ctrlSize int

	// read's results, set by readFn (a method value made once, so that the
	// closure rc.Read takes costs no allocation per call).
	n      int
	errno  syscall.Errno
	readFn func(fd uintptr) bool
}

func (b *mmsgRecv) init(n, slot, skip int) error {
	mem, err := unix.Mmap(-1, 0, n*slot, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return os.NewSyscallError("mmap", err)
	}
	b.mem, b.slot = mem, slot
	b.hdrs, b.iovs, b.frames = make([]unix.Mmsghdr, n), make([]unix.Iovec, n), make([][]byte, 0, n)
	for i := range n {
		b.iovs[i].Base = &mem[i*slot+skip]
		b.iovs[i].SetLen(slot - skip)
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.Iovlen = 1
	}
	b.readFn = b.doRead
	return nil
}

// free unmaps the slots; no frame read into them may be used afterwards.
func (b *mmsgRecv) free() { unix.Munmap(b.mem) }

func (b *mmsgRecv) doRead(fd uintptr) bool {
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		if b.nameBase != nil {
			h.Name = (*byte)(unsafe.Add(b.nameBase, i*b.nameSize))
			h.Namelen = uint32(b.nameSize)
		}
		if b.ctrl != nil {
			h.Control = &b.ctrl[i*b.ctrlSize]
			h.SetControllen(b.ctrlSize)
		}
		h.Flags = 0
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(len(b.hdrs)), 0, 0, 0)
	if e == unix.EAGAIN {
		return false // wait in the netpoller until the socket is readable
	}
	b.n, b.errno = int(r), e
	return true
}

// read waits for messages and returns how many it read into the slots.
// err is non-nil when the socket is closed (net.ErrClosed wrapped) or the
// call failed (a *os.SyscallError).
func (b *mmsgRecv) read(rc syscall.RawConn) (int, error) {
	b.n, b.errno = 0, 0
	if err := rc.Read(b.readFn); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.errno)
	}
	return b.n, nil
}

// recvBatch is the receive state of one UDP port, owned by its Serve loop;
// its ctrl holds the UDP_GRO control messages (groSpace each), nil without
// GRO.
type recvBatch struct {
	mmsgRecv
	names []unix.RawSockaddrInet6 // source addresses; nil on connected ports
}

func newRecvBatch(n int, withNames, gro bool) (*recvBatch, error) {
	b := &recvBatch{}
	if err := b.init(n, slotSize, 0); err != nil {
		return nil, err
	}
	if withNames {
		b.names = make([]unix.RawSockaddrInet6, n)
		b.nameBase, b.nameSize = unsafe.Pointer(&b.names[0]), unix.SizeofSockaddrInet6
	}
	if gro {
		b.ctrl, b.ctrlSize = make([]byte, n*groSpace), groSpace
	}
	return b, nil
}

// frame returns datagram i of the last read.
func (b *recvBatch) frame(i int) []byte {
	n := int(b.hdrs[i].Len)
	return b.mem[i*slotSize : i*slotSize+n : i*slotSize+n]
}

// segSize returns the size of the datagrams message i of the last read
// holds when it is a GRO run (the last may be shorter), or 0 when it is a
// single datagram.
func (b *recvBatch) segSize(i int) int {
	if b.ctrl == nil || int(b.hdrs[i].Hdr.Controllen) < unix.CmsgLen(4) {
		return 0
	}
	c := b.ctrl[i*groSpace:]
	h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	if h.Level != unix.SOL_UDP || h.Type != unix.UDP_GRO {
		return 0
	}
	return int(*(*int32)(unsafe.Pointer(&c[unix.CmsgLen(0)])))
}

// from reports whether message i of the last read came from peer.
func (b *recvBatch) from(i int, peer *peerAddr) bool {
	sa := &b.names[i]
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return peer.is4 && sa4.Port == peer.sa4.Port && sa4.Addr == peer.sa4.Addr
	case unix.AF_INET6:
		return sa.Port == peer.sa6.Port && sa.Addr == peer.sa6.Addr
	}
	return false
}

// peerAddr is a peer's address, ready for both socket families.
type peerAddr struct {
	ap  netip.AddrPort
	is4 bool
	sa4 unix.RawSockaddrInet4
	sa6 unix.RawSockaddrInet6 // IPv4 peers as ::ffff:a.b.c.d, for dual-stack sockets
}

func newPeerAddr(ap netip.AddrPort) *peerAddr {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	p := &peerAddr{ap: ap, is4: ap.Addr().Is4()}
	port := htons(ap.Port())
	if p.is4 {
		p.sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: port, Addr: ap.Addr().As4()}
	}
	p.sa6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: port, Addr: ap.Addr().As16()}
	return p
}

// htons returns port as a sockaddr stores it: network byte order.
func htons(port uint16) uint16 {
	b := [2]byte{byte(port >> 8), byte(port)}
	return *(*uint16)(unsafe.Pointer(&b))
}

// sendBatch is the send state of one port; its owner's mutex guards it.
type sendBatch struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	cmsgs []byte // one UDP_SEGMENT control message per header
	segs  []int  // frames in each message

	// The current call, for sendFn (a method value made once).
	off, count int
	sent       int
	errno      syscall.Errno
	sendFn     func(fd uintptr) bool
}

var cmsgSpace = unix.CmsgSpace(2)

func newSendBatch() *sendBatch {
	s := &sendBatch{
		hdrs:  make([]unix.Mmsghdr, maxBatch),
		iovs:  make([]unix.Iovec, maxSendFrames),
		cmsgs: make([]byte, maxBatch*cmsgSpace),
		segs:  make([]int, maxBatch),
	}
	for i := range maxBatch {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&s.cmsgs[i*cmsgSpace]))
		h.Level = unix.SOL_UDP
		h.Type = unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	s.sendFn = s.doSend
	return s
}

// build packs up to maxSendFrames frames into at most maxBatch messages
// and returns how many frames and messages it used. With gso, consecutive frames of one size
// share a message (and may end with one shorter frame, which GSO allows);
// without, each frame is its own message. name, when not nil, addresses
// every message (unconnected sockets).
func (s *sendBatch) build(frames [][]byte, gso bool, name unsafe.Pointer, namelen uint32) (nframes, nmsgs int) {
	for nframes < len(frames) && nframes < maxSendFrames && nmsgs < maxBatch {
		first := nframes
		size := len(frames[first])
		total := size
		nframes++
		if gso && size > 0 {
			for nframes < len(frames) && nframes < maxSendFrames && nframes-first < maxSegments {
				l := len(frames[nframes])
				if l > size || l == 0 || total+l > maxGSOBytes {
					break
				}
				total += l
				nframes++
				if l < size {
					break // a shorter frame can only be the last of a run
				}
			}
		}
		for i := first; i < nframes; i++ {
			s.iovs[i].Base = unsafe.SliceData(frames[i])
			s.iovs[i].SetLen(len(frames[i]))
			if len(frames[i]) == 0 {
				s.iovs[i].Base = nil
			}
		}
		h := &s.hdrs[nmsgs].Hdr
		*h = unix.Msghdr{Iov: &s.iovs[first], Iovlen: uint64(nframes - first)}
		if name != nil {
			h.Name, h.Namelen = (*byte)(name), namelen
		}
		if segs := nframes - first; segs > 1 {
			c := s.cmsgs[nmsgs*cmsgSpace:]
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = uint16(size)
			h.Control = &c[0]
			h.SetControllen(cmsgSpace)
		}
		s.segs[nmsgs] = nframes - first
		nmsgs++
	}
	return nframes, nmsgs
}

func (s *sendBatch) doSend(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hdrs[s.off])), uintptr(s.count), 0, 0, 0)
	if e == unix.EAGAIN {
		return false // socket buffer full: wait until writable
	}
	s.sent, s.errno = int(r), e
	if e != 0 {
		s.sent = 0
	}
	return true
}

// send writes messages off..off+count-1 and returns how many the kernel
// took. A failure of message off is returned as errno with 0 sent; err is
// non-nil only when the socket is closed.
func (s *sendBatch) send(rc syscall.RawConn, off, count int) (int, syscall.Errno, error) {
	s.off, s.count, s.sent, s.errno = off, count, 0, 0
	if err := rc.Write(s.sendFn); err != nil {
		return 0, 0, err
	}
	return s.sent, s.errno, nil
}

// gsoRefused reports errors that mean this socket cannot send a GSO
// message: an old kernel, a path MTU below the segment size (the kernel
// refuses segments that would need fragmenting), or a device without
// checksum offload.
func gsoRefused(errno syscall.Errno) bool {
	return errors.Is(errno, unix.EINVAL) || errors.Is(errno, unix.EIO) || errors.Is(errno, unix.EMSGSIZE) ||
		errors.Is(errno, unix.ENOPROTOOPT) || errors.Is(errno, unix.EOPNOTSUPP)
}
