package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/pki"
	"github.com/labtap/labtap/internal/testenv"
)

// joinToken asks the controller for a one-time join token.
func (c *controller) joinToken() string {
	c.t.Helper()
	var tok struct {
		Token    string `json:"token"`
		CASHA256 string `json:"ca_sha256"`
	}
	c.call("POST", "/v3/computes/join-tokens", map[string]any{"ttl": 600}, 201, &tok)
	if tok.Token == "" || tok.CASHA256 == "" {
		c.t.Fatalf("join token reply %+v", tok)
	}
	return tok.Token
}

// startJoinedAgent runs an agent that joins c with token and the pinned
// CA fingerprint.
func startJoinedAgent(t *testing.T, c *controller, id, ip, token, caSHA string) *agentProc {
	t.Helper()
	return startJoinedAgentUnder(t, nil, c, id, ip, token, caSHA)
}

// startJoinedAgentUnder is startJoinedAgent as the last argument of wrap
// (e.g. ip netns exec NAME).
func startJoinedAgentUnder(t *testing.T, wrap []string, c *controller, id, ip, token, caSHA string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, id: id, listen: ip + ":0", data: t.TempDir(), wrap: wrap,
		env: []string{"LABTAP_JOIN_TOKEN=" + token}, args: []string{"--join", c.url, "--ca-sha256", caSHA}}
	a.start()
	t.Cleanup(func() {
		a.kill(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent %s log:\n%s", a.id, a.log.String())
		}
	})
	return a
}

// agentRefused runs an agent that must exit at start, and returns what
// it printed.
func agentRefused(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentBinary(t), append([]string{"--listen", "127.0.0.4:0", "--data-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("agent %v: %v, want a refusal at start:\n%s", args, err, out)
	}
	return string(out)
}

func TestJoinedAgentsCaptureACrossAgentLinkOverMutualTLSAndEachRefusalChangesNothing(t *testing.T) {
	testenv.RequireTools(t, "vpcs")
	c, pool := startTLSController(t, nil)
	caSHA := caLine.FindStringSubmatch(c.log.String())[1]
	computes := func() int {
		var list []map[string]any
		c.call("GET", "/v2/computes", nil, 200, &list)
		return len(list)
	}

	// A wrong fingerprint: the agent sends nothing (its token stays
	// good), and no compute appears.
	tok := c.joinToken()
	wrong := strings.Repeat("AB:", 31) + "AB"
	if out := agentRefused(t, []string{"LABTAP_JOIN_TOKEN=" + tok}, "--compute-id", "evil", "--join", c.url, "--ca-sha256", wrong); !strings.Contains(out, "no CA of SHA-256") {
		t.Errorf("a wrong fingerprint said:\n%s", out)
	}
	if n := computes(); n != 1 {
		t.Fatalf("%d computes after a refused join, want local only", n)
	}
	a1 := startJoinedAgent(t, c, "agent1", "127.0.0.2", tok, caSHA) // the same token: it was not spent
	a2 := startJoinedAgent(t, c, "agent2", "127.0.0.3", c.joinToken(), caSHA)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)
	for _, a := range []*agentProc{a1, a2} {
		if strings.Contains(a.log.String(), "PRIVATE KEY") || strings.Contains(a.log.String(), tok) {
			t.Errorf("agent %s logged its key or token", a.id)
		}
		entries, _ := os.ReadDir(filepath.Join(a.data, "tls"))
		for _, e := range entries {
			if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
				t.Errorf("agent %s: %s is %v, want 0600", a.id, e.Name(), fi.Mode().Perm())
			}
		}
	}

	// A replayed token is refused, with nothing registered.
	if out := agentRefused(t, []string{"LABTAP_JOIN_TOKEN=" + tok}, "--compute-id", "agent3", "--join", c.url, "--ca-sha256", caSHA); !strings.Contains(out, "already used join token") {
		t.Errorf("a replayed token said:\n%s", out)
	}
	if n := computes(); n != 3 {
		t.Fatalf("%d computes after a replayed token, want 3", n)
	}

	// The agents take calls from the controller's certificate only: not
	// in plain HTTP, not without a certificate, not from another agent's.
	resp, err := http.Get("http://" + a1.addr + "/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "https://") {
		t.Errorf("plain HTTP to an agent: %d %s", resp.StatusCode, body)
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := noCert.Get("https://" + a1.addr + "/v1/info"); err == nil {
		t.Error("an agent answered a client without a certificate")
	}
	other, err := tls.LoadX509KeyPair(filepath.Join(a2.data, "tls", "agent.crt"), filepath.Join(a2.data, "tls", "agent.key"))
	if err != nil {
		t.Fatal(err)
	}
	posing := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{other}}}}
	if _, err := posing.Get("https://" + a1.addr + "/v1/info"); err == nil {
		t.Error("agent1 answered agent2's certificate as if it were the controller")
	}

	// A link across the two agents, captured and streamed over HTTPS; a
	// console through the controller's WebSocket relay (wss, then mutual
	// TLS to the agent).
	lab := c.twoPCs("joined", "agent1", "agent2", "10.0.0.1", "10.0.0.2")
	for i, p := range lab.pcs {
		c.call("POST", lab.base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatalf("PC%d console: %v", i+1, err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	setAddresses(t, lab.pcs)
	linkPath := lab.base + "/links/" + lab.link.LinkID
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	resp, err = c.client.Get(c.url + linkPath + "/pcap")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("pcap stream over HTTPS: %d", resp.StatusCode)
	}
	got := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(resp.Body)
		got <- data
	}()
	if n := lab.pcs[0].ping(t, lab.pcs[1].ip, 3); n == 0 {
		t.Fatal("no ping across the joined agents")
	}
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, HandshakeTimeout: 10 * time.Second}
	ws, wresp, err := d.Dial("wss"+strings.TrimPrefix(c.url, "https")+lab.base+"/nodes/"+lab.pcs[1].node.NodeID+"/console/ws", nil)
	if err != nil {
		t.Fatalf("console over wss: %v %v", err, wresp)
	}
	ws.WriteMessage(websocket.TextMessage, []byte("show ip\r"))
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var console strings.Builder
	for !strings.Contains(console.String(), "10.0.0.2") {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("console over wss: %v after %q", err, console.String())
		}
		console.Write(msg)
	}
	ws.Close()
	c.call("POST", linkPath+"/stop_capture", map[string]any{}, 201, nil)
	var stream []byte
	select {
	case stream = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the HTTPS stream did not end with the capture")
	}
	if len(stream) < 24+3*98 { // the header and at least the 3 echo requests
		t.Errorf("HTTPS stream of %d bytes", len(stream))
	}
	// The whole-project capture follows the link's capture on agent1
	// over the same mutual TLS.
	var pc struct {
		Path string `json:"capture_file_path"`
	}
	c.call("POST", lab.base+"/start_capture", map[string]any{}, 201, nil)
	lab.pcs[1].ping(t, lab.pcs[0].ip, 2)
	c.call("POST", lab.base+"/stop_capture", nil, 201, &pc)
	if testenv.HaveTool(t, "tshark") {
		if n := tsharkCount(t, pc.Path, "icmp"); n < 2 {
			t.Errorf("project capture %s holds %d ICMP frames, want the ping's", pc.Path, n)
		}
	} else if _, err := os.Stat(pc.Path); err != nil {
		t.Error(err)
	}

	// Deleting agent1 revokes its certificate: added back at once, it is
	// refused, and stays disconnected.
	c.call("DELETE", lab.base, nil, 204, nil)
	c.call("DELETE", "/v2/computes/agent1", nil, 204, nil)
	host, port, _ := net.SplitHostPort(a1.addr)
	c.call("POST", "/v2/computes", map[string]any{"compute_id": "agent1", "protocol": "https", "host": host, "port": atoi(t, port)}, 201, nil)
	cp := c.waitCompute("agent1", false, 5*time.Second)
	var full map[string]any
	c.call("GET", "/v2/computes/agent1", nil, 200, &full)
	if msg, _ := full["last_error"].(string); !strings.Contains(msg, "revoked") {
		t.Errorf("revoked agent: %+v last_error %q, want it to say revoked", cp, msg)
	}
	if _, err := os.Stat(filepath.Join(c.data, "tls", "revoked.json")); err != nil {
		t.Error(err)
	}

	// An expired certificate of the same CA (one the operator gave the
	// agent) is refused too.
	ca, err := pki.LoadOrCreateCA(filepath.Join(c.data, "tls"), "")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, csr, _ := pki.NewKeyAndCSR("agent5")
	var names pki.Names
	names.Add("127.0.0.5")
	certPEM, _, err := ca.SignCSR(csr, pki.Leaf{CommonName: "agent5", Names: names, NotBefore: time.Now().Add(-48 * time.Hour), Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"a.crt": certPEM, "a.key": keyPEM, "ca.crt": pki.EncodeCert(ca.Cert.Raw)} {
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	a5 := &agentProc{t: t, id: "agent5", listen: "127.0.0.5:0", data: t.TempDir(),
		args: []string{"--tls-cert", filepath.Join(dir, "a.crt"), "--tls-key", filepath.Join(dir, "a.key"), "--tls-ca", filepath.Join(dir, "ca.crt")}}
	a5.start()
	t.Cleanup(func() { a5.kill(syscall.SIGTERM) })
	host, port, _ = net.SplitHostPort(a5.addr)
	c.call("POST", "/v2/computes", map[string]any{"compute_id": "agent5", "protocol": "https", "host": host, "port": atoi(t, port)}, 201, nil)
	c.call("GET", "/v2/computes/agent5", nil, 200, &full)
	if msg, _ := full["last_error"].(string); full["connected"] != false || !strings.Contains(msg, "expired") {
		t.Errorf("agent with an expired certificate: connected %v, last_error %q", full["connected"], msg)
	}

	// A restarted controller calls its joined agents as before, and still
	// refuses the revoked one.
	c.stop()
	c2 := startControllerWith(t, c.data, nil, "--tls", "auto")
	c2.url, c2.client = "https://"+strings.TrimPrefix(c2.url, "http://"), c.client
	c2.waitCompute("agent2", true, 20*time.Second)
	c2.call("GET", "/v2/computes/agent1", nil, 200, &full)
	if msg, _ := full["last_error"].(string); full["connected"] != false || !strings.Contains(msg, "revoked") {
		t.Errorf("after a restart, the revoked agent: connected %v, last_error %q", full["connected"], msg)
	}
}
