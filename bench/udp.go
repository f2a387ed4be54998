package main

import (
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Batched UDP for the load generator and the sink, on buffers allocated
// once, so that the generator and the sink cost as little as the machine
// allows and the relay is what a run measures. The generator sends a batch
// of frames as UDP GSO runs (sendmmsg of messages with UDP_SEGMENT): the
// kernel still delivers one datagram per frame, as an emulator would send
// them, but the generator pays the UDP/IP output path once per run. That is
// how the loopback ceiling the relay is compared with is reached (about
// 500k 64-byte frames/s on this class of machine, with the sink on the
// generator's CPU); a generator sending datagram by datagram tops out near
// half of that here, below what the relay forwards, and would measure
// itself. The sink reads with recvmmsg.

const batch = 64

// mmsgConn is a UDP socket with preallocated batch headers. It is used by
// one goroutine.
type mmsgConn struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs [][]byte // the batch's frames; for a generator, consecutive in one buffer
	cmsg []byte   // UDP_SEGMENT control messages, one per header
	size int

	off, count, n int
	errno         syscall.Errno
	sendFn        func(fd uintptr) bool
	recvFn        func(fd uintptr) bool
}

// newMmsgConn wraps conn, with batch buffers of size bytes each.
func newMmsgConn(conn *net.UDPConn, size int) (*mmsgConn, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &mmsgConn{conn: conn, rc: rc, size: size, hdrs: make([]unix.Mmsghdr, batch), iovs: make([]unix.Iovec, batch),
		bufs: make([][]byte, batch), cmsg: make([]byte, batch*unix.CmsgSpace(2))}
	mem := make([]byte, batch*size)
	for i := range batch {
		c.bufs[i] = mem[i*size : (i+1)*size : (i+1)*size]
		c.iovs[i].Base = &c.bufs[i][0]
		c.iovs[i].SetLen(size)
		c.hdrs[i].Hdr.Iov = &c.iovs[i]
		c.hdrs[i].Hdr.Iovlen = 1
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c.cmsg[i*unix.CmsgSpace(2)]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		*(*uint16)(unsafe.Pointer(&c.cmsg[i*unix.CmsgSpace(2)+unix.CmsgLen(0)])) = uint16(size)
	}
	c.sendFn, c.recvFn = c.doSend, c.doRecv
	return c, nil
}

// sendFrames sends the first n frames of bufs (all of c's size) as GSO
// runs, and returns once the kernel took them all.
func (c *mmsgConn) sendFrames(n int) error {
	per := min(64, 65507/c.size) // segments per GSO message
	msgs := 0
	for first := 0; first < n; first += per {
		segs := min(per, n-first)
		h := &c.hdrs[msgs].Hdr
		h.Iov = &c.iovs[first]
		h.Iovlen = 1
		c.iovs[first].SetLen(segs * c.size) // the frames are consecutive in memory
		h.Control, h.Controllen = nil, 0
		if segs > 1 {
			h.Control = &c.cmsg[msgs*unix.CmsgSpace(2)]
			h.SetControllen(unix.CmsgSpace(2))
		}
		msgs++
	}
	return c.send(msgs)
}

func (c *mmsgConn) doSend(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&c.hdrs[c.off])), uintptr(c.count), 0, 0, 0)
	if e == unix.EAGAIN {
		return false
	}
	c.n, c.errno = int(r), e
	return true
}

// send sends the first count messages; refused sends (ECONNREFUSED while
// the far end is not up) count as sent, as a generator does not care.
func (c *mmsgConn) send(count int) error {
	for c.off = 0; c.off < count; {
		c.count = count - c.off
		if err := c.rc.Write(c.sendFn); err != nil {
			return err
		}
		if c.errno != 0 {
			if c.errno == unix.ECONNREFUSED {
				c.off++
				continue
			}
			return os.NewSyscallError("sendmmsg", c.errno)
		}
		c.off += c.n
	}
	return nil
}

func (c *mmsgConn) doRecv(fd uintptr) bool {
	for i := range c.hdrs {
		c.iovs[i].SetLen(len(c.bufs[i]))
		c.hdrs[i].Hdr.Iov, c.hdrs[i].Hdr.Iovlen = &c.iovs[i], 1
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&c.hdrs[0])), batch, 0, 0, 0)
	if e == unix.EAGAIN {
		return false
	}
	c.n, c.errno = int(r), e
	return true
}

// recv waits for datagrams and returns how many it read into bufs; the
// length of datagram i is msgLen(i).
func (c *mmsgConn) recv() (int, error) {
	if err := c.rc.Read(c.recvFn); err != nil {
		return 0, err
	}
	if c.errno != 0 {
		if c.errno == unix.ECONNREFUSED {
			return 0, nil
		}
		return 0, os.NewSyscallError("recvmmsg", c.errno)
	}
	return c.n, nil
}

func (c *mmsgConn) msgLen(i int) int { return int(c.hdrs[i].Len) }
