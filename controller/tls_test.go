package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/labtap/labtap/internal/pki"
)

var (
	certLine = regexp.MustCompile(`certificate_sha256=(\S+)`)
	caLine   = regexp.MustCompile(`ca_sha256=(\S+)`)
)

// startTLSController runs a controller with --tls auto (and args) and
// returns it with an HTTPS client that trusts its CA (read from its data
// directory, as an operator would copy it).
func startTLSController(t *testing.T, env []string, args ...string) (*controller, *x509.CertPool) {
	t.Helper()
	return startTLSControllerIn(t, t.TempDir(), env, args...)
}

// startTLSControllerIn is startTLSController on a given data directory.
func startTLSControllerIn(t *testing.T, dataDir string, env []string, args ...string) (*controller, *x509.CertPool) {
	t.Helper()
	c := startControllerWith(t, dataDir, env, append([]string{"--tls", "auto"}, args...)...)
	c.url = "https://" + strings.TrimPrefix(c.url, "http://")
	data, err := os.ReadFile(filepath.Join(c.data, "tls", pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("ca.crt holds no certificate")
	}
	c.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return c, pool
}

func TestTLSAutoServesTheGUIsRequestsOverHTTPSAndRefusesPlainHTTP(t *testing.T) {
	c, pool := startTLSController(t, []string{"LABTAP_PASSWORD=s3cret"}, "--user", "admin")
	c.user, c.password = "admin", "s3cret"
	addr := strings.TrimPrefix(c.url, "https://")

	// The fingerprint logged at start is the certificate served.
	m := certLine.FindStringSubmatch(c.log.String())
	if m == nil || caLine.FindStringSubmatch(c.log.String()) == nil {
		t.Fatalf("no certificate_sha256 and ca_sha256 in the start log:\n%s", c.log.String())
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("the certificate is not valid for the listen address: %v", err)
	}
	if got := pki.Fingerprint(conn.ConnectionState().PeerCertificates[0]); got != m[1] {
		t.Errorf("served certificate %s, logged %s", got, m[1])
	}

	// The GNS3 GUI (Qt) keeps one connection alive and sends Basic on
	// each request.
	rd := bufio.NewReader(conn)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:s3cret"))
	for _, path := range []string{"/v2/version", "/v2/computes", "/v2/projects"} {
		io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nUser-Agent: GNS3 QT Client v2.2.60\r\nAuthorization: "+auth+"\r\nConnection: keep-alive\r\n\r\n")
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("%s on the kept-alive TLS connection: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d %s", path, resp.StatusCode, body)
		}
		if path == "/v2/computes" && !strings.Contains(string(body), `"protocol":"https"`) {
			t.Errorf("compute local not reported as https: %s", body)
		}
	}
	conn.Close()

	// A plain HTTP client is told what to do, and nothing happens.
	resp, err := http.Post("http://"+addr+"/v2/projects", "application/json", strings.NewReader(`{"name":"in-clear"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "https://") {
		t.Errorf("plain HTTP got %d %s, want 400 naming https://", resp.StatusCode, body)
	}
	var projects []map[string]any
	c.call("GET", "/v2/projects", nil, 200, &projects)
	if len(projects) != 0 {
		t.Errorf("the plain request made a project: %v", projects)
	}

	// A browser page of the controller's own https origin may change
	// state and open the notification WebSocket (wss).
	req, _ := http.NewRequest("POST", c.url+"/v2/projects", strings.NewReader(`{"name":"from-page"}`))
	req.Header.Set("Origin", c.url)
	req.SetBasicAuth("admin", "s3cret")
	resp, err = c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("POST from the https page = %d %s", resp.StatusCode, body)
	}
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, HandshakeTimeout: 10 * time.Second}
	h := http.Header{"Origin": {c.url}, "Authorization": {auth}}
	ws, wresp, err := d.Dial("wss://"+addr+"/v2/notifications/ws", h)
	if err != nil {
		t.Fatalf("wss notifications: %v %v", err, wresp)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.Contains(string(msg), "ping") {
		t.Errorf("first notification %q, %v; want a ping", msg, err)
	}
	ws.Close()

	// Keys stay private: 0600, never in the log.
	entries, _ := os.ReadDir(filepath.Join(c.data, "tls"))
	for _, e := range entries {
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	if strings.Contains(c.log.String(), "PRIVATE KEY") {
		t.Error("a private key is in the log")
	}
}

func TestASharedSecretAgentStillRegistersWithATLSControllerAndIsWarnedItIsDeprecated(t *testing.T) {
	const secret = "tls-deprecated-secret"
	c, _ := startTLSController(t, []string{"LABTAP_SECRET=" + secret})
	caSHA := caLine.FindStringSubmatch(c.log.String())[1]
	a := &agentProc{t: t, id: "old1", listen: "127.0.0.2:0", data: t.TempDir(), env: []string{"LABTAP_SECRET=" + secret},
		ctl: c.url, args: []string{"--ca-sha256", caSHA}}
	a.start()
	t.Cleanup(func() {
		a.kill(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log.String())
		}
	})
	c.waitCompute("old1", true, 20*time.Second)
	for who, log := range map[string]string{"controller": c.log.String(), "agent": a.log.String()} {
		if !strings.Contains(log, "LABTAP_SECRET is deprecated") {
			t.Errorf("the %s did not warn that LABTAP_SECRET is deprecated", who)
		}
	}
}
