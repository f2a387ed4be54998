package api_test

import (
	"slices"
	"strings"
	"testing"
)

// TestEveryRouteAnswersTheSpecsErrors sends requests GNS3 2.2 refuses
// (bad bodies, unknown ids, closed projects, bad links) and checks, for each, the status, the
// exact message in a {"message", "status"} body, the X-Route header, and
// that everything a client can read of the lab is as it was before.
func TestEveryRouteAnswersTheSpecsErrors(t *testing.T) {
	t.Parallel()
	const (
		rFilters   = rLink + "/available_filters"
		rNodeLinks = rNode + "/links"
		// ghost is well formed, as the id of a deleted object a client kept.
		ghost = "00000000-0000-4000-8000-00000000dead"
	)
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	nodeID := func(body map[string]any) string {
		n := l.must("POST", p+"/nodes", body, 201, rNodes)
		return n.body["node_id"].(string)
	}
	spare := nodeID(map[string]any{"name": "PC3", "node_type": "vpcs", "compute_id": "local"})
	hub := nodeID(map[string]any{"name": "Hub", "node_type": "ethernet_hub", "compute_id": "local"})
	if n := l.must("PUT", p+"/nodes/"+l.a, map[string]any{"locked": true}, 200, rNode); n.body["locked"] != true {
		t.Fatalf("lock: %s", n.raw)
	}
	ends := func(ep ...any) map[string]any { // node id, adapter, port, ...
		var out []map[string]any
		for i := 0; i < len(ep); i += 3 {
			out = append(out, map[string]any{"node_id": ep[i], "adapter_number": ep[i+1], "port_number": ep[i+2]})
		}
		return map[string]any{"nodes": out}
	}
	// state is everything a client can read of the lab.
	state := func(t *testing.T) string {
		t.Helper()
		var b strings.Builder
		for _, path := range []string{"/v2/projects", p, p + "/stats", p + "/nodes", p + "/links"} {
			r := l.do("GET", path, nil)
			if r.status != 200 {
				t.Fatalf("GET %s = %d %s", path, r.status, r.raw)
			}
			b.WriteString(path + " " + string(r.raw) + "\n")
		}
		return b.String()
	}
	type refusal struct {
		name         string
		method, path string
		body         any
		status       int
		route        string
		msg          string
	}
	refuse := func(t *testing.T, tt refusal) {
		before := state(t)
		r := l.mustT(t, tt.method, tt.path, tt.body, tt.status, tt.route)
		if got := keys(r.body); !slices.Equal(got, []string{"message", "status"}) ||
			r.body["status"] != float64(tt.status) || r.body["message"] != tt.msg {
			t.Fatalf("body %s, want {\"message\": %q, \"status\": %d}", r.raw, tt.msg, tt.status)
		}
		if after := state(t); after != before {
			t.Fatalf("a refused request changed the lab\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}

	noProject := "Project ID " + ghost + " doesn't exist"
	noNode := "Node ID " + ghost + " doesn't exist"
	noLink := "Link ID " + ghost + " doesn't exist"
	opened := []refusal{
		{"update unknown project", "PUT", "/v2/projects/" + ghost, map[string]any{"zoom": 120}, 404, rProject, noProject},
		{"stats of unknown project", "GET", "/v2/projects/" + ghost + "/stats", nil, 404, rProject + "/stats", noProject},
		{"close unknown project", "POST", "/v2/projects/" + ghost + "/close", nil, 404, rProject + "/close", noProject},
		{"nodes of unknown project", "GET", "/v2/projects/" + ghost + "/nodes", nil, 404, rNodes, noProject},

		{"update unknown node", "PUT", p + "/nodes/" + ghost, map[string]any{"x": 5}, 404, rNode, noNode},
		{"delete unknown node", "DELETE", p + "/nodes/" + ghost, nil, 404, rNode, noNode},
		{"start unknown node", "POST", p + "/nodes/" + ghost + "/start", nil, 404, rNode + "/start", noNode},
		{"stop unknown node", "POST", p + "/nodes/" + ghost + "/stop", nil, 404, rNode + "/stop", noNode},
		{"suspend unknown node", "POST", p + "/nodes/" + ghost + "/suspend", nil, 404, rNode + "/suspend", noNode},
		{"reload unknown node", "POST", p + "/nodes/" + ghost + "/reload", nil, 404, rNode + "/reload", noNode},
		{"links of unknown node", "GET", p + "/nodes/" + ghost + "/links", nil, 404, rNodeLinks, noNode},

		{"update unknown link", "PUT", p + "/links/" + ghost, map[string]any{"suspend": true}, 404, rLink, noLink},
		{"delete unknown link", "DELETE", p + "/links/" + ghost, nil, 404, rLink, noLink},
		{"filters of unknown link", "GET", p + "/links/" + ghost + "/available_filters", nil, 404, rFilters, noLink},
		{"stop capture on unknown link", "POST", p + "/links/" + ghost + "/stop_capture", nil, 404, rStop, noLink},
		{"pcap of unknown link", "GET", p + "/links/" + ghost + "/pcap", nil, 404, rPcap, noLink},

		// GNS3's link checks: the port exists, not the same node, the port is free.
		{"link to a port the first node lacks", "POST", p + "/links", ends(spare, 0, 1, hub, 0, 0), 404, rLinks, "Port 0/1 for PC3 not found"},
		{"link to a port the second node lacks", "POST", p + "/links", ends(spare, 0, 0, hub, 1, 0), 404, rLinks, "Port 1/0 for Hub not found"},
		{"link from a port to itself", "POST", p + "/links", ends(spare, 0, 0, spare, 0, 0), 409, rLinks, "Cannot connect to itself"},
		{"link between two ports of one node", "POST", p + "/links", ends(hub, 0, 0, hub, 0, 1), 409, rLinks, "Cannot connect to itself"},

		{"delete a locked node", "DELETE", p + "/nodes/" + l.a, nil, 409, rNode, "Node PC1 cannot be deleted because it is locked"},
	}
	for _, tt := range opened {
		t.Run(tt.name, func(t *testing.T) { refuse(t, tt) })
	}
	// The lock, and nothing else, refused that delete (its link goes too).
	l.must("PUT", p+"/nodes/"+l.a, map[string]any{"locked": false}, 200, rNode)
	l.must("DELETE", p+"/nodes/"+l.a, nil, 204, rNode)
	l.must("GET", l.linkPath(""), nil, 404, rLink)

	// As in GNS3: on a closed project every node
	// or link lookup is 403, before the id is looked at.
	l.link = l.must("POST", p+"/links", ends(spare, 0, 0, l.b, 0, 0), 201, rLinks).body["link_id"].(string)
	l.must("POST", p+"/close", nil, 204, rProject+"/close")
	const closed = "The project is not opened"
	for _, tt := range []refusal{
		{"update node", "PUT", p + "/nodes/" + l.b, map[string]any{"x": 5}, 403, rNode, closed},
		{"delete node", "DELETE", p + "/nodes/" + l.b, nil, 403, rNode, closed},
		{"links of node", "GET", p + "/nodes/" + l.b + "/links", nil, 403, rNodeLinks, closed},
		{"links of unknown node", "GET", p + "/nodes/" + ghost + "/links", nil, 403, rNodeLinks, closed},
		{"update link", "PUT", l.linkPath(""), map[string]any{"suspend": true}, 403, rLink, closed},
		{"delete link", "DELETE", l.linkPath(""), nil, 403, rLink, closed},
		{"filters of link", "GET", l.linkPath("/available_filters"), nil, 403, rFilters, closed},
		{"stop capture", "POST", l.linkPath("/stop_capture"), nil, 403, rStop, closed},
		{"pcap", "GET", l.linkPath("/pcap"), nil, 403, rPcap, closed},
	} {
		t.Run("closed project: "+tt.name, func(t *testing.T) { refuse(t, tt) })
	}
	// Reopened, the project is as the refused requests found it.
	l.must("POST", p+"/open", nil, 201, rProject+"/open")
	if n := l.must("GET", p+"/nodes/"+l.b, nil, 200, rNode); n.body["x"] != 0.0 {
		t.Fatalf("node after reopening: %s", n.raw)
	}
	if link := l.must("GET", l.linkPath(""), nil, 200, rLink); link.body["suspend"] != false {
		t.Fatalf("link after reopening: %s", link.raw)
	}
}

// TestAOneEndpointLinkIsCreatedAndLeavesItsPortFree checks GNS3's half
// links: a link with one endpoint answers 201 and does not reserve its
// port, so another link, half or whole, can still use it; a whole link does.
func TestAOneEndpointLinkIsCreatedAndLeavesItsPortFree(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	var pcs []string
	for _, name := range []string{"PC3", "PC4"} {
		pcs = append(pcs, l.must("POST", p+"/nodes", map[string]any{"name": name, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes).body["node_id"].(string))
	}
	end := func(id string) map[string]any {
		return map[string]any{"node_id": id, "adapter_number": 0, "port_number": 0}
	}
	half := l.must("POST", p+"/links", map[string]any{"nodes": []any{end(pcs[0])}}, 201, rLinks)
	if eps := half.body["nodes"].([]any); len(eps) != 1 || eps[0].(map[string]any)["node_id"] != pcs[0] ||
		half.body["link_type"] != "ethernet" || half.body["capturing"] != false {
		t.Fatalf("half link: %s", half.raw)
	}
	l.must("POST", p+"/links", map[string]any{"nodes": []any{end(pcs[0])}}, 201, rLinks)
	whole := l.must("POST", p+"/links", map[string]any{"nodes": []any{end(pcs[0]), end(pcs[1])}}, 201, rLinks)
	if links := l.must("GET", p+"/links", nil, 200, rLinks); len(links.list) != 4 {
		t.Fatalf("links: %s", links.raw)
	}
	// A node's links are its whole ones, as in GNS3.
	nl := l.must("GET", p+"/nodes/"+pcs[0]+"/links", nil, 200, rNode+"/links")
	if len(nl.list) != 1 || nl.list[0].(map[string]any)["link_id"] != whole.body["link_id"] {
		t.Fatalf("links of PC3: %s", nl.raw)
	}
	r := l.must("POST", p+"/links", map[string]any{"nodes": []any{end(pcs[0])}}, 409, rLinks)
	if r.body["message"] != "Port is already used" {
		t.Fatalf("the whole link left its port free: %s", r.raw)
	}
}
