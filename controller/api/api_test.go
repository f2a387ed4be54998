package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	agentapi "github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// server is the controller's API in front of a real agent (on httptest)
// whose nodes are node.Fakes: everything but the emulator is real.
type server struct {
	t    *testing.T
	app  *fiber.App
	data string
	// user and password, when set, go with every request of do.
	user, password string
	api            *api.API
}

func newServer(t *testing.T) *server {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith is newServer with a hook that prepares the data directory
// (e.g. writes project files) before the controller loads it.
func newServerWith(t *testing.T, prepare func(data string)) *server {
	t.Helper()
	return newServerConfig(t, prepare, nil)
}

// newServerConfig is newServerWith with a hook that changes the API's
// settings (authentication, allowed origins) before it is built.
func newServerConfig(t *testing.T, prepare func(data string), configure func(*api.Config)) *server {
	t.Helper()
	return newServerRunning(t, []string{"vpcs"}, prepare, configure)
}

// newServerRunning is newServerConfig whose agent runs fake nodes of the
// given node types (newServerConfig's runs vpcs).
func newServerRunning(t *testing.T, nodeTypes []string, prepare func(data string), configure func(*api.Config)) *server {
	t.Helper()
	data := t.TempDir()
	if prepare != nil {
		prepare(data)
	}
	fake := func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
		return node.NewFake(env.Agent, env.OnStop), nil
	}
	runners := map[string]host.RunnerFactory{}
	for _, typ := range nodeTypes {
		runners[typ] = fake
	}
	h := host.New(host.Config{DataDir: data, Runners: runners})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{Secret: "s"}))
	t.Cleanup(func() { h.Close(); agent.Close() })
	reg := compute.NewRegistry(compute.RegistryConfig{Client: compute.NewClient(compute.ClientConfig{Retries: 1})})
	reg.Add(t.Context(), compute.Compute{ID: "local", Name: "box", Protocol: "http", Host: "127.0.0.1", Port: 3080, URL: agent.URL, Secret: "s"})
	projectsDir := filepath.Join(data, "projects")
	svc := project.NewService(project.Config{
		ProjectsDir: projectsDir,
		Computes:    reg.Agents,
		Store:       &topology.Store{Dir: projectsDir, Version: "2.2.59"},
	})
	for _, err := range svc.Load(t.Context(), nil) {
		t.Logf("load: %v", err) // tests assert what loaded
	}
	cfg := api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", Context: t.Context()}
	if configure != nil {
		configure(&cfg)
	}
	app, a, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, app: app, data: data, user: cfg.User, password: cfg.Password, api: a}
}

type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any // nil unless the body is a JSON object
	list   []any          // nil unless the body is a JSON array
}

// do sends a request; a nil body sends none at all.
func (s *server) do(method, path string, body any) reply {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req := httptest.NewRequest(method, path, rd)
	if s.user != "" {
		req.SetBasicAuth(s.user, s.password)
	}
	resp, err := s.app.Test(req, -1)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	r.raw, _ = io.ReadAll(resp.Body)
	if len(r.raw) > 0 && r.raw[0] == '{' {
		json.Unmarshal(r.raw, &r.body)
	} else if len(r.raw) > 0 && r.raw[0] == '[' {
		json.Unmarshal(r.raw, &r.list)
	}
	return r
}

// must sends a request and checks its status, X-Route and content type.
func (s *server) must(method, path string, body any, status int, route string) reply {
	s.t.Helper()
	return s.mustT(s.t, method, path, body, status, route)
}

// mustT is must reporting to t (a subtest).
func (s *server) mustT(t *testing.T, method, path string, body any, status int, route string) reply {
	t.Helper()
	r := s.do(method, path, body)
	if r.status != status {
		t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, status)
	}
	if got := r.header.Get("X-Route"); got != route {
		t.Fatalf("%s %s: X-Route %q, want %q", method, path, got, route)
	}
	if status == 204 {
		if len(r.raw) != 0 || r.header.Get("Content-Type") != "" {
			t.Fatalf("%s %s: 204 with body %q and content type %q", method, path, r.raw, r.header.Get("Content-Type"))
		}
	} else if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want exactly application/json", method, path, ct)
	}
	return r
}

const (
	rProjects = "/v2/projects"
	rProject  = "/v2/projects/{project_id}"
	rNodes    = "/v2/projects/{project_id}/nodes"
	rNode     = "/v2/projects/{project_id}/nodes/{node_id}"
	rLinks    = "/v2/projects/{project_id}/links"
	rLink     = "/v2/projects/{project_id}/links/{link_id}"
	rStart    = "/v2/projects/{project_id}/links/{link_id}/start_capture"
	rStop     = "/v2/projects/{project_id}/links/{link_id}/stop_capture"
	rPcap     = "/v2/projects/{project_id}/links/{link_id}/pcap"
)

// lab is a project with two VPCS nodes and a link between them.
type lab struct {
	*server
	project, a, b, link string
}

func newLab(t *testing.T, started bool) *lab {
	s := newServer(t)
	l := &lab{server: s}
	l.project = s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	for i, name := range []string{"PC1", "PC2"} {
		n := s.must("POST", "/v2/projects/"+l.project+"/nodes", map[string]any{"name": name, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
		id := n.body["node_id"].(string)
		if i == 0 {
			l.a = id
		} else {
			l.b = id
		}
		if started {
			s.must("POST", "/v2/projects/"+l.project+"/nodes/"+id+"/start", nil, 200, rNode+"/start")
		}
	}
	l.link = s.must("POST", "/v2/projects/"+l.project+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": l.a, "adapter_number": 0, "port_number": 0},
		{"node_id": l.b, "adapter_number": 0, "port_number": 0},
	}}, 201, rLinks).body["link_id"].(string)
	return l
}

func (l *lab) linkPath(suffix string) string {
	return "/v2/projects/" + l.project + "/links/" + l.link + suffix
}

func (l *lab) captureFiles() []string {
	entries, _ := os.ReadDir(filepath.Join(l.data, "projects", l.project, "project-files", "captures"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func keys(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

func TestVersionAndComputesMatchWhatGNS3ClientsCheck(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	v := s.must("GET", "/v2/version", nil, 200, "/v2/version")
	// The GNS3 GUI gives up unless both members are there.
	if v.body["version"] != "2.2.59" || v.body["local"] != false || len(v.body) != 2 {
		t.Fatalf("version = %s", v.raw)
	}
	c := s.must("GET", "/v2/computes", nil, 200, "/v2/computes")
	if len(c.list) != 1 {
		t.Fatalf("computes = %s", c.raw)
	}
	local := c.list[0].(map[string]any)
	want := []string{"capabilities", "compute_id", "connected", "cpu_usage_percent", "draining", "host", "last_error",
		"memory_usage_percent", "name", "port", "protocol", "user"}
	if got := keys(local); !slices.Equal(got, want) {
		t.Fatalf("compute keys %v, want %v", got, want)
	}
	if local["compute_id"] != "local" || local["connected"] != true || local["user"] != nil || local["last_error"] != nil {
		t.Fatalf("local compute = %v", local)
	}
	caps := local["capabilities"].(map[string]any)
	if caps["version"] != "2.2.59" || !slices.Contains(caps["node_types"].([]any), any("vpcs")) {
		t.Fatalf("capabilities = %v", caps)
	}
}

func TestProjectRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	p := s.must("POST", "/v2/projects", map[string]any{"name": "Lab 1", "auto_close": false}, 201, rProjects)
	want := []string{"auto_close", "auto_open", "auto_start", "drawing_grid_size", "filename", "grid_size", "name", "path",
		"project_id", "scene_height", "scene_width", "show_grid", "show_interface_labels", "show_layers", "snap_to_grid",
		"status", "supplier", "variables", "zoom"}
	if got := keys(p.body); !slices.Equal(got, want) {
		t.Fatalf("project keys %v", got)
	}
	id := p.body["project_id"].(string)
	if p.body["status"] != "opened" || p.body["auto_close"] != false || p.body["filename"] != "Lab 1.gns3" ||
		p.body["supplier"] != nil || p.body["scene_width"] != 2000.0 {
		t.Fatalf("project = %s", p.raw)
	}
	if _, err := os.Stat(filepath.Join(p.body["path"].(string), "Lab 1.gns3")); err != nil {
		t.Fatalf("project file not written: %v", err)
	}
	s.must("GET", "/v2/projects/"+id, nil, 200, rProject)
	if l := s.must("GET", "/v2/projects", nil, 200, rProjects); len(l.list) != 1 {
		t.Fatalf("projects = %s", l.raw)
	}
	r := s.must("POST", "/v2/projects", map[string]any{"name": "Lab 1"}, 409, rProjects)
	if r.body["message"] != `Project "Lab 1" already exists` {
		t.Fatalf("duplicate: %s", r.raw)
	}
	r = s.must("GET", "/v2/projects/nope", nil, 404, rProject)
	if r.body["message"] != "Project ID nope doesn't exist" || r.body["status"] != 404.0 || len(r.body) != 2 {
		t.Fatalf("unknown project: %s", r.raw)
	}
	s.must("DELETE", "/v2/projects/"+id, nil, 204, rProject)
	if _, err := os.Stat(p.body["path"].(string)); !os.IsNotExist(err) {
		t.Fatalf("project directory still there: %v", err)
	}
	s.must("DELETE", "/v2/projects/"+id, nil, 404, rProject)
}

func TestBadRequestsGetGNS3sFiveMemberBody(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	tests := []struct {
		name string
		body any
	}{
		{"missing name", map[string]any{}},
		{"null name (GNS3 crashes)", map[string]any{"name": nil}},
		{"empty name", map[string]any{"name": ""}},
		{"unknown member", map[string]any{"name": "x", "colour": "red"}},
		{"wrong type", map[string]any{"name": "x", "zoom": "big"}},
		{"float for an integer", `{"name": "x", "zoom": 1.5}`},
		{"malformed JSON", `{"name": `},
		{"not an object", `[1, 2]`},
		{"bad uuid", map[string]any{"name": "x", "project_id": "1234"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.mustT(t, "POST", "/v2/projects", tt.body, 400, rProjects)
			if got := keys(r.body); !slices.Equal(got, []string{"message", "method", "path", "request", "status"}) {
				t.Fatalf("400 body keys %v: %s", got, r.raw)
			}
			if r.body["path"] != rProjects || r.body["method"] != "POST" || r.body["status"] != 400.0 {
				t.Fatalf("400 body %s", r.raw)
			}
		})
	}
	r := s.do("POST", "/v2/projects", `{"name": `)
	if req := r.body["request"].(map[string]any); req["malformed_json"] != `{"name": ` {
		t.Fatalf("malformed JSON request member: %s", r.raw)
	}
	if l := s.must("GET", "/v2/projects", nil, 200, rProjects); len(l.list) != 0 {
		t.Fatalf("a refused request created a project: %s", l.raw)
	}
}

func TestNodeRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	nodes := "/v2/projects/" + pid + "/nodes"
	// A whole node object sent back, read-only members included, is fine.
	n := s.must("POST", nodes, map[string]any{
		"name": "PC 1", "node_type": "vpcs", "compute_id": "local", "x": -10, "y": 20,
		"status": "started", "ports": []any{}, "width": 1, "height": 2, "console_host": "h", "command_line": "x",
	}, 201, rNodes)
	want := []string{"command_line", "compute_id", "console", "console_auto_start", "console_host", "console_type",
		"custom_adapters", "first_port_name", "height", "label", "locked", "name", "node_directory", "node_id", "node_type",
		"port_name_format", "port_segment_size", "ports", "project_id", "properties", "status", "symbol", "template_id",
		"width", "x", "y", "z"}
	if got := keys(n.body); !slices.Equal(got, want) {
		t.Fatalf("node keys %v", got)
	}
	if n.body["name"] != "PC1" || n.body["status"] != "stopped" || n.body["x"] != -10.0 || n.body["z"] != 1.0 ||
		n.body["width"] != 65.0 || n.body["template_id"] != nil || n.body["symbol"] != ":/symbols/computer.svg" {
		t.Fatalf("node = %s", n.raw)
	}
	ports := n.body["ports"].([]any)
	port := ports[0].(map[string]any)
	if len(ports) != 1 || port["name"] != "Ethernet0" || port["short_name"] != "e0" || port["link_type"] != "ethernet" ||
		port["adapter_number"] != 0.0 || port["port_number"] != 0.0 {
		t.Fatalf("ports = %v", ports)
	}
	id := n.body["node_id"].(string)
	started := s.must("POST", nodes+"/"+id+"/start", nil, 200, rNode+"/start")
	if started.body["status"] != "started" { // GNS3 may still say stopped here; we wait for the agent
		t.Fatalf("start = %s", started.raw)
	}
	s.must("POST", nodes+"/"+id+"/stop", nil, 200, rNode+"/stop")
	s.must("GET", nodes+"/"+id, nil, 200, rNode)
	if l := s.must("GET", nodes, nil, 200, rNodes); len(l.list) != 1 {
		t.Fatalf("nodes = %s", l.raw)
	}

	errs := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"unknown compute", map[string]any{"name": "x", "node_type": "vpcs", "compute_id": "nowhere"}, 404, "Compute ID nowhere doesn't exist"},
		{"unsupported type", map[string]any{"name": "x", "node_type": "qemu", "compute_id": "local"}, 409, "Node type qemu is not supported by compute local"},
		{"unknown type", map[string]any{"name": "x", "node_type": "router", "compute_id": "local"}, 400, ""},
		{"auto placement of a type no compute runs", map[string]any{"name": "x", "node_type": "qemu", "compute_id": "auto"}, 409, "No compute can take a qemu node (local: does not run qemu)"},
		{"bad label member", map[string]any{"name": "x", "node_type": "vpcs", "compute_id": "local", "label": map[string]any{"text": "a", "font": 1}}, 400, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := s.mustT(t, "POST", nodes, tt.body, tt.status, rNodes)
			if tt.msg != "" && r.body["message"] != tt.msg {
				t.Fatalf("message %q, want %q", r.body["message"], tt.msg)
			}
		})
	}
	// GNS3 3.x allocates a compute when compute_id is unset; "auto" asks
	// the same. The only compute here is local.
	for _, body := range []map[string]any{{"name": "placed1", "node_type": "vpcs"}, {"name": "placed2", "node_type": "vpcs", "compute_id": "auto"}} {
		r := s.must("POST", nodes, body, 201, rNodes)
		if r.body["compute_id"] != "local" {
			t.Fatalf("placed node: %s", r.raw)
		}
		s.must("DELETE", nodes+"/"+r.body["node_id"].(string), nil, 204, rNode)
	}
	r := s.must("GET", nodes+"/nope", nil, 404, rNode)
	if r.body["message"] != "Node ID nope doesn't exist" {
		t.Fatalf("unknown node: %s", r.raw)
	}
	s.must("DELETE", nodes+"/"+id, nil, 204, rNode)
	if l := s.must("GET", nodes, nil, 200, rNodes); len(l.list) != 0 {
		t.Fatalf("nodes after delete = %s", l.raw)
	}
}

func TestLinkRoutes(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	link := l.must("GET", l.linkPath(""), nil, 200, rLink)
	want := []string{"capture", "capture_compute_id", "capture_file_name", "capture_file_path", "capturing", "filters", "link_id",
		"link_style", "link_type", "nodes", "project_id", "suspend"}
	if got := keys(link.body); !slices.Equal(got, want) {
		t.Fatalf("link keys %v", got)
	}
	if link.body["capturing"] != false || link.body["capture_file_name"] != nil || link.body["link_type"] != "ethernet" {
		t.Fatalf("link = %s", link.raw)
	}
	ep := link.body["nodes"].([]any)[0].(map[string]any)
	if lbl := ep["label"].(map[string]any); lbl["text"] != "0/0" {
		t.Fatalf("endpoint label = %v", lbl)
	}
	links := "/v2/projects/" + l.project + "/links"
	ends := func(n ...string) []map[string]any {
		var out []map[string]any
		for _, id := range n {
			out = append(out, map[string]any{"node_id": id, "adapter_number": 0, "port_number": 0})
		}
		return out
	}
	errs := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"half link on a used port", map[string]any{"nodes": ends(l.a)}, 409, "Port is already used"},
		{"missing nodes (GNS3 crashes)", map[string]any{}, 400, ""},
		{"three endpoints", map[string]any{"nodes": ends(l.a, l.b, l.a)}, 400, ""},
		{"unknown node", map[string]any{"nodes": ends("00000000-0000-4000-8000-000000000000")}, 404,
			"Node ID 00000000-0000-4000-8000-000000000000 doesn't exist"},
		{"used port in a full link", map[string]any{"nodes": ends(l.a, l.b)}, 409, "Port is already used"},
		{"extra endpoint member", map[string]any{"nodes": []map[string]any{{"node_id": l.a, "adapter_number": 0, "port_number": 0, "x": 1}}}, 400, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := l.mustT(t, "POST", links, tt.body, tt.status, rLinks)
			if tt.msg != "" && r.body["message"] != tt.msg {
				t.Fatalf("message %q, want %q", r.body["message"], tt.msg)
			}
		})
	}
	r := l.must("GET", links+"/nope", nil, 404, rLink)
	if r.body["message"] != "Link ID nope doesn't exist" {
		t.Fatalf("unknown link: %s", r.raw)
	}
	l.must("DELETE", l.linkPath(""), nil, 204, rLink)
	l.must("GET", l.linkPath(""), nil, 404, rLink)
}

func TestStartCaptureAcceptsNoBodyOrAnEmptyObject(t *testing.T) {
	t.Parallel()
	for _, body := range []any{nil, "{}", "  "} {
		l := newLab(t, true)
		r := l.must("POST", l.linkPath("/start_capture"), body, 201, rStart)
		name := "PC1_0-0_to_PC2_0-0.pcap"
		wantPath := filepath.Join(l.data, "projects", l.project, "project-files", "captures", name)
		if r.body["capturing"] != true || r.body["capture_compute_id"] != "local" ||
			r.body["capture_file_name"] != name || r.body["capture_file_path"] != wantPath {
			t.Fatalf("body %v: %s", body, r.raw)
		}
		if _, err := os.Stat(wantPath); err != nil {
			t.Fatalf("capture file: %v", err)
		}
		stop := l.must("POST", l.linkPath("/stop_capture"), nil, 201, rStop)
		// GNS3 keeps the name and path after a stop and clears the compute.
		if stop.body["capturing"] != false || stop.body["capture_compute_id"] != nil ||
			stop.body["capture_file_name"] != name || stop.body["capture_file_path"] != wantPath {
			t.Fatalf("after stop: %s", stop.raw)
		}
	}
}

func TestBadCaptureRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	tests := []struct {
		name   string
		path   string
		body   any
		status int
		msg    string
	}{
		{"unknown data link type", l.linkPath("/start_capture"), map[string]any{"data_link_type": "DLT_RAW"}, 400, ""},
		{"lower-case data link type", l.linkPath("/start_capture"), map[string]any{"data_link_type": "dlt_en10mb"}, 400, ""},
		{"malformed JSON", l.linkPath("/start_capture"), `{"data_link_type":`, 400, ""},
		{"unknown member", l.linkPath("/start_capture"), map[string]any{"filter": "icmp"}, 400, ""},
		{"wrong type", l.linkPath("/start_capture"), map[string]any{"capture_file_name": 42}, 400, ""},
		{"null file name", l.linkPath("/start_capture"), map[string]any{"capture_file_name": nil}, 400, ""},
		{"query parameter merged and refused", l.linkPath("/start_capture?x=1"), nil, 400, ""},
		{"name with nothing usable", l.linkPath("/start_capture"), map[string]any{"capture_file_name": "../.."}, 400, ""},
		{"unknown format", l.linkPath("/start_capture"), map[string]any{"capture_format": "erf"}, 400, ""},
		{"files too small", l.linkPath("/start_capture"), map[string]any{"capture_max_bytes": 1000}, 400, ""},
		{"a ring without a limit", l.linkPath("/start_capture"), map[string]any{"capture_ring_files": 3}, 400, ""},
		{"a filter libpcap refuses", l.linkPath("/start_capture"), map[string]any{"capture_filter": "icmp and and"}, 400, ""},
		{"unknown link", "/v2/projects/" + l.project + "/links/nope/start_capture", "{}", 404, "Link ID nope doesn't exist"},
		{"unknown project", "/v2/projects/nope/links/" + l.link + "/start_capture", "{}", 404, "Project ID nope doesn't exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := l.mustT(t, "POST", tt.path, tt.body, tt.status, rStart)
			if tt.msg != "" && r.body["message"] != tt.msg {
				t.Fatalf("message %q, want %q", r.body["message"], tt.msg)
			}
			if link := l.mustT(t, "GET", l.linkPath(""), nil, 200, rLink); link.body["capturing"] != false || link.body["capture_file_name"] != nil {
				t.Fatalf("the link changed: %s", link.raw)
			}
			if files := l.captureFiles(); len(files) != 0 {
				t.Fatalf("files written: %v", files)
			}
		})
	}
}

func TestCaptureFileNameCannotLeaveTheCapturesFolder(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	for _, name := range []string{"../../../../escape.pcap", "/tmp/abs.pcap", `..\..\win.pcap`, "sub/dir/x.pcap"} {
		r := l.must("POST", l.linkPath("/start_capture"), map[string]any{"capture_file_name": name}, 201, rStart)
		path := r.body["capture_file_path"].(string)
		dir := filepath.Join(l.data, "projects", l.project, "project-files", "captures")
		if filepath.Dir(path) != dir || strings.Contains(r.body["capture_file_name"].(string), "/") {
			t.Fatalf("%q captured to %s", name, path)
		}
		l.must("POST", l.linkPath("/stop_capture"), nil, 201, rStop)
	}
	if _, err := os.Stat(filepath.Join(l.data, "escape.pcap")); err == nil {
		t.Fatal("a capture escaped")
	}
}

func TestCaptureConflicts(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	r := l.must("POST", l.linkPath("/start_capture"), "{}", 409, rStart)
	if r.body["message"] != "Cannot capture because there is no running device on this link" {
		t.Fatalf("no running node: %s", r.raw)
	}
	r = l.must("GET", l.linkPath("/pcap"), nil, 409, rPcap)
	if r.body["message"] != "This link has no active packet capture" {
		t.Fatalf("pcap without capture: %s", r.raw)
	}
	l.must("POST", "/v2/projects/"+l.project+"/nodes/"+l.a+"/start", nil, 200, rNode+"/start")
	l.must("POST", l.linkPath("/start_capture"), map[string]any{"data_link_type": "DLT_C_HDLC"}, 201, rStart)
	r = l.must("POST", l.linkPath("/start_capture"), "{}", 409, rStart)
	if r.body["message"] != "Packet capture is already active on this link" {
		t.Fatalf("second start: %s", r.raw)
	}
	if link := l.must("GET", l.linkPath(""), nil, 200, rLink); link.body["capturing"] != true {
		t.Fatalf("the refused start changed the link: %s", link.raw)
	}
	// Stopping the capture side's node stops the capture.
	l.must("POST", "/v2/projects/"+l.project+"/nodes/"+l.a+"/stop", nil, 200, rNode+"/stop")
	if link := l.must("GET", l.linkPath(""), nil, 200, rLink); link.body["capturing"] != false {
		t.Fatalf("capture survived its node: %s", link.raw)
	}
}

func TestUnknownRoutesAndMethodsAnswerJSON(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.do("GET", "/v2/nope", nil)
	if r.status != 404 || r.header.Get("Content-Type") != "application/json" || r.body["status"] != 404.0 {
		t.Fatalf("unknown route: %d %s", r.status, r.raw)
	}
	r = s.do("DELETE", "/v2/version", nil)
	if r.status != 405 || r.header.Get("Allow") != "GET,POST" || r.body["status"] != 405.0 {
		t.Fatalf("wrong method: %d %q %s", r.status, r.header.Get("Allow"), r.raw)
	}
}

func TestNoCaptureEverOverwritesAnother(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	// A second link, between two more started nodes.
	var ids []string
	for _, name := range []string{"PC3", "PC4"} {
		n := l.must("POST", "/v2/projects/"+l.project+"/nodes", map[string]any{"name": name, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
		ids = append(ids, n.body["node_id"].(string))
		l.must("POST", "/v2/projects/"+l.project+"/nodes/"+ids[len(ids)-1]+"/start", nil, 200, rNode+"/start")
	}
	other := l.must("POST", "/v2/projects/"+l.project+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": ids[0], "adapter_number": 0, "port_number": 0},
		{"node_id": ids[1], "adapter_number": 0, "port_number": 0},
	}}, 201, rLinks).body["link_id"].(string)
	otherPath := "/v2/projects/" + l.project + "/links/" + other

	// (a) A name another link's running capture writes is refused, naming it.
	l.must("POST", l.linkPath("/start_capture"), map[string]any{"capture_file_name": "same"}, 201, rStart)
	r := l.must("POST", otherPath+"/start_capture", map[string]any{"capture_file_name": "same"}, 409, rStart)
	if msg, _ := r.body["message"].(string); !strings.Contains(msg, l.link) {
		t.Fatalf("409 does not name the link that writes the file: %s", r.raw)
	}
	l.must("POST", l.linkPath("/stop_capture"), nil, 201, rStop)
	dir := filepath.Join(l.data, "projects", l.project, "project-files", "captures")
	before, err := os.ReadFile(filepath.Join(dir, "same.pcap"))
	if err != nil || len(before) < 24 {
		t.Fatalf("the first capture: %d bytes, %v", len(before), err)
	}

	// (b) The same name again, on either link: a new file, the old one kept.
	for i, path := range []string{l.linkPath(""), otherPath} {
		got := l.must("POST", path+"/start_capture", map[string]any{"capture_file_name": "same"}, 201, rStart)
		want := fmt.Sprintf("same-%d.pcap", i+2)
		if got.body["capture_file_name"] != want || !strings.HasSuffix(got.body["capture_file_path"].(string), "/"+want) {
			t.Fatalf("restarted capture: name %v path %v, want %s", got.body["capture_file_name"], got.body["capture_file_path"], want)
		}
		if shown := l.must("GET", path, nil, 200, rLink); shown.body["capture_file_name"] != want {
			t.Fatalf("the link says %v, want %s", shown.body["capture_file_name"], want)
		}
		l.must("POST", path+"/stop_capture", nil, 201, rStop)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "same.pcap")); !bytes.Equal(after, before) {
		t.Fatalf("the first capture changed: %d bytes, was %d", len(after), len(before))
	}
	// The default name too.
	first := l.must("POST", l.linkPath("/start_capture"), nil, 201, rStart).body["capture_file_name"].(string)
	l.must("POST", l.linkPath("/stop_capture"), nil, 201, rStop)
	second := l.must("POST", l.linkPath("/start_capture"), nil, 201, rStart).body["capture_file_name"].(string)
	if second != strings.TrimSuffix(first, ".pcap")+"-2.pcap" {
		t.Fatalf("default name again: %s after %s", second, first)
	}
}

func TestInputIsBoundedAndARefusedCreateLeavesNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	projects := filepath.Join(s.data, "projects")
	before, _ := os.ReadDir(projects)
	for name, body := range map[string]map[string]any{
		"300 characters":           {"name": strings.Repeat("p", 300)},
		"256 bytes in 128 letters": {"name": strings.Repeat("é", 128)},
		"a newline":                {"name": "two\nlines"},
		"a NUL":                    {"name": "nul\x00"},
		"a C1 control":             {"name": "c1\u0085"},
		"negative grid":            {"name": "g", "grid_size": -1},
		"negative drawing grid":    {"name": "g", "drawing_grid_size": -5},
	} {
		r := s.do("POST", "/v2/projects", body)
		if r.status != 400 || r.body["status"] != 400.0 || r.body["message"] == "" {
			t.Fatalf("project with %s: %d %s", name, r.status, r.raw)
		}
	}
	if after, _ := os.ReadDir(projects); len(after) != len(before) {
		t.Fatalf("refused creates left %d entries in the projects directory, %d before", len(after), len(before))
	}
	// 255 bytes is a name, and its project file fits the file system.
	long := strings.Repeat("é", 127) + "x"
	p := s.must("POST", "/v2/projects", map[string]any{"name": long}, 201, rProjects)
	if _, err := os.Stat(filepath.Join(p.body["path"].(string), p.body["filename"].(string))); err != nil {
		t.Fatalf("the project file of a 255-byte name: %v", err)
	}
	id := p.body["project_id"].(string)
	s.must("PUT", "/v2/projects/"+id, map[string]any{"name": "tab\there"}, 400, rProject)
	for name, node := range map[string]string{"300 bytes": strings.Repeat("n", 300), "an escape": "PC\x1b[2J"} {
		r := s.do("POST", "/v2/projects/"+id+"/nodes", map[string]any{"name": node, "node_type": "vpcs", "compute_id": "local"})
		if r.status != 400 {
			t.Fatalf("node with %s: %d %s", name, r.status, r.raw)
		}
	}
	// A 255-byte node name that numbering would make longer.
	n255 := strings.Repeat("n", 254) + "1"
	s.must("POST", "/v2/projects/"+id+"/nodes", map[string]any{"name": n255, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
	s.must("POST", "/v2/projects/"+id+"/nodes", map[string]any{"name": n255, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes) // n...2
	s.must("POST", "/v2/projects/"+id+"/nodes", map[string]any{"name": strings.Repeat("n", 255), "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
	if r := s.do("POST", "/v2/projects/"+id+"/nodes", map[string]any{"name": strings.Repeat("n", 255), "node_type": "vpcs", "compute_id": "local"}); r.status != 400 {
		t.Fatalf("a taken 255-byte name numbered past 255 bytes: %d %s", r.status, r.raw)
	}
	for name, body := range map[string]map[string]any{
		"a NUL host":          {"protocol": "http", "host": "\u0000", "port": 3081},
		"a host with a space": {"protocol": "http", "host": "a b", "port": 3081},
		"port 0":              {"protocol": "http", "host": "127.0.0.1", "port": 0},
		"port 65536":          {"protocol": "http", "host": "127.0.0.1", "port": 65536},
		"a long name":         {"protocol": "http", "host": "127.0.0.1", "port": 9, "name": strings.Repeat("c", 256)},
		"a control name":      {"protocol": "http", "host": "127.0.0.1", "port": 9, "name": "c\x07"},
	} {
		if r := s.do("POST", "/v2/computes", body); r.status != 400 {
			t.Fatalf("compute with %s: %d %s", name, r.status, r.raw)
		}
	}
}

// A compute id is a path segment of its routes, which take it as sent
// (escaped): an id that only reads the same escaped ("../../etc", "a b",
// "50%", "ü") made a compute no GET, PUT or DELETE could reach (DELETE
// answered 204 and left it, polled for ever). Such ids are refused.
func TestComputeIDsAreReachableByTheirRoutes(t *testing.T) {
	s := newServer(t)
	for i, id := range []string{"../../etc", "a/b", "a b", "50%", "q?x", "h#x", "ü"} {
		r := s.do("POST", "/v2/computes", map[string]any{"compute_id": id, "protocol": "http", "host": "127.0.0.1", "port": 9, "name": fmt.Sprint("c", i)})
		if r.status != 400 || r.body["message"] == nil {
			t.Errorf("compute id %q: %d %s, want 400", id, r.status, r.raw)
		}
	}
	if c := s.must("GET", "/v2/computes", nil, 200, "/v2/computes"); len(c.list) != 1 {
		t.Fatalf("computes: %s", c.raw)
	}
	// Ids GNS3 makes stay: a uuid, host:port, names with dots and dashes.
	for _, id := range []string{"0f0e0d0c-0b0a-4909-8807-060504030201", "box:3080", "lab-2.example_1"} {
		s.must("POST", "/v2/computes", map[string]any{"compute_id": id, "protocol": "http", "host": "127.0.0.1", "port": 9, "name": id}, 201, "/v2/computes")
		s.must("GET", "/v2/computes/"+id, nil, 200, "/v2/computes/{compute_id}")
		s.must("DELETE", "/v2/computes/"+id, nil, 204, "/v2/computes/{compute_id}")
	}
}
