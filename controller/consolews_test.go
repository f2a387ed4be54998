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
