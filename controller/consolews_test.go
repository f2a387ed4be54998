package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/labtap/labtap/internal/testenv"
)

// The web UI's console on real VPCS, one on the controller's
// own agent and one on a remote agent: a command typed over the WebSocket
// runs, and its output comes back in binary frames. A stopped node's
// console is a JSON 409 before any upgrade.
func TestConsoleWebSocketReachesARealVPCSOnAnyAgent(t *testing.T) {
	testenv.RequireTools(t, "vpcs")
	const secret = "e2e-console-secret"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret})
	startAgent(t, "agent1", "127.0.0.2", secret, c.url)
	c.waitCompute("agent1", true, 20*time.Second)
	lab := c.twoPCs("console-ws", "local", "agent1", "10.0.0.1", "10.0.0.2")
	wsURL := func(p *pc) string {
		return "ws" + strings.TrimPrefix(c.url, "http") + lab.base + "/nodes/" + p.node.NodeID + "/console/ws"
	}

	// Stopped: refused before the upgrade, in JSON.
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(lab.pcs[0]), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("console of a stopped node: %v %v", err, resp)
	}
	var refusal struct{ Message string }
	body, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(body, &refusal); refusal.Message != "Node PC1 is not started" {
		t.Fatalf("refusal %s", body)
	}

	for i, p := range lab.pcs {
		name := []string{"PC1", "PC2"}[i]
		c.call("POST", lab.base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		conn, _, err := websocket.DefaultDialer.Dial(wsURL(p), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// VPCS may still be starting: type the command every 2 s until its
		// answer shows; one reader takes every frame as it comes.
		frames := make(chan []byte, 1024)
		go func() {
			defer close(frames)
			for {
				kind, msg, err := conn.ReadMessage()
				if err != nil {
					return
				}
				if kind != websocket.BinaryMessage {
					msg = []byte("<not a binary frame>")
				}
				frames <- msg
			}
		}()
		var out bytes.Buffer
		deadline := time.After(45 * time.Second)
		tick := time.NewTicker(2 * time.Second)
		for !strings.Contains(out.String(), "NAME        : "+name+"[") {
			if err := conn.WriteMessage(websocket.TextMessage, []byte("show ip\r")); err != nil {
				t.Fatal(err)
			}
		wait:
			for {
				select {
				case msg, ok := <-frames:
					if !ok {
						t.Fatalf("%s: the WebSocket closed; got %q", name, out.String())
					}
					out.Write(msg)
					if strings.Contains(out.String(), "NAME        : "+name+"[") {
						break wait
					}
				case <-tick.C:
					break wait
				case <-deadline:
					t.Fatalf("%s: no answer to 'show ip' over the WebSocket; got %.2000q", name, out.String())
				}
			}
		}
		tick.Stop()
		if strings.Contains(out.String(), "<not a binary frame>") {
			t.Errorf("%s: the console sent a frame that is not binary", name)
		}
		conn.Close()
	}
}

// Hole 1 of the API's authentication, on a real controller with Basic
// authentication on and a started VPCS: its console WebSocket (exempt in
// GNS3) answers 401 without credentials, the same 401 for a node id that
// does not exist, 429 to an address throttled for failed logins, and 403
// to a foreign page; only the right credentials reach the console. The
// profiles on --pprof-listen want the same credentials.
func TestSecurityConsoleWebSocketOfARealNodeNeedsCredentials(t *testing.T) {
	testenv.RequireTools(t, "vpcs")
	const user, password = "admin", "e2e-console-pw"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_USER=" + user, "LABTAP_PASSWORD=" + password}, "--pprof-listen", "127.0.0.1:0")
	c.user, c.password = user, password
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "console-auth"}, 201, &project)
	var node nodeReply
	base := "/v2/projects/" + project.ProjectID
	c.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, &node)
	c.call("POST", base+"/nodes/"+node.NodeID+"/start", nil, 200, &node)
	wsURL := func(id string) string {
		return "ws" + strings.TrimPrefix(c.url, "http") + base + "/nodes/" + id + "/console/ws"
	}
	auth := func(pw string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}}
	}
	dialFrom := func(src, url string, h http.Header) (*websocket.Conn, *http.Response, []byte) {
		t.Helper()
		d := websocket.Dialer{
			HandshakeTimeout: 20 * time.Second,
			NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
		}
		conn, resp, err := d.Dial(url, h)
		if conn != nil {
			t.Cleanup(func() { conn.Close() })
			return conn, resp, nil
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return nil, resp, body
	}

	var replies []string
	for _, id := range []string{node.NodeID, "99999999-9999-4999-8999-999999999999"} {
		for _, h := range []http.Header{nil, auth("wrong")} {
			conn, resp, body := dialFrom("127.0.0.1", wsURL(id), h)
			if conn != nil {
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, msg, _ := conn.ReadMessage()
				t.Fatalf("node %s: upgraded without the right credentials; the console said %q", id, msg)
			}
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("node %s: %d %s, want 401", id, resp.StatusCode, body)
			}
			replies = append(replies, fmt.Sprintf("%d %q %q %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Content-Length"), body))
		}
	}
	for _, r := range replies[1:] {
		if r != replies[0] {
			t.Fatalf("replies tell nodes apart: %q", replies)
		}
	}

	// A foreign page is refused though the browser holds the credentials.
	h := auth(password)
	h.Set("Origin", "http://evil.example")
	if conn, resp, body := dialFrom("127.0.0.1", wsURL(node.NodeID), h); conn != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Origin: upgraded %v, %d %s; want 403", conn != nil, resp.StatusCode, body)
	}

	// The right credentials reach the console: VPCS answers a command.
	conn, _, _ := dialFrom("127.0.0.1", wsURL(node.NodeID), auth(password))
	if conn == nil {
		t.Fatal("right credentials: not upgraded")
	}
	frames := make(chan []byte, 1024)
	go func() {
		defer close(frames)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			frames <- msg
		}
	}()
	var out strings.Builder
	deadline := time.After(45 * time.Second)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for !strings.Contains(out.String(), "NAME        : PC1[") {
		if err := conn.WriteMessage(websocket.TextMessage, []byte("show ip\r")); err != nil {
			t.Fatal(err)
		}
	wait:
		for {
			select {
			case msg, ok := <-frames:
				if !ok {
					t.Fatalf("the WebSocket closed; got %q", out.String())
				}
				out.Write(msg)
				if strings.Contains(out.String(), "NAME        : PC1[") {
					break wait
				}
			case <-tick.C:
				break wait
			case <-deadline:
				t.Fatalf("no answer to 'show ip'; got %.2000q", out.String())
			}
		}
	}

	// After ten failed logins, an address waits, on the console too. The
	// ten go at once: one after the other, each hashing a password, they
	// could spread past the throttle's window on a loaded machine.
	var guesses sync.WaitGroup
	for i := range 10 {
		guesses.Go(func() {
			req, _ := http.NewRequest("GET", c.url+"/v2/version", nil)
			req.SetBasicAuth(user, fmt.Sprint("guess", i))
			resp, err := clientFromAddr("127.0.0.2").Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	guesses.Wait()
	if conn, resp, body := dialFrom("127.0.0.2", wsURL(node.NodeID), auth(password)); conn != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("throttled address: upgraded %v, %d %s; want 429", conn != nil, resp.StatusCode, body)
	}

	// The profiles want the same credentials.
	m := regexp.MustCompile(`msg="pprof listening" addr=(\S+)`).FindStringSubmatch(c.log.String())
	if m == nil {
		t.Fatalf("no pprof address in the log:\n%s", c.log.String())
	}
	for _, tt := range []struct {
		h    http.Header
		want int
	}{{nil, 401}, {auth("wrong"), 401}, {auth(password), 200}} {
		req, _ := http.NewRequest("GET", "http://"+m[1]+"/debug/pprof/", nil)
		for k, v := range tt.h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Fatalf("pprof with %v: %d, want %d", tt.h, resp.StatusCode, tt.want)
		}
	}
}

// clientFromAddr is an HTTP client whose connections leave from src.
func clientFromAddr(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}
