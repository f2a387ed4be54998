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
