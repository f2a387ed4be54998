package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/labtap/labtap/internal/testenv"
)

// The web UI's console (spec 2.11) on real VPCS, one on the controller's
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
		// VPCS may still be starting: type the command until its answer
		// shows, reading everything as it comes.
		var out bytes.Buffer
		deadline := time.Now().Add(30 * time.Second)
		answered := func() bool { return strings.Contains(out.String(), "NAME        : "+name+"[") }
		for !answered() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no answer to 'show ip' over the WebSocket; got %q", name, out.String())
			}
			if err := conn.WriteMessage(websocket.TextMessage, []byte("show ip\r")); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				kind, msg, err := conn.ReadMessage()
				if err != nil {
					break // a read deadline: type again
				}
				if kind != websocket.BinaryMessage {
					t.Fatalf("%s: a frame of kind %d", name, kind)
				}
				out.Write(msg)
				if answered() {
					break
				}
			}
			if websocket.IsUnexpectedCloseError(err) {
				break
			}
		}
		conn.Close()
	}
}
