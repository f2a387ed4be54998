package main

import (
	"strings"
	"testing"
	"time"
)

// Nodes created with no compute_id, or "auto", are placed by the
// controller among two real agents (127.0.0.2 and 127.0.0.3) from what
// they report of themselves.
func TestNodesWithNoComputeArePlacedOnTwoAgentsByTheirReportedRoom(t *testing.T) {
	const secret = "placement-secret"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret}, "--no-local-agent", "--placement", "spread")
	startAgent(t, "agent1", "127.0.0.2", secret, c.url)
	startAgent(t, "agent2", "127.0.0.3", secret, c.url)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)

	type node struct {
		ComputeID string `json:"compute_id"`
		NodeID    string `json:"node_id"`
	}
	create := func(projectID string, body map[string]any) node {
		t.Helper()
		var n node
		c.call("POST", "/v2/projects/"+projectID+"/nodes", body, 201, &n)
		return n
	}
	newProject := func(name string) string {
		var p struct {
			ProjectID string `json:"project_id"`
		}
		c.call("POST", "/v2/projects", map[string]any{"name": name}, 201, &p)
		return p.ProjectID
	}

	// A project's first node goes to one agent; the next joins it, so
	// the link between them needs no tunnel.
	p1 := newProject("placed1")
	first := create(p1, map[string]any{"name": "SW1", "node_type": "ethernet_switch"})
	second := create(p1, map[string]any{"name": "SW2", "node_type": "ethernet_switch", "compute_id": "auto"})
	if first.ComputeID != "agent1" && first.ComputeID != "agent2" || second.ComputeID != first.ComputeID {
		t.Fatalf("project 1 placed on %q and %q, want one agent", first.ComputeID, second.ComputeID)
	}
	c.call("POST", "/v2/projects/"+p1+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": first.NodeID, "adapter_number": 0, "port_number": 0},
		{"node_id": second.NodeID, "adapter_number": 0, "port_number": 0}}}, 201, nil)

	// Another project starts on the other agent: it has fewer nodes per
	// CPU (same host, same CPUs).
	p2 := newProject("placed2")
	other := create(p2, map[string]any{"name": "SW3", "node_type": "ethernet_switch"})
	if other.ComputeID == first.ComputeID {
		t.Fatalf("project 2 placed on %q beside project 1's two nodes, want the other agent", other.ComputeID)
	}
	// "local" stays exactly the local compute, which this controller has
	// not: GNS3 clients always send it.
	c.call("POST", "/v2/projects/"+p2+"/nodes", map[string]any{"name": "X", "node_type": "ethernet_switch", "compute_id": "local"}, 404, nil)
	// A type labtap does not run is refused.
	var refused struct {
		Message string `json:"message"`
	}
	c.call("POST", "/v2/projects/"+p2+"/nodes", map[string]any{"name": "Y", "node_type": "iou"}, 409, &refused)
	// The decision is in the log, with what was seen of each agent.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.log.String(), `msg="node placed"`) || !strings.Contains(c.log.String(), "compute="+other.ComputeID) {
		if time.Now().After(deadline) {
			t.Fatalf("no placement in the controller's log:\n%s", c.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, line := range strings.Split(c.log.String(), "\n") {
		if strings.Contains(line, `msg="node placed"`) && !strings.Contains(line, "nodes per CPU") {
			t.Fatalf("placement line without what it saw: %s", line)
		}
	}
}
