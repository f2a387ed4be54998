package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/labtap/labtap/internal/pki"
)

// BenchmarkGetLinkHTTPS is BenchmarkGetLink over TLS as the controller
// serves it (--tls auto's certificate, pki.Listen), on one kept-alive
// connection: what TLS adds to a request once the handshake is paid.
func BenchmarkGetLinkHTTPS(b *testing.B) {
	ca, err := pki.LoadOrCreateCA(filepath.Join(b.TempDir(), "tls"), "bench CA")
	if err != nil {
		b.Fatal(err)
	}
	var names pki.Names
	names.Add("127.0.0.1")
	certFile, keyFile, err := ca.EnsureServerCert(names)
	if err != nil {
		b.Fatal(err)
	}
	r, err := pki.NewReloader(certFile, keyFile)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	app, _ := benchServerOver(b, nil, func(ln net.Listener) (net.Listener, string, *http.Client) {
		return pki.Listen(ln, pki.ServerConfig(r)), "https",
			&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	})
	pid, lid := benchProject(b, app, 1)
	b.ReportAllocs()
	for b.Loop() {
		benchDo(b, app, "GET", "/v2/projects/"+pid+"/links/"+lid, "", 200)
	}
}
