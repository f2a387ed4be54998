package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// A server started with --tls auto serves a certificate of its own CA,
// which no system trusts: the extcap trusts it by its SHA-256 fingerprint
// (ca_sha256 in the configuration file, --ca-sha256, LABTAP_CA_SHA256;
// the controller logs it), as a joining agent does. Without one, the
// system's roots decide.

// parseFingerprint reads a SHA-256 fingerprint as hex, with or without
// colons.
func parseFingerprint(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("CA fingerprint %q: want the 64 hex digits of a SHA-256 (colons allowed)", bounded(s, 120))
	}
	return b, nil
}

// pinnedTransport trusts, for host, the chains whose CA has the SHA-256
// pin: the server must send that CA in its chain, and its certificate
// must verify against it for host.
func pinnedTransport(pin []byte, host string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // VerifyPeerCertificate below does the whole check
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, 0, len(raw))
			for _, der := range raw {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				certs = append(certs, c)
			}
			if len(certs) == 0 {
				return errors.New("the server sent no certificate")
			}
			roots := x509.NewCertPool()
			found := false
			for _, c := range certs {
				sum := sha256.Sum256(c.Raw)
				if bytes.Equal(sum[:], pin) {
					roots.AddCert(c)
					found = true
				}
			}
			if !found {
				return errors.New("the server's certificate chain holds no CA of the fingerprint ca_sha256 names")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host})
			return err
		},
	}
	return t
}
