package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/web"
)

const (
	secUser     = "admin"
	secPassword = "s3cret-pw"
	foreign     = "http://evil.example"
	// unknownNode is a node id no project has.
	unknownNode = "99999999-9999-4999-8999-999999999999"
)

// securedServer is a server with Basic authentication on, listening on a
// loopback port; it returns the server and its address.
func securedServer(t *testing.T, configure func(*api.Config)) (*server, string) {
	t.Helper()
	s := newServerConfig(t, nil, func(c *api.Config) {
		c.User, c.Password = secUser, secPassword
		if configure != nil {
			configure(c)
		}
	})
	return s, s.listen(t)
}

// wsDial opens a WebSocket to addr's path from the loopback address src,
// with header; it returns the handshake's reply, and the connection when
// it was upgraded (the test closes it).
func wsDial(t *testing.T, src, addr, path string, header http.Header) (*http.Response, []byte, *websocket.Conn) {
	t.Helper()
	d := websocket.Dialer{
		HandshakeTimeout: 20 * time.Second,
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
	}
	conn, resp, err := d.Dial("ws://"+addr+path, header)
	if conn != nil {
		t.Cleanup(func() { conn.Close() })
		return resp, nil, conn
	}
	if resp == nil {
		t.Fatalf("WebSocket %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, body, nil
}

func basicHeader(user, password string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}}
}

// The console WebSocket (GNS3 exempts it) answers 401 without
// credentials, the same 401 for a node that exists and for one that does
// not, and only then looks the node up.
func TestSecurityConsoleWebSocketNeedsCredentials(t *testing.T) {
	t.Parallel()
	s, addr := securedServer(t, nil)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	nid := s.must("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, rNodes).body["node_id"].(string)
	console := func(node string) string { return "/v2/projects/" + pid + "/nodes/" + node + "/console/ws" }

	var first *http.Response
	var firstBody []byte
	for _, node := range []string{nid, unknownNode} {
		for name, h := range map[string]http.Header{"no credentials": nil, "wrong password": basicHeader(secUser, "nope")} {
			resp, body, conn := wsDial(t, "127.0.0.1", addr, console(node), h)
			if conn != nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("node %s, %s: %d %q, want 401 and no upgrade", node, name, resp.StatusCode, body)
			}
			if resp.Header.Get("WWW-Authenticate") != `Basic realm="GNS3 server"` || len(body) != 0 {
				t.Fatalf("node %s, %s: WWW-Authenticate %q, body %q", node, name, resp.Header.Get("WWW-Authenticate"), body)
			}
			if first == nil {
				first, firstBody = resp, body
				continue
			}
			// Nothing tells an existing node from another.
			for _, k := range []string{"Content-Type", "Content-Length", "X-Route", "Connection"} {
				if resp.Header.Get(k) != first.Header.Get(k) || !bytes.Equal(body, firstBody) {
					t.Fatalf("node %s, %s: %s %q, body %q; first reply %q, %q", node, name, k, resp.Header.Get(k), body, first.Header.Get(k), firstBody)
				}
			}
		}
	}
	// With them, the route runs: this node is stopped.
	resp, body, conn := wsDial(t, "127.0.0.1", addr, console(nid), basicHeader(secUser, secPassword))
	if conn != nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("right credentials, stopped node: %d %q, want 409", resp.StatusCode, body)
	}
}

// An address throttled for failed authentications waits on the WebSocket
// routes too, even with the right credentials.
func TestSecurityThrottledAddressWaitsOnWebSocketRoutes(t *testing.T) {
	t.Parallel()
	s, addr := securedServer(t, nil)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	attacker := clientFrom("127.0.0.3")
	for i := range 10 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v2/version", nil)
		req.SetBasicAuth(secUser, "guess"+string(rune('a'+i)))
		resp, err := attacker.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	for _, path := range []string{
		"/v2/projects/" + pid + "/nodes/" + unknownNode + "/console/ws",
		"/v2/notifications/ws",
		"/v2/projects/" + pid + "/notifications/ws",
	} {
		resp, body, conn := wsDial(t, "127.0.0.3", addr, path, basicHeader(secUser, secPassword))
		if conn != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s from a throttled address: %d %q, want 429 with Retry-After", path, resp.StatusCode, body)
		}
	}
	// Another address is not held back.
	if resp, _, conn := wsDial(t, "127.0.0.1", addr, "/v2/notifications/ws", basicHeader(secUser, secPassword)); conn == nil {
		t.Fatalf("another address: %d, want 101", resp.StatusCode)
	}
}

// A page of another origin cannot change anything through a browser that
// visits it, authentication on or off: a state change or WebSocket whose
// Origin is not the server's own (or an allowed one) is 403 before any
// handler runs; requests without Origin (the GNS3 GUI, gns3fy, curl) are
// not affected.
func TestSecurityForeignOriginsAreRefused(t *testing.T) {
	t.Parallel()
	const allowed = "https://webui.example:8443"
	s := newServerConfig(t, nil, func(c *api.Config) { c.AllowedOrigins = []string{allowed} })
	addr := s.listen(t)
	own := "http://" + addr
	send := func(method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, own+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "text/plain") // what a form or fetch sends without a preflight
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	projects := func(t *testing.T) int {
		t.Helper()
		return len(s.mustT(t, "GET", "/v2/projects", nil, 200, rProjects).list)
	}

	refused := []struct {
		name   string
		header map[string]string
	}{
		{"a foreign origin", map[string]string{"Origin": foreign}},
		{"a foreign port", map[string]string{"Origin": "http://" + strings.Replace(addr, ":", ":1", 1)}},
		{"another scheme", map[string]string{"Origin": "https://" + addr}},
		{"an opaque origin", map[string]string{"Origin": "null"}},
		{"cross-site without Origin", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"a foreign origin that says same-origin", map[string]string{"Origin": foreign, "Sec-Fetch-Site": "same-origin"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send("POST", "/v2/projects", `{"name": "csrf"}`, tt.header)
			if status != http.StatusForbidden || !strings.Contains(body, `"status":403`) {
				t.Fatalf("POST: %d %s, want a 403 JSON error", status, body)
			}
			if n := projects(t); n != 0 {
				t.Fatalf("the refused POST created a project (%d now)", n)
			}
		})
	}
	// PUT and DELETE are refused too, and change nothing.
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "mine"}, 201, rProjects).body["project_id"].(string)
	if status, body := send("PUT", "/v2/projects/"+pid, `{"name": "renamed"}`, map[string]string{"Origin": foreign}); status != 403 {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if status, body := send("DELETE", "/v2/projects/"+pid, "", map[string]string{"Origin": foreign}); status != 403 {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if p := s.must("GET", "/v2/projects/"+pid, nil, 200, rProject); p.body["name"] != "mine" {
		t.Fatalf("after refused PUT and DELETE: %s", p.raw)
	}

	port := addr[strings.LastIndexByte(addr, ':')+1:]
	allowedRequests := []struct {
		name               string
		origin, site, host string // host: the Host header, when not addr
	}{
		{"no Origin (the GNS3 GUI, gns3fy, curl)", "", "", ""},
		{"the server's own page", own, "same-origin", ""},
		{"its own page, no Sec-Fetch-Site (an old browser)", own, "", ""},
		{"its own page by another name (Host says which)", "http://localhost:" + port, "same-origin", "localhost:" + port},
		{"an allowed origin", allowed, "cross-site", ""},
	}
	for i, tt := range allowedRequests {
		req, _ := http.NewRequest("POST", own+"/v2/projects", strings.NewReader(`{"name": "p`+string(rune('a'+i))+`"}`))
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.site != "" {
			req.Header.Set("Sec-Fetch-Site", tt.site)
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("%s: %d %s, want 201", tt.name, resp.StatusCode, data)
		}
	}

	// WebSockets check Origin before the upgrade.
	for _, path := range []string{"/v2/notifications/ws", "/v2/projects/" + pid + "/notifications/ws"} {
		resp, body, conn := wsDial(t, "127.0.0.1", addr, path, http.Header{"Origin": {foreign}})
		if conn != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"status":403`) {
			t.Fatalf("%s from a foreign page: %d %q, want a 403 JSON error", path, resp.StatusCode, body)
		}
		if _, _, conn := wsDial(t, "127.0.0.1", addr, path, http.Header{"Origin": {own}}); conn == nil {
			t.Fatalf("%s from the server's own page: not upgraded", path)
		}
		if _, _, conn := wsDial(t, "127.0.0.1", addr, path, http.Header{"Origin": {allowed}}); conn == nil {
			t.Fatalf("%s from an allowed origin: not upgraded", path)
		}
		if _, _, conn := wsDial(t, "127.0.0.1", addr, path, nil); conn == nil {
			t.Fatalf("%s without Origin (the GNS3 GUI): not upgraded", path)
		}
	}
}

// With authentication on, the console WebSocket refuses a foreign page
// even when the browser holds the credentials.
func TestSecurityConsoleWebSocketRefusesAForeignOrigin(t *testing.T) {
	t.Parallel()
	s, addr := securedServer(t, nil)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	nid := s.must("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, rNodes).body["node_id"].(string)
	h := basicHeader(secUser, secPassword)
	h.Set("Origin", foreign)
	resp, body, conn := wsDial(t, "127.0.0.1", addr, "/v2/projects/"+pid+"/nodes/"+nid+"/console/ws", h)
	if conn != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("console from a foreign page: %d %q, want 403", resp.StatusCode, body)
	}
}

// A browser cannot put a header on a WebSocket: the credentials can come
// as ?token= (what follows "Basic " in the header), on WebSocket
// handshakes only, and the token is never written to the log.
func TestSecurityWebSocketTokenInQuery(t *testing.T) {
	t.Parallel()
	var logs syncLog
	_, addr := securedServer(t, func(c *api.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	token := base64.StdEncoding.EncodeToString([]byte(secUser + ":" + secPassword))
	wrong := base64.StdEncoding.EncodeToString([]byte(secUser + ":nope"))
	if _, _, conn := wsDial(t, "127.0.0.1", addr, "/v2/notifications/ws?token="+url.QueryEscape(token), nil); conn == nil {
		t.Fatal("the right token: not upgraded")
	}
	if resp, _, conn := wsDial(t, "127.0.0.1", addr, "/v2/notifications/ws?token="+url.QueryEscape(wrong), nil); conn != nil || resp.StatusCode != 401 {
		t.Fatalf("a wrong token: %d, want 401", resp.StatusCode)
	}
	// Not on plain routes: a token in a URL ends up in histories and logs.
	resp, err := http.Get("http://" + addr + "/v2/projects?token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a token on a plain route: %d, want 401", resp.StatusCode)
	}
	time.Sleep(100 * time.Millisecond) // the access log line follows the reply
	if out := logs.String(); strings.Contains(out, url.QueryEscape(token)) || strings.Contains(out, token) || strings.Contains(out, secPassword) {
		t.Fatalf("the log holds the token:\n%s", out)
	} else if !strings.Contains(out, "/v2/notifications/ws") {
		t.Fatalf("no access log line for the WebSocket:\n%s", out)
	}
}

type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Every route the API registers, the capture view and /metrics included,
// answers 401 without credentials and with wrong ones (never a 2xx or a
// 101), before it looks anything up; with the right ones its handler
// runs. No route is open: GNS3 authenticates GET /v2/version too, and the
// GNS3 GUI and web UI send their credentials with it.
func TestSecurityEveryRouteNeedsCredentials(t *testing.T) {
	t.Parallel()
	s, addr := securedServer(t, func(c *api.Config) {
		c.View = web.New(web.Config{})
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	})
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	routes := s.api.Routes()
	if len(routes) < 100 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	fill := func(template string) string {
		segs := strings.Split(template, "/")
		for i, seg := range segs {
			switch {
			case seg == "{project_id}":
				segs[i] = pid // an existing project: its lookups would succeed
			case strings.HasPrefix(seg, "{"):
				segs[i] = "x"
			}
		}
		return strings.Join(segs, "/")
	}
	send := func(t *testing.T, client *http.Client, method, path string, ws bool, auth http.Header) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
		for k, v := range auth {
			req.Header[k] = v
		}
		if ws {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close() // the headers are all this asks of a stream
		return resp
	}
	noRedirect := func(c *http.Client) *http.Client {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return c
	}
	own := noRedirect(clientFrom("127.0.0.1"))
	unmatched := api.Route{Method: "GET", Template: "/v2/no/such/route"}
	for i, r := range append(routes, unmatched) {
		path := fill(r.Template)
		ws := strings.HasSuffix(r.Template, "/ws")
		t.Run(r.Method+" "+r.Template, func(t *testing.T) {
			// Wrong credentials come from an address of their own, so
			// that the throttle (10 failures) never answers instead.
			wrongFrom := noRedirect(clientFrom(net.IPv4(127, 0, 1+byte(i/250), 1+byte(i%250)).String()))
			for name, c := range map[string]struct {
				client *http.Client
				auth   http.Header
			}{
				"no credentials":  {own, nil},
				"wrong password":  {wrongFrom, basicHeader(secUser, "not-"+secPassword)},
				"wrong user":      {wrongFrom, basicHeader("root", secPassword)},
				"not Basic":       {wrongFrom, http.Header{"Authorization": {"Bearer " + secPassword}}},
				"token, no Basic": {own, nil},
			} {
				p := path
				if name == "token, no Basic" {
					p += "?token=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(secUser+":"+secPassword)))
					if ws {
						continue // accepted there: TestSecurityWebSocketTokenInQuery
					}
				}
				resp := send(t, c.client, r.Method, p, ws, c.auth)
				if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
					t.Fatalf("%s: %d (X-Route %q), want 401", name, resp.StatusCode, resp.Header.Get("X-Route"))
				}
			}
			if r == unmatched {
				return
			}
			resp := send(t, own, r.Method, path, ws, basicHeader(secUser, secPassword))
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusTooManyRequests || resp.Header.Get("X-Route") == "" && resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("right credentials: %d, X-Route %q: the route did not run", resp.StatusCode, resp.Header.Get("X-Route"))
			}
		})
	}
}
