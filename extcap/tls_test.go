package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// tlsServer serves /v2/projects over TLS with a certificate of a CA of
// its own (as --tls auto does), sending the CA in its chain; it returns
// the server and the CA's fingerprint.
func tlsServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ctl"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("[]"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(caDER)
	return srv, strings.ToUpper(hex.EncodeToString(sum[:]))
}

func TestAnHTTPSServerOfItsOwnCAIsTrustedByItsFingerprintOnly(t *testing.T) {
	srv, pin := tlsServer(t)
	colons := ""
	for i := 0; i < len(pin); i += 2 {
		colons += pin[i:i+2] + ":"
	}
	wrong := strings.Repeat("AB", 32)
	for _, c := range []struct {
		ca, want string
	}{
		{pin, ""},
		{strings.TrimSuffix(colons, ":"), ""}, // as the controller logs it
		{wrong, "holds no CA of the fingerprint"},
		{"", "certificate"}, // the system's roots do not know it
	} {
		cl, err := newClient(server{URL: srv.URL, CASHA256: c.ca})
		if err != nil {
			t.Fatal(err)
		}
		var out []projectJSON
		err = cl.call(t.Context(), "GET", "/v2/projects", nil, &out)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("ca_sha256 %q: %v, want %q", c.ca, err, c.want)
		}
	}
	if _, err := newClient(server{URL: srv.URL, CASHA256: "12:34"}); err == nil {
		t.Error("a short fingerprint was taken")
	}
}
