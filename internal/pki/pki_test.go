package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/pki"
)

func newCA(t *testing.T) (*pki.CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := pki.LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func TestTheCAIsMadeOnceWithFilesOnlyItsOwnerReads(t *testing.T) {
	ca, dir := newCA(t)
	var names pki.Names
	names.Add("localhost")
	names.Add("127.0.0.1")
	if _, _, err := ca.EnsureServerCert(names); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.EnsureClientCert(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		t.Errorf("%d files in %s, want 6 (CA, server and client pairs)", len(entries), dir)
	}
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("%s is %v, want 0700", dir, fi.Mode().Perm())
	}
	again, err := pki.LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	if pki.Fingerprint(again.Cert) != pki.Fingerprint(ca.Cert) {
		t.Error("a second start made a new CA: every agent's pinned fingerprint would break")
	}
}

func TestTheServerCertificateIsIssuedAgainOnlyForANewName(t *testing.T) {
	ca, _ := newCA(t)
	var names pki.Names
	names.Add("localhost")
	names.Add("127.0.0.1")
	certFile, _, err := ca.EnsureServerCert(names)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(certFile)
	if _, _, err := ca.EnsureServerCert(names); err != nil {
		t.Fatal(err)
	}
	if same, _ := os.ReadFile(certFile); string(same) != string(first) {
		t.Error("the same names issued a new certificate")
	}
	names.Add("ctl.lab.example")
	if _, _, err := ca.EnsureServerCert(names); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(certFile)
	certs, err := pki.ParseCerts(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 2 || !certs[1].Equal(ca.Cert) {
		t.Fatalf("server.crt holds %d certificates, want the server's then the CA's", len(certs))
	}
	if err := certs[0].VerifyHostname("ctl.lab.example"); err != nil {
		t.Error(err)
	}
	if err := certs[0].VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
}

func TestSignCSRIssuesAServerCertificateForTheGivenNameOnly(t *testing.T) {
	ca, _ := newCA(t)
	_, csr, err := pki.NewKeyAndCSR("asked-for")
	if err != nil {
		t.Fatal(err)
	}
	var names pki.Names
	names.Add("10.0.0.7")
	certPEM, serial, err := ca.SignCSR(csr, pki.Leaf{CommonName: "agent-1", Names: names})
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCerts(certPEM)
	c := certs[0]
	if c.Subject.CommonName != "agent-1" || c.SerialNumber.Cmp(serial) != 0 {
		t.Errorf("issued %q serial %v, want agent-1 serial %v", c.Subject.CommonName, c.SerialNumber, serial)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.7"}); err != nil {
		t.Errorf("as a server: %v", err)
	}
	// An agent's certificate cannot act as a client (the controller).
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("an agent's certificate verifies as a client certificate")
	}
	if _, _, err := ca.SignCSR([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), pki.Leaf{CommonName: "x"}); err == nil {
		t.Error("a broken request was signed")
	}
}

func TestFingerprintsParseWithOrWithoutColons(t *testing.T) {
	ca, _ := newCA(t)
	fp := pki.Fingerprint(ca.Cert)
	for _, s := range []string{fp, strings.ReplaceAll(fp, ":", ""), "sha256:" + strings.ToLower(fp)} {
		b, err := pki.ParseFingerprint(s)
		if err != nil || !pki.MatchesFingerprint(ca.Cert, b) {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "abcd", strings.Repeat("zz", 32)} {
		if _, err := pki.ParseFingerprint(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

// serveTLS serves a 200 "ok" over pki.Listen with the server certificate
// of ca, and returns the address.
func serveTLS(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	r, err := pki.NewReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(pki.Listen(ln, pki.ServerConfig(r)))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func trusting(ca *pki.CA) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func TestAPlainHTTPRequestOnTheTLSPortIsRefusedInWords(t *testing.T) {
	ca, _ := newCA(t)
	var names pki.Names
	names.Add("127.0.0.1")
	certFile, keyFile, _ := ca.EnsureServerCert(names)
	addr := serveTLS(t, certFile, keyFile)

	resp, err := http.Get("http://" + addr + "/v2/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "https://") {
		t.Errorf("plain HTTP got %d %s, want 400 saying https://", resp.StatusCode, body)
	}
	resp, err = trusting(ca).Get("https://" + addr + "/v2/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("HTTPS got %d %+v", resp.StatusCode, resp.TLS)
	}
	// TLS 1.1 and older are refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get("https://" + addr + "/"); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
}

func TestAChangedCertificateFileIsServedWithoutARestart(t *testing.T) {
	ca, dir := newCA(t)
	var names pki.Names
	names.Add("127.0.0.1")
	certFile, keyFile, _ := ca.EnsureServerCert(names)
	addr := serveTLS(t, certFile, keyFile)
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return pki.Fingerprint(c.ConnectionState().PeerCertificates[0])
	}
	before := served()
	// A renewal: a new pair for one more name, written over the files.
	names.Add("renewed.example")
	time.Sleep(10 * time.Millisecond) // a distinct modification time
	if _, _, err := ca.EnsureServerCert(names); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, pki.ServerCertFile))
	certs, _ := pki.ParseCerts(data)
	if after := served(); after == before || after != pki.Fingerprint(certs[0]) {
		t.Errorf("served %s after the renewal, want the new %s (was %s)", after, pki.Fingerprint(certs[0]), before)
	}
}

func TestAPinnedClientTrustsOnlyTheCAOfItsFingerprint(t *testing.T) {
	ca, _ := newCA(t)
	other, _ := newCA(t)
	var names pki.Names
	names.Add("127.0.0.1")
	certFile, keyFile, _ := ca.EnsureServerCert(names)
	addr := serveTLS(t, certFile, keyFile)
	get := func(pin *x509.Certificate, serverName string) error {
		sum, _ := pki.ParseFingerprint(pki.Fingerprint(pin))
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.PinnedClientConfig(sum, serverName)}}
		resp, err := c.Get("https://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(ca.Cert, "127.0.0.1"); err != nil {
		t.Errorf("the right fingerprint: %v", err)
	}
	if err := get(other.Cert, "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "no CA of SHA-256") {
		t.Errorf("another CA's fingerprint: %v", err)
	}
	if err := get(ca.Cert, "elsewhere.example"); err == nil {
		t.Error("a certificate for another name was trusted")
	}
}

func TestAMutualServerTakesOnlyTheNamedClientOfItsCA(t *testing.T) {
	ca, dir := newCA(t)
	var names pki.Names
	names.Add("127.0.0.1")
	certFile, keyFile, _ := ca.EnsureServerCert(names)
	clientCert, clientKey, _ := ca.EnsureClientCert()
	r, _ := pki.NewReloader(certFile, keyFile)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(pki.Listen(ln, pki.MutualServerConfig(r, ca.Cert, pki.ControllerName)))
	t.Cleanup(func() { srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	get := func(certs ...tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		resp, err := c.Get("https://" + ln.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	controller, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(controller); err != nil {
		t.Errorf("the controller's certificate: %v", err)
	}
	if err := get(); err == nil {
		t.Error("no client certificate was taken")
	}
	// An agent's certificate of the same CA (a server certificate for
	// its own name) cannot pose as the controller.
	agentKey, csr, _ := pki.NewKeyAndCSR("agent")
	agentPEM, _, _ := ca.SignCSR(csr, pki.Leaf{CommonName: pki.ControllerName, Names: names})
	os.WriteFile(filepath.Join(dir, "a.crt"), agentPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "a.key"), agentKey, 0o600)
	agent, err := tls.LoadX509KeyPair(filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := get(agent); err == nil {
		t.Error("an agent's certificate, even named as the controller, was taken")
	}
}
