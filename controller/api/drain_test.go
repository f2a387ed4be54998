package api_test

import (
	"strings"
	"testing"
)

// A drained compute takes no new nodes, asked of it or placed; its nodes
// run on; undrained, it takes them again.
func TestADrainedComputeTakesNoNewNodesUntilUndrained(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "drain"}, 201, rProjects).body["project_id"].(string)
	nodes := "/v2/projects/" + pid + "/nodes"
	before := s.must("POST", nodes, map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)

	const route = "/v2/computes/{compute_id}/drain"
	if c := s.must("POST", "/v2/computes/local/drain", nil, 200, route); c.body["draining"] != true {
		t.Fatalf("drained compute: %s", c.raw)
	}
	if c := s.must("GET", "/v2/computes/local", nil, 200, "/v2/computes/{compute_id}"); c.body["draining"] != true {
		t.Fatalf("compute after drain: %s", c.raw)
	}
	r := s.must("POST", nodes, map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 409, rNodes)
	if r.body["message"] != "Compute local is draining: it takes no new nodes" {
		t.Fatalf("node on a drained compute: %s", r.raw)
	}
	r = s.must("POST", nodes, map[string]any{"name": "PC2", "node_type": "vpcs"}, 409, rNodes)
	if msg, _ := r.body["message"].(string); !strings.Contains(msg, "local: draining") {
		t.Fatalf("placement on a drained compute: %s", r.raw)
	}
	// Its nodes run on.
	s.must("POST", nodes+"/"+before.body["node_id"].(string)+"/start", nil, 200, rNode+"/start")
	s.must("POST", "/v2/computes/nowhere/drain", nil, 404, route)

	if c := s.must("POST", "/v2/computes/local/undrain", nil, 200, "/v2/computes/{compute_id}/undrain"); c.body["draining"] != false {
		t.Fatalf("undrained compute: %s", c.raw)
	}
	if n := s.must("POST", nodes, map[string]any{"name": "PC2", "node_type": "vpcs"}, 201, rNodes); n.body["compute_id"] != "local" {
		t.Fatalf("placed after undrain: %s", n.raw)
	}
}

// A template's node asked with "compute_id": "auto" is placed too.
func TestATemplatesNodeWithAutoComputeIsPlaced(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "auto"}, 201, rProjects).body["project_id"].(string)
	const switchTemplate = "1966b864-93e7-32d5-965f-001384eec461"
	sw := s.must("POST", "/v2/projects/"+pid+"/templates/"+switchTemplate, map[string]any{"x": 0, "y": 0, "compute_id": "auto"}, 201,
		"/v2/projects/{project_id}/templates/{template_id}")
	if sw.body["compute_id"] != "local" {
		t.Fatalf("switch: %s", sw.raw)
	}
}

// A move's body is checked before anything moves; with one compute there
// is nowhere to go, so a move by placement and a drain with move leave the
// node, saying why.
func TestAMoveWithNowhereToGoLeavesTheNodeAndSaysWhy(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "move"}, 201, rProjects).body["project_id"].(string)
	nodes := "/v2/projects/" + pid + "/nodes"
	pc := s.must("POST", nodes, map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
	move := nodes + "/" + pc.body["node_id"].(string) + "/move"
	const route = rNode + "/move"
	for _, bad := range []any{nil, map[string]any{"compute_id": ""}, map[string]any{"compute_id": 7},
		map[string]any{"compute_id": strings.Repeat("x", 256)}, map[string]any{"compute_id": "auto", "start": true}} {
		s.must("POST", move, bad, 400, route)
	}
	s.must("POST", move, map[string]any{"compute_id": "nowhere"}, 404, route)
	s.must("POST", move, map[string]any{"compute_id": "local"}, 409, route)
	if r := s.must("POST", move, map[string]any{"compute_id": "auto"}, 409, route); !strings.Contains(string(r.raw), "No compute can take") {
		t.Fatalf("move by placement with one compute: %s", r.raw)
	}
	s.must("POST", "/v2/computes/local/drain", map[string]any{"move": 1}, 400, "/v2/computes/{compute_id}/drain")
	d := s.must("POST", "/v2/computes/local/drain", map[string]any{"move": true}, 200, "/v2/computes/{compute_id}/drain")
	left, _ := d.body["left"].([]any)
	if d.body["draining"] != true || len(left) != 1 || !strings.Contains(string(d.raw), "No compute can take") {
		t.Fatalf("drain with move: %s", d.raw)
	}
	if n := s.must("GET", nodes+"/"+pc.body["node_id"].(string), nil, 200, rNode); n.body["compute_id"] != "local" {
		t.Fatalf("node after a drain with nowhere to go: %s", n.raw)
	}
	if l := s.must("GET", "/v2/computes/local/nodes", nil, 200, "/v2/computes/{compute_id}/nodes"); !strings.Contains(string(l.raw), `"name":"PC1"`) {
		t.Fatalf("nodes on local: %s", l.raw)
	}
	s.must("POST", "/v2/computes/local/recover", nil, 409, "/v2/computes/{compute_id}/recover")
}
