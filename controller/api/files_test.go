package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	rProjectFile = "/v2/projects/{project_id}/files/{path:.+}"
	rNodeFile    = "/v2/projects/{project_id}/nodes/{node_id}/files/{path:.+}"
)

// The GUI's README editor and a VPCS's Edit config: files read and
// written inside their directory only, 404 with "status" when absent (the
// GUI's editor keys on it), the project file never written by a client.
func TestProjectAndNodeFilesStayInTheirDirectory(t *testing.T) {
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	r := l.do("GET", p+"/files/README.txt", nil)
	if r.status != 404 || r.body["status"] != 404.0 || r.header.Get("X-Route") != rProjectFile {
		t.Fatalf("absent README: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", p+"/files/README.txt", "Lab notes\n"); r.status != 201 || len(r.raw) != 0 {
		t.Fatalf("write README: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", p+"/files/README.txt", nil); r.status != 200 || string(r.raw) != "Lab notes\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("read README: %d %q %q", r.status, r.raw, r.header.Get("Content-Type"))
	}
	outside := filepath.Join(l.data, "outside.txt")
	os.WriteFile(outside, []byte("keep"), 0o644)
	for _, path := range []string{"../../outside.txt", "..%2F..%2Foutside.txt", "a/../../../outside.txt"} {
		l.do("POST", p+"/files/"+path, "pwned")
		if r := l.do("GET", p+"/files/"+path, nil); r.status == 200 && string(r.raw) == "keep" {
			t.Errorf("%s read a file outside the project", path)
		}
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Fatalf("a file outside the project was written: %q", data)
	}
	if r := l.do("POST", p+"/files/lab.gns3", "{}"); r.status != 403 {
		t.Fatalf("the project file was writable: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", p+"/files/project-files", nil); r.status != 400 {
		t.Fatalf("a directory: %d %s", r.status, r.raw)
	}

	// Node files: VPCS startup.vpc.
	n := p + "/nodes/" + l.a
	if r := l.do("GET", n+"/files/startup.vpc", nil); r.status != 404 || r.body["status"] != 404.0 || strings.Contains(string(r.raw), l.data) {
		t.Fatalf("absent startup.vpc: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", n+"/files/startup.vpc", "ip 10.0.0.1/24\n"); r.status != 201 || r.header.Get("X-Route") != rNodeFile {
		t.Fatalf("write startup.vpc: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", n+"/files/startup.vpc", nil); r.status != 200 || string(r.raw) != "ip 10.0.0.1/24\n" {
		t.Fatalf("read startup.vpc: %d %q", r.status, r.raw)
	}
	for _, path := range []string{".hidden", "../" + l.b + "/startup.vpc"} {
		if r := l.do("POST", n+"/files/"+path, "x"); r.status == 201 && path == ".hidden" {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	if r := l.do("GET", p+"/nodes/"+l.b+"/files/startup.vpc", nil); r.status != 404 {
		t.Fatalf("a write reached another node's directory: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", n+"/files/big.txt", strings.Repeat("x", 600<<10)); r.status != 413 {
		t.Fatalf("oversized node file: %d", r.status)
	}
}

// Duplicate copies a stopped VPCS with its startup.vpc under the next
// free name; a started one is refused; console resets answer 204.
func TestNodeDuplicateAndConsoleReset(t *testing.T) {
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	l.do("POST", p+"/nodes/"+l.a+"/files/startup.vpc", "ip 10.0.0.1/24\n")
	d := l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 20, "y": 30, "z": 1}, 201, rNode+"/duplicate")
	if d.body["name"] != "PC3" || d.body["node_id"] == l.a || d.body["x"] != 20.0 || d.body["node_type"] != "vpcs" {
		t.Fatalf("duplicate %s", d.raw)
	}
	if r := l.do("GET", p+"/nodes/"+d.body["node_id"].(string)+"/files/startup.vpc", nil); r.status != 200 || string(r.raw) != "ip 10.0.0.1/24\n" {
		t.Fatalf("startup.vpc of the copy: %d %q", r.status, r.raw)
	}
	l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 1}, 400, rNode+"/duplicate")
	l.must("POST", p+"/nodes/"+l.a+"/start", nil, 200, rNode+"/start")
	if r := l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 1, "y": 2}, 409, rNode+"/duplicate"); r.body["message"] != "Cannot duplicate node data while the node is running" {
		t.Fatalf("running %s", r.raw)
	}
	l.must("POST", p+"/nodes/console/reset", nil, 204, "/v2/projects/{project_id}/nodes/console/reset")
	l.must("POST", p+"/nodes/"+l.a+"/console/reset", nil, 204, rNode+"/console/reset")
	l.must("POST", p+"/close", nil, 204, rProject+"/close")
	l.must("POST", p+"/nodes/console/reset", nil, 403, "/v2/projects/{project_id}/nodes/console/reset")
}
