package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// A VPCS with a startup config moves between two real agents (127.0.0.2
// and 127.0.0.3): its startup.vpc goes with it (it comes up with the
// address the file gives), its link to a PC on the other agent is joined
// on one agent, then tunnelled again when it moves back by placement;
// pings cross and a capture on the link holds them each time. A drain
// with move empties an agent, and a move to an agent that died leaves the
// node where it was, its file intact.
func TestAVPCSMovesBetweenTwoAgentsWithItsStartupConfigAndLinkAndADrainEmptiesAnAgent(t *testing.T) {
	testenv.RequireTools(t, "vpcs")
	const secret = "move-secret"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret}, "--no-local-agent")
	a1 := startAgent(t, "agent1", "127.0.0.2", secret, c.url)
	a2 := startAgent(t, "agent2", "127.0.0.3", secret, c.url)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)

	lab := c.twoPCs("move", "agent1", "agent2", "10.0.0.1", "10.0.0.2")
	base, pc1, pc2, link := lab.base, lab.pcs[0], lab.pcs[1], lab.link
	pc1Path := base + "/nodes/" + pc1.node.NodeID
	const startup = "set pcname PC1\nip 10.0.0.1/24\n"
	c.raw("POST", pc1Path+"/files/startup.vpc", []byte(startup), 201)

	type moved struct {
		ComputeID   string `json:"compute_id"`
		ConsoleHost string `json:"console_host"`
		Status      string `json:"status"`
	}
	move := func(to string, want int) moved {
		t.Helper()
		var m moved
		if want != 200 {
			c.call("POST", pc1Path+"/move", map[string]any{"compute_id": to}, want, nil)
			return m
		}
		c.call("POST", pc1Path+"/move", map[string]any{"compute_id": to}, want, &m)
		return m
	}
	start := func(p *pc) {
		t.Helper()
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	stopAll := func() {
		t.Helper()
		c.call("POST", base+"/nodes/stop", nil, 204, nil)
		pc1.con.Close()
		pc2.con.Close()
	}
	// pingCaptured pings PC1 from PC2 while the link captures, and
	// returns the ICMP frames the capture holds.
	pingCaptured := func() int {
		t.Helper()
		var l linkReply
		c.call("POST", base+"/links/"+link.LinkID+"/start_capture", map[string]any{}, 201, &l)
		if n := pc2.ping(t, "10.0.0.1", 3); n < 2 {
			t.Fatalf("%d of 3 pings answered", n)
		}
		c.call("POST", base+"/links/"+link.LinkID+"/stop_capture", nil, 201, &l)
		icmp, _ := readWholeRecords(t, deref(l.CaptureFilePath))
		return icmp
	}

	// To agent2, beside PC2: the file came along (PC1 has its address
	// without being given it), and the link is on one agent.
	if m := move("agent2", 200); m.ComputeID != "agent2" || m.Status != "stopped" {
		t.Fatalf("moved: %+v", m)
	}
	if got := c.raw("GET", pc1Path+"/files/startup.vpc", nil, 200); string(got) != startup {
		t.Fatalf("startup.vpc after the move: %q", got)
	}
	start(pc1)
	start(pc2)
	if pc1.node.ConsoleHost != "127.0.0.3" {
		t.Fatalf("PC1's console after the move is on %s", pc1.node.ConsoleHost)
	}
	setAddresses(t, []*pc{pc2})
	if icmp := pingCaptured(); icmp < 4 {
		t.Fatalf("capture on the joined link holds %d ICMP frames", icmp)
	}
	// Started, it stays.
	move("agent1", 409)
	stopAll()

	// Back by placement (never its own agent): the link crosses agents
	// again, through a tunnel.
	if m := move("auto", 200); m.ComputeID != "agent1" {
		t.Fatalf("moved by placement to %+v", m)
	}
	start(pc1)
	start(pc2)
	if pc1.node.ConsoleHost != "127.0.0.2" {
		t.Fatalf("PC1's console after moving back is on %s", pc1.node.ConsoleHost)
	}
	setAddresses(t, []*pc{pc2})
	if icmp := pingCaptured(); icmp < 4 {
		t.Fatalf("capture on the tunnelled link holds %d ICMP frames", icmp)
	}
	stopAll()

	// A drain with move empties agent1; undrained, it takes nodes again.
	var drained struct {
		Draining bool `json:"draining"`
		Moved    []struct {
			NodeID    string `json:"node_id"`
			ComputeID string `json:"compute_id"`
		} `json:"moved"`
		Left []struct {
			Reason string `json:"reason"`
		} `json:"left"`
	}
	c.call("POST", "/v2/computes/agent1/drain", map[string]any{"move": true}, 200, &drained)
	if !drained.Draining || len(drained.Moved) != 1 || drained.Moved[0].NodeID != pc1.node.NodeID || drained.Moved[0].ComputeID != "agent2" || len(drained.Left) != 0 {
		t.Fatalf("drain with move: %+v", drained)
	}
	var nodes []moved
	c.call("GET", base+"/nodes", nil, 200, &nodes)
	for _, n := range nodes {
		if n.ComputeID != "agent2" {
			t.Fatalf("a node on %s after agent1 drained", n.ComputeID)
		}
	}
	c.call("POST", "/v2/computes/agent1/drain", map[string]any{"move": "yes"}, 400, nil)
	c.call("POST", "/v2/computes/agent1/undrain", nil, 200, nil)

	// agent1 dies: a move there fails and PC1 stays on agent2, whole.
	a1.kill(syscall.SIGKILL)
	c.waitCompute("agent1", false, 20*time.Second)
	if code, body := c.rawCall("POST", pc1Path+"/move", map[string]any{"compute_id": "agent1"}); code != http.StatusConflict && code != http.StatusServiceUnavailable {
		t.Fatalf("move to a dead agent answered %d %s", code, body)
	}
	var after moved
	c.call("GET", pc1Path, nil, 200, &after)
	if after.ComputeID != "agent2" {
		t.Fatalf("PC1 after a failed move: %+v", after)
	}
	if got := c.raw("GET", pc1Path+"/files/startup.vpc", nil, 200); string(got) != startup {
		t.Fatalf("startup.vpc after a failed move: %q", got)
	}
	start(pc1)
	start(pc2)
	setAddresses(t, []*pc{pc2})
	if n := pc2.ping(t, "10.0.0.1", 2); n == 0 {
		t.Fatal("no ping after a failed move")
	}

	// agent1 comes back and agent2 is lost: its nodes are reported, and
	// one call recreates and starts them on agent1. Their files on
	// agent2 are lost with it (PC1 needs its address again).
	a1.start()
	c.waitCompute("agent1", true, 20*time.Second)
	c.call("POST", "/v2/projects/"+lab.projectID+"/nodes/"+pc1.node.NodeID+"/move", nil, 400, nil)
	c.call("POST", "/v2/computes/agent2/recover", nil, 409, nil) // connected: drain it with move
	a2.kill(syscall.SIGKILL)
	c.waitCompute("agent2", false, 20*time.Second)
	var onLost []struct {
		NodeID string `json:"node_id"`
		Status string `json:"status"`
	}
	c.call("GET", "/v2/computes/agent2/nodes", nil, 200, &onLost)
	if len(onLost) != 2 {
		t.Fatalf("nodes reported on the lost agent: %+v", onLost)
	}
	var recovered struct {
		Moved []struct {
			ComputeID string `json:"compute_id"`
		} `json:"moved"`
		Left []struct {
			Reason string `json:"reason"`
		} `json:"left"`
	}
	c.call("POST", "/v2/computes/agent2/recover", map[string]any{"start": true}, 200, &recovered)
	if len(recovered.Moved) != 2 || len(recovered.Left) != 0 || recovered.Moved[0].ComputeID != "agent1" {
		t.Fatalf("recover: %+v", recovered)
	}
	c.call("GET", "/v2/computes/agent2/nodes", nil, 200, &onLost)
	if len(onLost) != 0 {
		t.Fatalf("nodes still on the lost agent: %+v", onLost)
	}
	for _, p := range []*pc{pc1, pc2} {
		c.call("GET", base+"/nodes/"+p.node.NodeID, nil, 200, &p.node)
		if p.node.Status != "started" || p.node.ConsoleHost != "127.0.0.2" {
			t.Fatalf("recovered node: %+v", p.node)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	setAddresses(t, []*pc{pc1, pc2})
	if icmp := pingCaptured(); icmp < 4 {
		t.Fatalf("capture on the recovered link holds %d ICMP frames", icmp)
	}
}

// raw sends a raw body and returns the answer's, failing unless it is
// want.
func (c *controller) raw(method, path string, body []byte, want int) []byte {
	c.t.Helper()
	code, data := c.send(method, path, body)
	if code != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, code, data, want)
	}
	return data
}

func (c *controller) send(method, path string, body []byte) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	client := http.DefaultClient
	if c.client != nil {
		client = c.client
	}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}
