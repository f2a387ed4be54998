package main

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// TestQuotasHoldInTheController starts the controller with --user and
// --password and its local agent: a quota set through /v3 limits what the
// user makes through /v2 (the controller hands the access database's
// quotas to its projects, and records who made a project).
func TestQuotasHoldInTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller")
	}
	c := startControllerWith(t, t.TempDir(), nil, "--user", "admin", "--password", "admin-password")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:admin-password"))
	call := func(method, path, body string, want int) map[string]any {
		t.Helper()
		code, out := accessCall(t, method, c.url+path, basic, "application/json", body)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, out, want)
		}
		var m map[string]any
		json.Unmarshal([]byte(out), &m)
		return m
	}
	me := call("GET", "/v3/access/users/me", "", 200)["user_id"].(string)
	call("PUT", "/v3/access/users/"+me+"/quota", `{"max_nodes": 1}`, 200)
	p := "/v2/projects/" + call("POST", "/v2/projects", `{"name": "quota-lab"}`, 201)["project_id"].(string)
	call("POST", p+"/nodes", `{"name": "SW1", "node_type": "ethernet_switch", "compute_id": "local"}`, 201)
	refused := call("POST", p+"/nodes", `{"name": "SW2", "node_type": "ethernet_switch", "compute_id": "local"}`, 409)
	if refused["message"] != "quota exceeded: nodes 1/1 for user admin (this needs 1 more)" {
		t.Fatalf("409 says %v", refused)
	}
	usage := call("GET", "/v3/access/users/"+me+"/quota", "", 200)["usage"].(map[string]any)
	if usage["nodes"] != 1.0 || usage["projects"] != 1.0 {
		t.Fatalf("usage %v", usage)
	}
}
