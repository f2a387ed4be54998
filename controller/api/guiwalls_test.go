package api_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentapi "github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
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

// TestGUINodeDialogKeepsGNS3ConsoleTypes: GNS3 lets a VPCS have no console
// (console_type none: console null) and a switch a telnet one; the GUI's
// node dialog sends console_type with the name, label, symbol and
// position in one PUT, so a refusal lost the whole edit. A project file
// holding them opens with them as they are.
func TestGUINodeDialogKeepsGNS3ConsoleTypes(t *testing.T) {
	l := newLab(t, false)
	nodes := "/v2/projects/" + l.project + "/nodes/"
	r := l.must("PUT", nodes+l.a, map[string]any{"name": "Quiet", "x": 40, "y": -20, "symbol": ":/symbols/computer.svg", "console_type": "none"}, 200, rNode)
	if r.body["console_type"] != "none" || r.body["console"] != nil || r.body["name"] != "Quiet" || r.body["x"] != 40.0 {
		t.Fatalf("VPCS set to console none: %s", r.raw)
	}
	if r := l.do("POST", nodes+l.a+"/start", nil); r.status != 200 || r.body["console"] != nil || r.body["console_type"] != "none" {
		t.Fatalf("a started VPCS with console none: %d %s", r.status, r.raw)
	}
	l.must("POST", nodes+l.a+"/stop", nil, 200, rNode+"/stop")
	// (The fake VPCS of these tests has no console port: the port coming
	// back is TestAVPCSWithoutAConsoleHasNoPort's.)
	back := l.must("PUT", nodes+l.a, map[string]any{"console_type": "telnet"}, 200, rNode)
	if back.body["console_type"] != "telnet" {
		t.Fatalf("VPCS back to telnet: %s", back.raw)
	}
	pc := l.must("POST", "/v2/projects/"+l.project+"/nodes", map[string]any{"name": "Mute", "node_type": "vpcs", "compute_id": "local", "console_type": "none"}, 201, rNodes)
	if pc.body["console_type"] != "none" || pc.body["console"] != nil {
		t.Fatalf("VPCS created with console none: %s", pc.raw)
	}
	sw := l.must("POST", "/v2/projects/"+l.project+"/nodes", map[string]any{"name": "SW", "node_type": "ethernet_switch", "compute_id": "local"}, 201, rNodes)
	swID := sw.body["node_id"].(string)
	if r := l.must("PUT", nodes+swID, map[string]any{"name": "Core", "console_type": "telnet"}, 200, rNode); r.body["console_type"] != "telnet" || r.body["name"] != "Core" {
		t.Fatalf("switch set to telnet: %s", r.raw)
	}
	if r := l.do("PUT", nodes+l.a, map[string]any{"name": "Nope", "console_type": "vnc"}); r.status != 400 {
		t.Fatalf("VPCS with a vnc console: %d %s", r.status, r.raw)
	}
	// Closed and opened again (the project file read back): as they were.
	l.must("POST", "/v2/projects/"+l.project+"/close", nil, 204, rProject+"/close")
	l.must("POST", "/v2/projects/"+l.project+"/open", nil, 201, rProject+"/open")
	for id, want := range map[string]string{l.a: "telnet", pc.body["node_id"].(string): "none", swID: "telnet"} {
		if r := l.must("GET", nodes+id, nil, 200, rNode); r.body["console_type"] != want {
			t.Errorf("reopened node %s: console_type %v, want %s", r.body["name"], r.body["console_type"], want)
		}
	}
}

// TestGUISwitchWithAQinQPort: GNS3's switch dialog offers qinq ports
// (with an ethertype); a switch holding one is created, changed, and its
// project opens again.
func TestGUISwitchWithAQinQPort(t *testing.T) {
	l := newLab(t, false)
	ports := []map[string]any{
		{"name": "Ethernet0", "port_number": 0, "type": "qinq", "vlan": 100, "ethertype": "0x88A8"},
		{"name": "Ethernet1", "port_number": 1, "type": "dot1q", "vlan": 1, "ethertype": ""},
		{"name": "Ethernet2", "port_number": 2, "type": "qinq", "vlan": 200, "ethertype": ""},
	}
	sw := l.must("POST", "/v2/projects/"+l.project+"/nodes", map[string]any{"name": "PE", "node_type": "ethernet_switch", "compute_id": "local",
		"properties": map[string]any{"ports_mapping": ports}}, 201, rNodes)
	id := sw.body["node_id"].(string)
	ports[2]["ethertype"] = "0x9100"
	l.must("PUT", "/v2/projects/"+l.project+"/nodes/"+id, map[string]any{"properties": map[string]any{"ports_mapping": ports}}, 200, rNode)
	ports[2]["ethertype"] = "0x1234"
	if r := l.do("PUT", "/v2/projects/"+l.project+"/nodes/"+id, map[string]any{"properties": map[string]any{"ports_mapping": ports}}); r.status != 400 {
		t.Fatalf("an ethertype GNS3 does not offer: %d %s", r.status, r.raw)
	}
	l.must("POST", "/v2/projects/"+l.project+"/close", nil, 204, rProject+"/close")
	l.must("POST", "/v2/projects/"+l.project+"/open", nil, 201, rProject+"/open")
	r := l.must("GET", "/v2/projects/"+l.project+"/nodes/"+id, nil, 200, rNode)
	pm := r.body["properties"].(map[string]any)["ports_mapping"].([]any)
	if p := pm[2].(map[string]any); p["type"] != "qinq" || p["ethertype"] != "0x9100" {
		t.Fatalf("the reopened switch's port 2: %v", p)
	}
}

// newSplitServer is newServer with the agent keeping its files apart from
// the controller's projects, as an agent on another host does.
func newSplitServer(t *testing.T) *server {
	t.Helper()
	data, agentData := t.TempDir(), t.TempDir()
	h := host.New(host.Config{
		DataDir: agentData,
		Runners: map[string]host.RunnerFactory{
			"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
				return node.NewFake(env.Agent, env.OnStop), nil
			},
		},
	})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{Secret: "s"}))
	t.Cleanup(func() { h.Close(); agent.Close() })
	reg := compute.NewRegistry(compute.RegistryConfig{Client: compute.NewClient(compute.ClientConfig{Retries: 1})})
	reg.Add(t.Context(), compute.Compute{ID: "remote", Name: "far", Protocol: "http", Host: "127.0.0.1", Port: 3080, URL: agent.URL, Secret: "s"})
	projectsDir := filepath.Join(data, "projects")
	svc := project.NewService(project.Config{ProjectsDir: projectsDir, Computes: reg.Agents, Store: &topology.Store{Dir: projectsDir, Version: "2.2.59"}})
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", Context: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, app: app, data: data}
}

// TestGUISaveAsOfARunningProject: the GUI's File > Save project as
// duplicates the project while its nodes run (GNS3: 201); the copy holds
// what is on disk and the nodes' files, read from their agents.
func TestGUISaveAsOfARunningProject(t *testing.T) {
	s := newSplitServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "live", "path": nil}, 201, rProjects).body["project_id"].(string)
	var ids []string
	for _, name := range []string{"PC1", "PC2"} {
		n := s.must("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": name, "node_type": "vpcs", "compute_id": "remote"}, 201, rNodes)
		ids = append(ids, n.body["node_id"].(string))
	}
	if r := s.do("POST", "/v2/projects/"+pid+"/nodes/"+ids[0]+"/files/startup.vpc", "set pcname PC1\nip 10.0.0.1/24\n"); r.status != 201 {
		t.Fatalf("write startup.vpc: %d %s", r.status, r.raw)
	}
	s.must("POST", "/v2/projects/"+pid+"/nodes/"+ids[0]+"/start", nil, 200, rNode+"/start")
	dup := s.must("POST", "/v2/projects/"+pid+"/duplicate", map[string]any{"name": "live copy", "path": nil}, 201, rDuplicate)
	did := dup.body["project_id"].(string)
	if dup.body["status"] != "closed" || did == pid {
		t.Fatalf("duplicate: %s", dup.raw)
	}
	if src := s.must("GET", "/v2/projects/"+pid+"/nodes/"+ids[0], nil, 200, rNode); src.body["status"] != "started" {
		t.Fatalf("the source's node after the copy: %s", src.raw)
	}
	copies, _ := filepath.Glob(filepath.Join(s.data, "projects", did, "project-files", "vpcs", "*", "startup.vpc"))
	found := false
	for _, c := range copies {
		data, _ := os.ReadFile(c)
		found = found || string(data) == "set pcname PC1\nip 10.0.0.1/24\n"
	}
	if len(copies) != 2 || !found {
		t.Fatalf("the copy's startup.vpc files: %v (PC1's edit found: %v)", copies, found)
	}
}
