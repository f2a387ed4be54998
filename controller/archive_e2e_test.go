package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// startPCs starts a lab's PCs, dials their consoles and gives them their
// addresses.
func (c *controller) startPCs(t *testing.T, base string, pcs []*pc) {
	t.Helper()
	for _, p := range pcs {
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	setAddresses(t, pcs)
}

// TestRestoredAndImportedLabsRunRealVPCS takes a snapshot of a two-VPCS
// lab, breaks the lab (link deleted, a node added), restores the snapshot
// and pings across the restored link; then exports the lab, imports the
// archive as a new project and pings across the imported link: the real
// controller, its agent and vpcs.
func TestRestoredAndImportedLabsRunRealVPCS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the controller and vpcs")
	}
	testenv.RequireTools(t, "vpcs")
	c := startController(t)
	lab := c.twoPCs("portable", "local", "local", "10.9.0.1", "10.9.0.2")
	var snap struct {
		SnapshotID string `json:"snapshot_id"`
	}
	c.call("POST", lab.base+"/snapshots", map[string]any{"name": "linked"}, 201, &snap)
	c.call("DELETE", lab.base+"/links/"+lab.link.LinkID, nil, 204, nil)
	var extra nodeReply
	c.call("POST", lab.base+"/nodes", map[string]any{"name": "PC3", "node_type": "vpcs", "compute_id": "local"}, 201, &extra)
	c.call("POST", lab.base+"/nodes/"+extra.NodeID+"/start", nil, 200, nil)

	c.call("POST", lab.base+"/snapshots/"+snap.SnapshotID+"/restore", nil, 201, nil)
	var nodes []nodeReply
	c.call("GET", lab.base+"/nodes", nil, 200, &nodes)
	if len(nodes) != 2 || nodes[0].Status != "stopped" {
		t.Fatalf("nodes after restore: %+v", nodes)
	}
	c.startPCs(t, lab.base, lab.pcs)
	if n := lab.pcs[0].ping(t, lab.pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply across the restored link")
	}
	c.call("POST", lab.base+"/nodes/stop", nil, 204, nil)

	resp, err := http.Get(c.url + lab.base + "/export")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %d %v", resp.StatusCode, err)
	}
	const copyID = "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
	resp, err = http.Post(c.url+"/v2/projects/"+copyID+"/import?name=copy", "application/octet-stream", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("import: %d", resp.StatusCode)
	}
	base := "/v2/projects/" + copyID
	c.call("POST", base+"/open", nil, 201, nil)
	var copied []nodeReply
	c.call("GET", base+"/nodes", nil, 200, &copied)
	if len(copied) != 2 || copied[0].NodeID == lab.pcs[0].node.NodeID {
		t.Fatalf("imported nodes: %+v", copied)
	}
	pcs := []*pc{{node: copied[0], ip: "10.9.1.1"}, {node: copied[1], ip: "10.9.1.2"}}
	c.startPCs(t, base, pcs)
	if n := pcs[0].ping(t, pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply across the imported link")
	}
}
