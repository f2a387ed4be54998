package compute

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/atomicfile"
	"github.com/labtap/labtap/internal/pki"
)

// Bounds of a join.
const (
	MaxJoinTokenTTL     = 7 * 24 * time.Hour
	DefaultJoinTokenTTL = time.Hour
	maxJoinTokens       = 1000 // outstanding at once
	maxTokenLen         = 128
	maxCSRLen           = 8 << 10
	revokedFile         = "revoked.json"
)

// Enrollment lets agents join with a one-time token and get a certificate
// of the controller's CA, and revokes those certificates. It also makes
// the TLS configuration the controller calls its agents with: the CA
// trusted beside the system's roots, the controller's client certificate
// presented, a revoked certificate refused.
type Enrollment struct {
	ca  *pki.CA
	reg *Registry
	dir string // the CA's directory: revoked.json

	mu      sync.Mutex
	tokens  map[[sha256.Size]byte]time.Time // token hash → expiry
	revoked map[string]bool                 // serials, decimal
	now     func() time.Time
}

// SetEnrollment lets agents join r (Enrollment.Join) and has the removal
// of a joined compute revoke its certificate.
func (r *Registry) SetEnrollment(e *Enrollment) {
	e.reg = r
	r.mu.Lock()
	r.enroll = e
	r.mu.Unlock()
}

// NewEnrollment loads the revocation list kept beside the CA in dir.
func NewEnrollment(ca *pki.CA, dir string) (*Enrollment, error) {
	e := &Enrollment{ca: ca, dir: dir, tokens: map[[sha256.Size]byte]time.Time{}, revoked: map[string]bool{}, now: time.Now}
	data, err := os.ReadFile(filepath.Join(dir, revokedFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		var serials []string
		if err := json.Unmarshal(data, &serials); err != nil {
			return nil, fmt.Errorf("%s: %w", revokedFile, err)
		}
		for _, s := range serials {
			e.revoked[s] = true
		}
	}
	return e, nil
}

// CAFingerprint is the CA certificate's SHA-256, what an agent pins.
func (e *Enrollment) CAFingerprint() string { return pki.Fingerprint(e.ca.Cert) }

// ClientTLS is the TLS configuration of calls to agents: servers verified
// against the system's roots and the CA (a certificate of the CA must not
// be revoked), client certificate from clientCert.
func (e *Enrollment) ClientTLS(clientCert *pki.Reloader) *tls.Config {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	roots.AddCert(e.ca.Cert)
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		RootCAs:              roots,
		NextProtos:           []string{"http/1.1"}, // the console's Upgrade is HTTP/1.1's
		GetClientCertificate: clientCert.GetClientCertificate,
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf := cs.PeerCertificates[0]
			if leaf.CheckSignatureFrom(e.ca.Cert) == nil && e.Revoked(leaf.SerialNumber.String()) {
				return revokedError{leaf.Subject.CommonName, leaf.SerialNumber.String()}
			}
			return nil
		},
	}
}

// revokedError refuses an agent whose certificate is revoked.
type revokedError struct{ name, serial string }

func (e revokedError) Error() string {
	return fmt.Sprintf("agent certificate %s (serial %s) is revoked", e.name, e.serial)
}

// tlsCause is why a call failed in its TLS handshake, in words for the
// compute's last_error, or "" for any other failure.
func tlsCause(err error) string {
	if r, ok := errors.AsType[revokedError](err); ok {
		return r.Error()
	}
	if cv, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return "the agent's certificate: " + cv.Err.Error()
	}
	if a, ok := errors.AsType[tls.AlertError](err); ok {
		return "the agent refused the controller's TLS: " + a.Error()
	}
	return ""
}

// Revoked reports whether a certificate serial (decimal) is revoked.
func (e *Enrollment) Revoked(serial string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.revoked[serial]
}

// Revoke revokes a certificate serial, on disk before it returns.
func (e *Enrollment) Revoke(serial string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.revoked[serial] {
		return nil
	}
	e.revoked[serial] = true
	list := make([]string, 0, len(e.revoked))
	for s := range e.revoked {
		list = append(list, s)
	}
	data, _ := json.Marshal(list)
	return atomicfile.Write(filepath.Join(e.dir, revokedFile), data, 0o600)
}

// JoinToken is a token an admin made for one agent to join.
type JoinToken struct {
	Token     string
	ExpiresAt time.Time
}

// NewToken makes a one-time join token valid for ttl (0: an hour).
func (e *Enrollment) NewToken(ttl time.Duration) (JoinToken, error) {
	if ttl == 0 {
		ttl = DefaultJoinTokenTTL
	}
	if ttl < time.Second || ttl > MaxJoinTokenTTL {
		return JoinToken{}, &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("A join token lasts 1 s to %v, not %v", MaxJoinTokenTTL, ttl)}
	}
	b := make([]byte, 32)
	rand.Read(b)
	tok := "labtap-join-" + base64.RawURLEncoding.EncodeToString(b)
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for h, exp := range e.tokens {
		if !now.Before(exp) {
			delete(e.tokens, h)
		}
	}
	if len(e.tokens) >= maxJoinTokens {
		return JoinToken{}, &project.Error{Kind: project.ErrConflict, Msg: fmt.Sprintf("%d join tokens are outstanding: use or let some expire first", maxJoinTokens)}
	}
	e.tokens[sha256.Sum256([]byte(tok))] = now.Add(ttl)
	return JoinToken{Token: tok, ExpiresAt: now.Add(ttl)}, nil
}

// redeem uses a token up: a second use, like an unknown or expired
// token, is refused.
func (e *Enrollment) redeem(tok string) error {
	h := sha256.Sum256([]byte(tok))
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.tokens[h]
	if !ok {
		return &project.Error{Kind: project.ErrForbidden, Msg: "Unknown or already used join token: ask an admin for a new one"}
	}
	delete(e.tokens, h)
	if !e.now().Before(exp) {
		return &project.Error{Kind: project.ErrForbidden, Msg: "Expired join token (it expired at " + exp.UTC().Format(time.RFC3339) + "): ask an admin for a new one"}
	}
	return nil
}

// JoinRequest is what a joining agent sends.
type JoinRequest struct {
	Token     string `json:"token"`
	CSR       string `json:"csr"` // PEM
	ComputeID string `json:"compute_id"`
	Name      string `json:"name"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
}

// JoinReply is the joined agent's certificate and the CA's.
type JoinReply struct {
	ComputeID   string `json:"compute_id"`
	Certificate string `json:"certificate"` // PEM
	CA          string `json:"ca"`          // PEM
}

// Join checks a joining agent's request, uses its token up, signs its
// certificate request for its compute id and host, and registers the
// compute, called over mutual TLS from then on. Nothing changes unless
// every check passes (the token is spent only by a request that is
// otherwise whole).
func (e *Enrollment) Join(ctx context.Context, req JoinRequest) (JoinReply, error) {
	if req.Name == "" {
		req.Name = req.ComputeID
	}
	c := Compute{ID: req.ComputeID, Name: req.Name, Protocol: "https", Host: req.Host, Port: req.Port}
	switch {
	case len(req.Token) == 0 || len(req.Token) > maxTokenLen:
		return JoinReply{}, &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("A join token is 1 to %d characters", maxTokenLen)}
	case len(req.CSR) == 0 || len(req.CSR) > maxCSRLen:
		return JoinReply{}, &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("A certificate request (csr) is PEM of 1 to %d bytes", maxCSRLen)}
	case c.ID == LocalID || c.ID == VMID || c.Name == "gns3vm":
		return JoinReply{}, &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("Compute id %q and name \"gns3vm\" are reserved", c.ID)}
	}
	if err := checkCompute(c); err != nil {
		return JoinReply{}, err
	}
	if err := e.reg.checkName(c.ID, c.Name); err != nil {
		return JoinReply{}, err
	}
	if e.reg.Exists(c.ID) {
		return JoinReply{}, &project.Error{Kind: project.ErrConflict, Msg: fmt.Sprintf("Compute %q exists: delete it first (which revokes its certificate) to join again", c.ID)}
	}
	var names pki.Names
	names.Add(c.Host)
	// Signed before the token is spent, so that a bad request spends
	// nothing; the certificate is only returned once the token is.
	certPEM, serial, err := e.ca.SignCSR([]byte(req.CSR), pki.Leaf{CommonName: c.ID, Names: names})
	if err != nil {
		return JoinReply{}, &project.Error{Kind: project.ErrInvalid, Msg: "Invalid certificate request: " + err.Error()}
	}
	if err := e.redeem(req.Token); err != nil {
		return JoinReply{}, err
	}
	c.CertSerial = serial.String()
	c.URL = agentURL(c)
	e.reg.put(c)
	if err := e.reg.store.save(e.reg.List); err != nil {
		e.reg.Remove(c.ID)
		return JoinReply{}, err
	}
	got, _ := e.reg.Get(c.ID)
	e.reg.onChange("compute.created", got)
	// The agent serves TLS once it has this reply: the health watch
	// connects then.
	return JoinReply{ComputeID: c.ID, Certificate: string(certPEM), CA: string(pki.EncodeCert(e.ca.Cert.Raw))}, nil
}

// revokeFor revokes the certificate of a removed compute, and closes the
// connections kept open to agents so that none outlives it.
func (e *Enrollment) revokeFor(c Compute) error {
	if c.CertSerial == "" {
		return nil
	}
	if err := e.Revoke(c.CertSerial); err != nil {
		return err
	}
	e.reg.Agents.client.closeIdle()
	e.reg.log.Info("agent certificate revoked", "compute", c.ID, "serial", c.CertSerial)
	return nil
}
