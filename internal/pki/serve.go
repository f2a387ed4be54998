package pki

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Reloader serves a certificate and key from files, read again at the
// next handshake after either file's modification time or size changes:
// a renewed certificate is taken up without a restart. A change that
// cannot be read (a half-written pair) keeps the previous certificate
// and is tried again at the next handshake.
type Reloader struct {
	certFile, keyFile string

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp [2]fileStamp
	err   error // the last failed reload, for Err
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewReloader reads the pair once: a pair that does not load is an
// error at start, not at the first handshake.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// reload reads the pair if its files changed; r.mu must be held or r
// not yet shared.
func (r *Reloader) reload() error {
	a, err := stampOf(r.certFile)
	if err != nil {
		return err
	}
	b, err := stampOf(r.keyFile)
	if err != nil {
		return err
	}
	if r.cert != nil && r.stamp == [2]fileStamp{a, b} {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.stamp = &cert, [2]fileStamp{a, b}
	return nil
}

// Certificate returns the pair as last read, reading it again first if
// its files changed.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = r.reload()
	return r.cert
}

// Err is the last reload's failure, or nil.
func (r *Reloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// ServerConfig is a TLS server configuration (TLS 1.2 and later, Go's
// defaults otherwise) serving r's certificate, with HTTP/1.1 only.
func ServerConfig(r *Reloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
}

// PlainHTTPRefusal is the reply a plain HTTP request gets on a TLS port.
const PlainHTTPRefusal = "This port speaks HTTPS: use https:// (plain HTTP is refused here)"

// Listen wraps ln so that each connection speaks TLS with cfg. A client
// that opens with a plain HTTP request instead of a TLS handshake is
// answered 400 with PlainHTTPRefusal (as JSON, the API's error shape)
// and closed; nothing it sent goes further.
func Listen(ln net.Listener, cfg *tls.Config) net.Listener {
	return &listener{Listener: ln, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// The first byte is read by the connection's first Read, on the
	// server's goroutine for it: Accept never waits on a client.
	return &Conn{raw: c, cfg: l.cfg}, nil
}

// errPlainHTTP ends a connection that spoke plain HTTP.
var errPlainHTTP = errors.New("plain HTTP on a TLS port")

// Conn is a server connection that speaks TLS once its first byte says
// the client does.
type Conn struct {
	raw  net.Conn
	cfg  *tls.Config
	once sync.Once
	tls  *tls.Conn
	err  error
}

// recordHandshake is the first byte of a TLS client hello.
const recordHandshake = 0x16

func (c *Conn) start() error {
	c.once.Do(func() {
		br := bufio.NewReaderSize(c.raw, 1024)
		first, err := br.Peek(1)
		if err != nil {
			c.err = err
			return
		}
		if first[0] != recordHandshake {
			body := fmt.Sprintf(`{"message":%q,"status":400}`, PlainHTTPRefusal)
			_ = c.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c.raw, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			c.err = errPlainHTTP
			return
		}
		c.tls = tls.Server(&bufferedConn{Conn: c.raw, r: br}, c.cfg)
	})
	return c.err
}

func (c *Conn) Read(p []byte) (int, error) {
	if err := c.start(); err != nil {
		return 0, err
	}
	return c.tls.Read(p)
}

func (c *Conn) Write(p []byte) (int, error) {
	if err := c.start(); err != nil {
		return 0, err
	}
	return c.tls.Write(p)
}

// Close closes the connection (sending TLS's close_notify when it got
// that far).
func (c *Conn) Close() error {
	if c.tls != nil {
		return c.tls.Close()
	}
	return c.raw.Close()
}

func (c *Conn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// Handshake runs the TLS handshake if it has not run (fasthttp asks for
// it, and for ConnectionState, to say the request came over TLS).
func (c *Conn) Handshake() error {
	if err := c.start(); err != nil {
		return err
	}
	return c.tls.Handshake()
}

// ConnectionState is the TLS state (zero before the handshake or on a
// plain connection).
func (c *Conn) ConnectionState() tls.ConnectionState {
	if c.start() != nil {
		return tls.ConnectionState{}
	}
	return c.tls.ConnectionState()
}

// SyscallConn gives the socket underneath, so that a stream still
// notices its client leaving (netguard.WatchGone).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.raw.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Unwrap returns the accepted connection.
func (c *Conn) Unwrap() net.Conn { return c.raw }

// bufferedConn reads through the reader that peeked at its first byte.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// MutualServerConfig is ServerConfig that also requires a client
// certificate issued by ca for the name client (an agent takes calls from
// its controller only: ControllerName).
func MutualServerConfig(r *Reloader, ca *x509.Certificate, client string) *tls.Config {
	cfg := ServerConfig(r)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = pool
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != client {
			return fmt.Errorf("client certificate is not %s's", client)
		}
		return nil
	}
	return cfg
}

// PinnedClientConfig is a client configuration that trusts a server whose
// chain holds a CA certificate of SHA-256 caSHA256 and whose certificate
// that CA issued for serverName: how an agent first meets its
// controller, knowing only the CA's fingerprint.
func PinnedClientConfig(caSHA256 []byte, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified below, against the pinned CA
		VerifyConnection: func(cs tls.ConnectionState) error {
			for _, c := range cs.PeerCertificates {
				if !MatchesFingerprint(c, caSHA256) || !c.IsCA {
					continue
				}
				pool := x509.NewCertPool()
				pool.AddCert(c)
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: serverName})
				return err
			}
			return fmt.Errorf("the server's certificate chain holds no CA of SHA-256 %X: a wrong --ca-sha256, or not your controller", caSHA256)
		},
	}
}
