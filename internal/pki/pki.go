// Package pki is labtap's private certificate authority and its TLS
// plumbing: a CA kept in a directory (made on first use), the server
// certificate it issues for the controller, client and server
// certificates it signs for agents from their requests (CSRs), the
// SHA-256 fingerprints users compare, a certificate that is read again when
// its file changes, and a listener that speaks TLS and answers a plain
// HTTP request with a clear refusal.
//
// Keys are ECDSA P-256. Every key and certificate file is written 0600,
// atomically.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/labtap/labtap/internal/atomicfile"
)

// File names in a CA's directory.
const (
	CACertFile     = "ca.crt"
	caKeyFile      = "ca.key"
	ServerCertFile = "server.crt" // the server certificate, then the CA's: the chain clients get
	ServerKeyFile  = "server.key"
	ClientCertFile = "controller-client.crt" // the controller's certificate as a client of its agents
	ClientKeyFile  = "controller-client.key"
)

// ControllerName is the common name of the controller's client
// certificate: agents take calls from that name only, so an agent's own
// certificate (from the same CA) cannot pose as the controller.
const ControllerName = "labtap-controller"

// Validity of what the CA issues.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	leafValidity   = 2 * 365 * 24 * time.Hour
	renewBefore    = 30 * 24 * time.Hour
	clockSkewSlack = 5 * time.Minute
)

// CA is a certificate authority whose key is on disk.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	dir  string
}

// LoadOrCreateCA reads the CA in dir, or makes one there (the directory
// made 0700, the files 0600) when there is none.
func LoadOrCreateCA(dir, name string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if errors.Is(err, os.ErrNotExist) {
		return createCA(dir, name)
	}
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	pair, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA in %s: %w", dir, err)
	}
	return &CA{Cert: pair.cert, key: pair.key, dir: dir}, nil
}

func createCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-clockSkewSlack),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is never left behind.
	if err := atomicfile.Write(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, CACertFile), EncodeCert(der), 0o600); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, dir: dir}, nil
}

// Names are the DNS names and IP addresses a server certificate is for.
type Names struct {
	DNS []string
	IPs []net.IP
}

// Add adds a host (a name or an address) unless it is there already or
// is a wildcard address.
func (n *Names) Add(host string) {
	host = strings.Trim(host, "[]")
	if host == "" {
		return
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() || slices.ContainsFunc(n.IPs, ip.Equal) {
			return
		}
		n.IPs = append(n.IPs, ip)
		return
	}
	if !slices.Contains(n.DNS, strings.ToLower(host)) {
		n.DNS = append(n.DNS, strings.ToLower(host))
	}
}

// covers reports whether cert is valid for every one of n.
func (n Names) covers(cert *x509.Certificate) bool {
	for _, d := range n.DNS {
		if !slices.Contains(cert.DNSNames, d) {
			return false
		}
	}
	for _, ip := range n.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// EnsureServerCert makes sure the CA's directory holds a server
// certificate for names (with its key), issued by the CA and not near its
// end; it issues a new one otherwise. It returns the certificate and key
// files' paths.
func (ca *CA) EnsureServerCert(names Names) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(ca.dir, ServerCertFile), filepath.Join(ca.dir, ServerKeyFile)
	if pair, err := readPair(certFile, keyFile); err == nil && names.covers(pair.cert) && ca.issued(pair.cert) {
		return certFile, keyFile, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	cn := "labtap"
	if len(names.DNS) > 0 {
		cn = names.DNS[0]
	}
	der, err := ca.sign(key.Public(), pkix.Name{CommonName: cn}, names, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leafValidity)
	if err != nil {
		return "", "", err
	}
	if err := ca.writePair(certFile, keyFile, der, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// EnsureClientCert makes sure the CA's directory holds the controller's
// client certificate (common name ControllerName), and returns it.
func (ca *CA) EnsureClientCert() (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(ca.dir, ClientCertFile), filepath.Join(ca.dir, ClientKeyFile)
	if pair, err := readPair(certFile, keyFile); err == nil && ca.issued(pair.cert) {
		return certFile, keyFile, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := ca.sign(key.Public(), pkix.Name{CommonName: ControllerName}, Names{}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, leafValidity)
	if err != nil {
		return "", "", err
	}
	if err := ca.writePair(certFile, keyFile, der, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// issued reports whether cert is this CA's and far enough from its end.
func (ca *CA) issued(cert *x509.Certificate) bool {
	if cert.CheckSignatureFrom(ca.Cert) != nil {
		return false
	}
	return time.Now().Add(renewBefore).Before(cert.NotAfter)
}

// writePair writes a certificate (followed by the CA's, so a server sends
// the chain) and its key, 0600.
func (ca *CA) writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certFile, append(EncodeCert(der), EncodeCert(ca.Cert.Raw)...), 0o600)
}

// Leaf is what SignCSR issues.
type Leaf struct {
	// CommonName is the subject's name (an agent's compute id).
	CommonName string
	// Names are the server names the certificate is for (an agent's
	// advertised host).
	Names Names
	// Validity is how long it is valid; 0 means two years.
	Validity time.Duration
	// NotBefore, when set, is its start (tests issue expired ones).
	NotBefore time.Time
}

// SignCSR checks a PEM certificate request's signature and issues a
// server certificate for its key, as leaf says (the request's own names
// are ignored). It returns the certificate, PEM, and its serial.
func (ca *CA) SignCSR(csrPEM []byte, leaf Leaf) (certPEM []byte, serialNumber *big.Int, err error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, nil, errors.New("not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	if leaf.Validity == 0 {
		leaf.Validity = leafValidity
	}
	der, err := ca.signAt(csr.PublicKey, pkix.Name{CommonName: leaf.CommonName}, leaf.Names,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.NotBefore, leaf.Validity)
	if err != nil {
		return nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return EncodeCert(der), cert.SerialNumber, nil
}

func (ca *CA) sign(pub crypto.PublicKey, subject pkix.Name, names Names, usage []x509.ExtKeyUsage, validity time.Duration) ([]byte, error) {
	return ca.signAt(pub, subject, names, usage, time.Time{}, validity)
}

func (ca *CA) signAt(pub crypto.PublicKey, subject pkix.Name, names Names, usage []x509.ExtKeyUsage, notBefore time.Time, validity time.Duration) ([]byte, error) {
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-clockSkewSlack)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     names.DNS,
		IPAddresses:  names.IPs,
	}
	return x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.key)
}

// NewKeyAndCSR makes a key and a certificate request for it, both PEM.
func NewKeyAndCSR(commonName string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return keyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// Fingerprint is the SHA-256 of a certificate's DER bytes, in hex pairs
// separated by colons (as browsers and the GNS3 GUI show it).
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}

// ParseFingerprint reads a SHA-256 fingerprint as hex, with or without
// colons, and with an optional "sha256:" prefix.
func ParseFingerprint(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:")
	s = strings.ReplaceAll(s, ":", "")
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("a SHA-256 fingerprint is 64 hex digits (colons allowed), not %.80q", s)
	}
	return b, nil
}

// MatchesFingerprint reports whether cert's SHA-256 is want.
func MatchesFingerprint(cert *x509.Certificate, want []byte) bool {
	sum := sha256.Sum256(cert.Raw)
	return bytes.Equal(sum[:], want)
}

// EncodeCert is a certificate's DER bytes as PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ParseCerts reads every certificate of a PEM bundle.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

type pair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func readPair(certFile, keyFile string) (pair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return pair{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return pair{}, err
	}
	return parsePair(certPEM, keyPEM)
}

func parsePair(certPEM, keyPEM []byte) (pair, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return pair{}, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return pair{}, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return pair{}, fmt.Errorf("key: %w", err)
		}
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return pair{}, errors.New("key cannot sign")
	}
	return pair{cert: certs[0], key: signer}, nil
}
