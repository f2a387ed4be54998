package api

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// QuietIdle wraps the API's listener so that a connection that times out
// before sending a single byte of its next request is closed silently.
//
// fasthttp answers a read timeout with an unsolicited "408 Request
// Timeout" when the connection never sent a request (a client that opened
// it ahead of time, as Qt does). The GNS3 GUI then reads that 408 as the
// reply to its next request ("Error while getting compute list: Request
// Timeout"). Reporting such a timeout as the end of the stream makes
// fasthttp close the connection without a word. A timeout in the middle
// of a request is still answered.
func QuietIdle(ln net.Listener) net.Listener { return quietListener{ln} }

type quietListener struct{ net.Listener }

func (l quietListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &quietConn{Conn: c}, nil
}

// quietConn counts what a connection read since its last reply.
type quietConn struct {
	net.Conn
	mu   sync.Mutex
	read int // bytes of the current request read so far
}

func (c *quietConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read += n
	idle := c.read == 0
	c.mu.Unlock()
	if n == 0 && idle && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, io.EOF
	}
	return n, err
}

// SyscallConn gives the socket underneath: a /pcap stream watches it for
// its client's departure (netguard.WatchGone), which a wrapper that hid it
// would turn off.
func (c *quietConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a socket")
	}
	return sc.SyscallConn()
}

func (c *quietConn) Write(p []byte) (int, error) {
	// A reply: whatever comes next is a new request.
	c.mu.Lock()
	c.read = 0
	c.mu.Unlock()
	return c.Conn.Write(p)
}
