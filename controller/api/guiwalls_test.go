package api_test

import (
	"strings"
	"testing"
	"time"
)

// TestGUINewProjectSendsNullPath: the GUI's "New project" dialog against a
// remote server sends "path": null, which GNS3 takes as "no path" (its
// schemas type path as string or null). So does "Save as", and a project
// rename may carry a null name or path.
func TestGUINewProjectSendsNullPath(t *testing.T) {
	s := newServer(t)
	r := s.must("POST", "/v2/projects", map[string]any{"name": "guilab", "path": nil, "project_id": nil}, 201, rProjects)
	id := r.body["project_id"].(string)
	if r.body["path"] == nil || r.body["path"] == "" {
		t.Fatalf("created project has no path: %s", r.raw)
	}
	u := s.must("PUT", "/v2/projects/"+id, map[string]any{"name": nil, "path": nil, "auto_close": false}, 200, rProject)
	if u.body["name"] != "guilab" || u.body["path"] != r.body["path"] {
		t.Fatalf("null name and path changed the project: %s", u.raw)
	}
	// A null name at creation stays refused: GNS3 crashes on it.
	s.must("POST", "/v2/projects", map[string]any{"name": nil}, 400, rProjects)
}

// TestGUIStatsCountTheSnapshots: the project dialog and gns3fy read the
// snapshots counter of /stats; GNS3 counts the snapshots on disk, closed
// project or opened.
func TestGUIStatsCountTheSnapshots(t *testing.T) {
	s := newServer(t)
	id := s.must("POST", "/v2/projects", map[string]any{"name": "snappy"}, 201, rProjects).body["project_id"].(string)
	s.must("POST", "/v2/projects/"+id+"/snapshots", map[string]any{"name": "one"}, 201, rSnapshots)
	if st := s.must("GET", "/v2/projects/"+id+"/stats", nil, 200, rProject+"/stats"); st.body["snapshots"] != 1.0 {
		t.Fatalf("opened project's stats: %s, want 1 snapshot", st.raw)
	}
	s.must("POST", "/v2/projects/"+id+"/close", nil, 204, rProject+"/close")
	if st := s.must("GET", "/v2/projects/"+id+"/stats", nil, 200, rProject+"/stats"); st.body["snapshots"] != 1.0 || st.body["nodes"] != 0.0 {
		t.Fatalf("closed project's stats: %s, want 1 snapshot and 0 nodes", st.raw)
	}
}

// TestGUIDebugAndShutdownAreForbiddenToARemoteClient: GNS3 answers 403 to
// POST /v2/debug and /v2/shutdown unless it is the GUI's own local
// server; labtap never is one.
func TestGUIDebugAndShutdownAreForbiddenToARemoteClient(t *testing.T) {
	s := newServer(t)
	for _, p := range []string{"/v2/debug", "/v2/shutdown"} {
		r := s.must("POST", p, nil, 403, p)
		if r.body["status"] != 403.0 || r.body["message"] == "" {
			t.Fatalf("POST %s: %s", p, r.raw)
		}
	}
}

// TestGUINewVPCSHasAStartupConfig: GNS3 writes startup.vpc ("set pcname
// <name>") when it creates a VPCS, and the web UI's config editor opens
// it at once (404 made it fail).
func TestGUINewVPCSHasAStartupConfig(t *testing.T) {
	l := newLab(t, false)
	r := l.do("GET", "/v2/projects/"+l.project+"/nodes/"+l.a+"/files/startup.vpc", nil)
	if r.status != 200 || !strings.Contains(string(r.raw), "set pcname PC1\n") {
		t.Fatalf("startup.vpc of a new VPCS: %d %q", r.status, r.raw)
	}
	// An edit is kept: creating the node again (an agent reconnecting)
	// does not write it over.
	if r := l.do("POST", "/v2/projects/"+l.project+"/nodes/"+l.a+"/files/startup.vpc", "set pcname mine\nip 10.0.0.1/24\n"); r.status != 201 {
		t.Fatalf("write startup.vpc: %d %s", r.status, r.raw)
	}
	l.must("POST", "/v2/projects/"+l.project+"/close", nil, 204, rProject+"/close")
	l.must("POST", "/v2/projects/"+l.project+"/open", nil, 201, rProject+"/open")
	if r := l.do("GET", "/v2/projects/"+l.project+"/nodes/"+l.a+"/files/startup.vpc", nil); string(r.raw) != "set pcname mine\nip 10.0.0.1/24\n" {
		t.Fatalf("startup.vpc after reopening: %d %q", r.status, r.raw)
	}
}

// TestCaptureViewLeavingDoesNotAutoCloseTheProject: the browser capture
// view follows its project's notifications as a passive listener: leaving
// it must not close a project with auto_close (which stopped every node),
// and it does not keep one opened either. Only the GNS3 clients' project
// listeners count, as in GNS3.
func TestCaptureViewLeavingDoesNotAutoCloseTheProject(t *testing.T) {
	t.Parallel()
	l := newLive(t, 50*time.Millisecond)
	id := l.call("POST", "/v2/projects", map[string]any{"name": "viewed"}, 201)["project_id"].(string) // auto_close true
	status := func() string { return l.call("GET", "/v2/projects/"+id, nil, 200)["status"].(string) }
	l.listenWS("/v2/projects/" + id + "/notifications/ws?passive=true").close()
	time.Sleep(500 * time.Millisecond) // ten graces
	if s := status(); s != "opened" {
		t.Fatalf("the project is %s after the capture view left", s)
	}
	// A GUI leaving while the view stays: the view does not hold it.
	gui := l.listenWS("/v2/projects/" + id + "/notifications/ws")
	l.listenWS("/v2/projects/" + id + "/notifications/ws?passive=true")
	gui.close()
	deadline := time.Now().Add(20 * time.Second)
	for status() != "closed" {
		if time.Now().After(deadline) {
			t.Fatal("the capture view kept an auto_close project opened after the GUI left")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
