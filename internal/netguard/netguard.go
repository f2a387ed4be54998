// Package netguard keeps a server alive when it runs short of file
// descriptors: it raises the process's open-file limit, caps the
// connections a listener hands out (in all and per client IP, refusing the
// excess with a JSON 503), keeps accepting after EMFILE instead of giving
// up, and tells when a client whose request is being answered goes away.
// The controller and the agent use it on their API listeners.
package netguard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/sys/unix"
)

// FileLimit returns the open-file limit in force. The Go runtime has
// already raised the soft RLIMIT_NOFILE to the hard limit at start (and
// gives child processes the original back), so there is nothing to raise.
func FileLimit() (uint64, error) {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	return l.Cur, nil
}

// Headroom is how many descriptors DefaultMaxConns keeps for files,
// sockets to agents, relays and consoles.
const Headroom = 256

// DefaultMaxConns is a connection cap that leaves Headroom descriptors of
// the open-file limit for everything else (at least 64 connections).
func DefaultMaxConns() int {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return 1024
	}
	return int(max(int64(min(l.Cur, 1<<30))-Headroom, 64))
}

// Config bounds a Listener.
type Config struct {
	// MaxConns caps the connections open at once; 0 means no cap.
	MaxConns int
	// MaxPerIP caps the connections open at once from one client IP; 0
	// means no cap.
	MaxPerIP int
	// Logger reports refusals and accept errors, at most once a second
	// each; nil discards.
	Logger *slog.Logger
}

// Listener is a net.Listener whose Accept never fails for lack of file
// descriptors and which refuses connections over its caps. It is safe for
// concurrent use.
type Listener struct {
	net.Listener
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	open  int
	perIP map[string]int

	logMu   sync.Mutex
	lastLog map[string]time.Time
}

// Listen wraps ln.
func Listen(ln net.Listener, cfg Config) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: ln, cfg: cfg, log: cfg.Logger, perIP: make(map[string]int), lastLog: make(map[string]time.Time)}
}

// Open is how many connections the Listener handed out are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept waits for the next connection within the caps. Running out of
// descriptors (EMFILE, ENFILE) or kernel memory makes it wait and try
// again, backing off up to a second, as net/http does; it returns an error
// only when the listener is closed or fails otherwise.
func (l *Listener) Accept() (net.Conn, error) {
	var wait *backoff.ExponentialBackOff
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if exhausted(err) {
				if wait == nil {
					wait = &backoff.ExponentialBackOff{InitialInterval: 5 * time.Millisecond, MaxInterval: time.Second,
						Multiplier: 2, RandomizationFactor: 0.5}
					wait.Reset()
				}
				in := wait.NextBackOff()
				l.logf("exhausted", "accept: out of resources, retrying", "err", err, "in", in)
				time.Sleep(in)
				continue
			}
			return nil, err
		}
		wait = nil
		ip := clientIP(c.RemoteAddr())
		if msg := l.admit(ip); msg != "" {
			l.logf("refused "+ip, "connection refused", "client", ip, "why", msg)
			refuse(c, msg)
			continue
		}
		return &conn{Conn: c, l: l, ip: ip}, nil
	}
}

// admit counts a new connection from ip, or says why it is refused.
func (l *Listener) admit(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.MaxConns > 0 && l.open >= l.cfg.MaxConns {
		return fmt.Sprintf("Too many connections (%d)", l.cfg.MaxConns)
	}
	if l.cfg.MaxPerIP > 0 && l.perIP[ip] >= l.cfg.MaxPerIP {
		return fmt.Sprintf("Too many connections from %s (%d)", ip, l.cfg.MaxPerIP)
	}
	l.open++
	l.perIP[ip]++
	return ""
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// logf logs at most once a second per key.
func (l *Listener) logf(key, msg string, args ...any) {
	l.logMu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog[key]) < time.Second {
		l.logMu.Unlock()
		return
	}
	if len(l.lastLog) > 1024 {
		clear(l.lastLog)
	}
	l.lastLog[key] = now
	l.logMu.Unlock()
	l.log.Warn(msg, args...)
}

// exhausted reports an accept error that waiting can cure.
func exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.ECONNABORTED)
}

// refuse answers a connection over the caps with a JSON 503 and closes it.
func refuse(c net.Conn, msg string) {
	body := fmt.Sprintf(`{"message": %q, "status": 503}`, msg)
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.Close()
}

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// conn gives its slot back once, when closed.
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// SyscallConn exposes the socket, for WatchGone.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Unwrap returns the accepted connection.
func (c *conn) Unwrap() net.Conn { return c.Conn }

// WatchGone calls gone (once, from its own goroutine) when the client of c
// closes its side or the connection fails. It reads, and throws away,
// whatever the client sends meanwhile: use it only on a connection that
// will close after its current response (a stream). It needs a socket
// (c or what it wraps must be a syscall.Conn) and returns ok false,
// watching nothing, otherwise. The caller owns the watch: stop ends it
// (gone is not called after stop returns; stop sets a read deadline on c
// to wake it) and returns once its goroutine has ended; call it before
// c's owner closes c, or after (then it only waits). stop may be called
// more than once.
func WatchGone(c net.Conn, gone func()) (stop func(), ok bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() {}, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}, false
	}
	// The server's read deadline for the request would end the watch.
	_ = c.SetReadDeadline(time.Time{})
	var stopped atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		var closed bool
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
				switch {
				case err == unix.EAGAIN:
					return false // wait until readable
				case err == unix.EINTR:
					continue
				case err != nil || n == 0:
					closed = true
					return true
				}
				// Bytes the client sent after its request: discarded.
			}
		})
		if (closed || err != nil) && !stopped.Load() {
			gone()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stopped.Store(true)
			_ = c.SetReadDeadline(time.Unix(1, 0)) // wakes the read
		})
		<-done
	}, true
}
