package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	"github.com/labtap/labtap/controller/web"
	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

func TestVersionCheck(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.must("POST", "/v2/version", map[string]any{"version": "2.2.59", "local": true}, 200, "/v2/version")
	if r.body["version"] != "2.2.59" {
		t.Fatalf("check: %s", r.raw)
	}
	r = s.must("POST", "/v2/version", map[string]any{"version": "2.2.60"}, 409, "/v2/version")
	if r.body["message"] != "Client version 2.2.60 is not the same as server version 2.2.59" {
		t.Fatalf("mismatch: %s", r.raw)
	}
	s.must("POST", "/v2/version", map[string]any{}, 400, "/v2/version")
	s.must("POST", "/v2/version", map[string]any{"version": "2.2.59", "extra": 1}, 400, "/v2/version")
}

func TestComputeRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const route = "/v2/computes/{compute_id}"
	// An agent that is not there is registered anyway, not connected.
	c := s.must("POST", "/v2/computes", map[string]any{"compute_id": "far", "protocol": "http", "host": "127.0.0.1", "port": 9, "user": "bob", "password": "secret"}, 201, "/v2/computes")
	if c.body["connected"] != false || c.body["name"] != "http://bob@127.0.0.1:9" || c.body["user"] != "bob" {
		t.Fatalf("created: %s", c.raw)
	}
	if strings.Contains(string(c.raw), "secret") {
		t.Fatal("a compute reply holds its password")
	}
	// The same id again returns it unchanged.
	again := s.must("POST", "/v2/computes", map[string]any{"compute_id": "far", "protocol": "http", "host": "10.0.0.1", "port": 1}, 201, "/v2/computes")
	if again.body["host"] != "127.0.0.1" {
		t.Fatalf("same id: %s", again.raw)
	}
	r := s.must("POST", "/v2/computes", map[string]any{"name": "http://bob@127.0.0.1:9", "protocol": "http", "host": "h", "port": 1}, 409, "/v2/computes")
	if r.body["message"] != `Compute name "http://bob@127.0.0.1:9" already exists` {
		t.Fatalf("duplicate name: %s", r.raw)
	}
	s.must("POST", "/v2/computes", map[string]any{"compute_id": "local", "protocol": "http", "host": "h", "port": 1}, 201, "/v2/computes") // existing: returned
	s.must("POST", "/v2/computes", map[string]any{"compute_id": "vm", "protocol": "http", "host": "h", "port": 1}, 400, "/v2/computes")
	s.must("POST", "/v2/computes", map[string]any{"protocol": "ftp", "host": "h", "port": 1}, 400, "/v2/computes")
	s.must("POST", "/v2/computes", map[string]any{"protocol": "http", "host": "h"}, 400, "/v2/computes")
	if l := s.must("GET", "/v2/computes", nil, 200, "/v2/computes"); len(l.list) != 2 {
		t.Fatalf("computes: %s", l.raw)
	}
	u := s.must("PUT", "/v2/computes/far", map[string]any{"name": "Far", "compute_id": "ignored"}, 200, route)
	if u.body["name"] != "Far" || u.body["compute_id"] != "far" {
		t.Fatalf("update: %s", u.raw)
	}
	s.must("PUT", "/v2/computes/local", map[string]any{"port": 1}, 409, route)
	s.must("GET", "/v2/computes/far", nil, 200, route)
	s.must("GET", "/v2/computes/nope", nil, 404, route)
	s.must("DELETE", "/v2/computes/far", nil, 204, route)
	s.must("DELETE", "/v2/computes/far", nil, 204, route) // unknown: still 204
	s.must("GET", "/v2/computes/far", nil, 404, route)
	s.must("DELETE", "/v2/computes/local", nil, 409, route)
}

func TestComputesAreSavedAcrossRestarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "computes.json")
	r := compute.NewRegistry(compute.RegistryConfig{Path: path, Client: quickClient()})
	if _, err := r.Create(t.Context(), compute.Compute{ID: "c1", Name: "one", Protocol: "http", Host: "127.0.0.1", Port: 9, Password: "pw"}, compute.Grant{}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("computes file: %v, mode %v (it holds passwords)", err, info.Mode())
	}
	again := compute.NewRegistry(compute.RegistryConfig{Path: path, Client: quickClient()})
	if err := again.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, ok := again.Get("c1"); !ok || c.Name != "one" || c.Password != "pw" || c.URL != "http://127.0.0.1:9" {
		t.Fatalf("reloaded compute %+v", c)
	}
}

func TestProjectLifecycleRoutes(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	p := "/v2/projects/" + l.project
	u := l.must("PUT", p, map[string]any{"zoom": 120, "project_id": l.project}, 200, rProject) // project_id accepted (GNS3: 400)
	if u.body["zoom"] != 120.0 {
		t.Fatalf("update: %s", u.raw)
	}
	if u := l.must("PUT", p, map[string]any{"name": nil}, 200, rProject); u.body["name"] != "lab" { // GNS3's schema allows null: absent
		t.Fatalf("update with a null name: %s", u.raw)
	}
	st := l.must("GET", p+"/stats", nil, 200, rProject+"/stats")
	if st.body["nodes"] != 2.0 || st.body["links"] != 1.0 || st.body["drawings"] != 0.0 || st.body["snapshots"] != 0.0 {
		t.Fatalf("stats: %s", st.raw)
	}
	l.must("POST", l.linkPath("/start_capture"), nil, 201, rStart)
	l.must("POST", p+"/close", nil, 204, rProject+"/close")
	l.must("POST", p+"/close", nil, 204, rProject+"/close") // closing a closed project is fine
	// (GNS3 checks the body first: each request here is valid.)
	for _, tc := range []struct {
		method, path, route string
		body                any
	}{
		{"GET", p + "/nodes/" + l.a, rNode, nil},
		{"POST", p + "/nodes/" + l.a + "/start", rNode + "/start", nil},
		{"GET", l.linkPath(""), rLink, nil},
		{"POST", p + "/links", rLinks, map[string]any{"nodes": []any{}}},
		{"POST", p + "/nodes", rNodes, map[string]any{"name": "x", "node_type": "vpcs", "compute_id": "local"}},
		{"POST", l.linkPath("/start_capture"), rStart, nil},
	} {
		r := l.must(tc.method, tc.path, tc.body, 403, tc.route)
		if r.body["message"] != "The project is not opened" {
			t.Fatalf("%s %s on a closed project: %s", tc.method, tc.path, r.raw)
		}
	}
	// A closed project lists its file's entries, with no runtime members.
	nodes := l.must("GET", p+"/nodes", nil, 200, rNodes)
	if len(nodes.list) != 2 {
		t.Fatalf("closed project nodes: %s", nodes.raw)
	}
	if _, ok := nodes.list[0].(map[string]any)["status"]; ok {
		t.Fatalf("a closed project's node entry has a status: %s", nodes.raw)
	}
	links := l.must("GET", p+"/links", nil, 200, rLinks)
	if got := keys(links.list[0].(map[string]any)); !slices.Equal(got, []string{"filters", "link_id", "link_style", "nodes", "suspend"}) {
		t.Fatalf("closed project link keys %v", got)
	}
	if st := l.must("GET", p+"/stats", nil, 200, rProject+"/stats"); st.body["nodes"] != 0.0 {
		t.Fatalf("closed stats: %s", st.raw)
	}
	o := l.must("POST", p+"/open", nil, 201, rProject+"/open")
	if o.body["status"] != "opened" {
		t.Fatalf("open: %s", o.raw)
	}
	link := l.must("GET", l.linkPath(""), nil, 200, rLink)
	if link.body["capturing"] != false || link.body["capture_file_name"] != nil {
		t.Fatalf("captures must not survive a close: %s", link.raw)
	}
	l.must("POST", "/v2/projects/nope/open", nil, 404, rProject+"/open")
}

func TestNodeRoutesForBulkUpdateAndLinks(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	for _, op := range []string{"start", "stop", "reload"} {
		l.must("POST", p+"/nodes/"+op, nil, 204, rNodes+"/"+op)
	}
	l.must("POST", p+"/nodes/suspend", nil, 204, rNodes+"/suspend") // VPCS cannot: skipped
	n := l.must("GET", p+"/nodes/"+l.a, nil, 200, rNode)
	if n.body["status"] != "started" {
		t.Fatalf("after reload all: %s", n.raw)
	}
	r := l.must("POST", p+"/nodes/"+l.a+"/suspend", nil, 409, rNode+"/suspend")
	if r.body["message"] != "Suspend is not supported by vpcs nodes" {
		t.Fatalf("suspend: %s", r.raw)
	}
	l.must("POST", p+"/nodes/"+l.a+"/reload", nil, 200, rNode+"/reload")
	// GET-modify-PUT round trip with every read-only member (GNS3: 500).
	var whole map[string]any
	json.Unmarshal(n.raw, &whole)
	whole["x"], whole["name"] = 77.0, "Router 1"
	u := l.must("PUT", p+"/nodes/"+l.a, whole, 200, rNode)
	if u.body["x"] != 77.0 || u.body["name"] != "Router1" || u.body["label"].(map[string]any)["text"] != "Router1" {
		t.Fatalf("round trip: %s", u.raw)
	}
	l.must("PUT", p+"/nodes/"+l.a, map[string]any{"colour": "red"}, 400, rNode)
	nl := l.must("GET", p+"/nodes/"+l.a+"/links", nil, 200, rNode+"/links")
	if len(nl.list) != 1 || nl.list[0].(map[string]any)["link_id"] != l.link {
		t.Fatalf("node links: %s", nl.raw)
	}
	l.must("GET", p+"/nodes/nope/links", nil, 404, rNode+"/links")
}

func TestLinkUpdateAndAvailableFilters(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	const rFilters = "/v2/projects/{project_id}/links/{link_id}/available_filters"
	af := l.must("GET", l.linkPath("/available_filters"), nil, 200, rFilters)
	var types []string
	for _, f := range af.list {
		types = append(types, f.(map[string]any)["type"].(string))
	}
	if !slices.Equal(types, []string{"frequency_drop", "packet_loss", "delay", "corrupt", "bpf"}) {
		t.Fatalf("available filters %v", types)
	}
	delay := af.list[2].(map[string]any)["parameters"].([]any)[1].(map[string]any)
	if delay["name"] != "Jitter (-/+)" || delay["minimum"] != 0.0 || delay["maximum"] != 32767.0 || delay["unit"] != "ms" {
		t.Fatalf("delay jitter parameter %v", delay)
	}
	// PUT answers 201; filters replace; a refusal changes nothing.
	u := l.must("PUT", l.linkPath(""), map[string]any{"filters": map[string]any{"delay": []any{50, 10}}, "link_style": map[string]any{"color": "#ff0000"}}, 201, rLink)
	if u.body["filters"].(map[string]any)["delay"] == nil || u.body["link_style"].(map[string]any)["color"] != "#ff0000" {
		t.Fatalf("update: %s", u.raw)
	}
	bad := []struct {
		body   any
		status int
	}{
		{map[string]any{"filters": map[string]any{"latency": []any{3}}}, 400},
		{map[string]any{"filters": map[string]any{"packet_loss": []any{101}}}, 400},
		{map[string]any{"filters": map[string]any{"delay": 50}}, 400}, // not a list (GNS3: 500)
		{map[string]any{"suspend": "true"}, 400},
		{map[string]any{"suspend": true, "nodes": []any{map[string]any{"node_id": "00000000-0000-4000-8000-000000000009", "adapter_number": 0, "port_number": 0, "label": map[string]any{"text": "x"}}}}, 404},
	}
	for _, b := range bad {
		l.must("PUT", l.linkPath(""), b.body, b.status, rLink)
		got := l.must("GET", l.linkPath(""), nil, 200, rLink)
		if got.body["suspend"] != false || got.body["filters"].(map[string]any)["delay"] == nil || len(got.body["filters"].(map[string]any)) != 1 {
			t.Fatalf("refused %v changed the link: %s", b.body, got.raw)
		}
	}
	u = l.must("PUT", l.linkPath(""), map[string]any{"filters": map[string]any{"packet_loss": []any{"5"}}, "suspend": true,
		"nodes": []any{map[string]any{"node_id": l.a, "adapter_number": 0, "port_number": 0, "label": map[string]any{"text": "e0", "x": 3, "y": 4}}}}, 201, rLink)
	f := u.body["filters"].(map[string]any)
	lbl := u.body["nodes"].([]any)[0].(map[string]any)["label"].(map[string]any)
	if len(f) != 1 || f["packet_loss"].([]any)[0] != 5.0 || u.body["suspend"] != true || lbl["text"] != "e0" || lbl["y"] != 4.0 {
		t.Fatalf("second update: %s", u.raw)
	}
}

func TestTemplateRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const vpcs = "19021f99-e36f-394d-b4a1-8aaa902ab9cc"
	list := s.must("GET", "/v2/templates", nil, 200, "/v2/templates")
	var found map[string]any
	for _, x := range list.list {
		if m := x.(map[string]any); m["template_id"] == vpcs {
			found = m
		}
	}
	// The reply GNS3 gives for VPCS, member for member.
	want := map[string]any{"builtin": true, "category": "guest", "compute_id": nil, "default_name_format": "PC{0}", "name": "VPCS",
		"properties": map[string]any{"base_script_file": "vpcs_base_config.txt"}, "symbol": ":/symbols/vpcs_guest.svg",
		"template_id": vpcs, "template_type": "vpcs"}
	if b1, b2 := mustJSON(found), mustJSON(want); b1 != b2 {
		t.Fatalf("VPCS template\n got %s\nwant %s", b1, b2)
	}
	one := s.do("GET", "/v2/templates/"+vpcs, nil)
	etag := one.header.Get("ETag")
	if one.status != 200 || etag == "" {
		t.Fatalf("template: %d %q", one.status, etag)
	}
	req := httptest.NewRequest("GET", "/v2/templates/"+vpcs, nil)
	req.Header.Set("If-None-Match", etag)
	if resp, _ := s.app.Test(req, -1); resp.StatusCode != 304 {
		t.Fatalf("If-None-Match: %d, want 304", resp.StatusCode)
	}
	s.must("GET", "/v2/templates/nope", nil, 404, "/v2/templates/{template_id}")

	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	const route = "/v2/projects/{project_id}/templates/{template_id}"
	n := s.must("POST", "/v2/projects/"+pid+"/templates/"+vpcs, map[string]any{"x": 10, "y": -5, "compute_id": "local"}, 201, route)
	if n.body["name"] != "PC1" || n.body["template_id"] != vpcs || n.body["x"] != 10.0 || n.body["node_type"] != "vpcs" {
		t.Fatalf("from template: %s", n.raw)
	}
	r := s.must("POST", "/v2/projects/"+pid+"/templates/"+vpcs, map[string]any{"x": 0, "y": 0}, 404, route)
	if r.body["message"] != "Compute ID None doesn't exist" {
		t.Fatalf("no compute: %s", r.raw)
	}
	s.must("POST", "/v2/projects/"+pid+"/templates/"+vpcs, map[string]any{"x": 0}, 400, route)
	s.must("POST", "/v2/projects/"+pid+"/templates/nope", map[string]any{"x": 0, "y": 0, "compute_id": "local"}, 404, route)
	s.must("POST", "/v2/projects/nope/templates/"+vpcs, map[string]any{"x": 0, "y": 0, "compute_id": "local"}, 404, route)
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// authServer is a server with Basic authentication on.
func authServer(t *testing.T) *fiber.App {
	t.Helper()
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	svc := project.NewService(project.Config{ProjectsDir: t.TempDir(), Computes: reg.Agents})
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", User: "admin", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func TestBasicAuthenticationAnswersLikeGNS3(t *testing.T) {
	t.Parallel()
	app := authServer(t)
	for name, auth := range map[string]string{
		"no credentials": "",
		"wrong password": "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:nope")),
		"wrong user":     "Basic " + base64.StdEncoding.EncodeToString([]byte("root:s3cret")),
		"not basic":      "Bearer s3cret",
	} {
		req := httptest.NewRequest("GET", "/v2/version", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 1)
		n, _ := resp.Body.Read(body)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="GNS3 server"` || n != 0 {
			t.Fatalf("%s: %d %q, %d body bytes", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), n)
		}
	}
	req := httptest.NewRequest("GET", "/v2/version", nil)
	req.SetBasicAuth("admin", "s3cret")
	if resp, _ := app.Test(req, -1); resp.StatusCode != 200 {
		t.Fatalf("good credentials: %d", resp.StatusCode)
	}
}

func TestOversizedJSONBodiesAre413AndChangeNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	big := `{"name": "` + strings.Repeat("x", 1<<20) + `"}`
	r := s.must("POST", "/v2/projects", big, 413, rProjects)
	if r.body["status"] != 413.0 {
		t.Fatalf("413 body: %s", r.raw)
	}
	if l := s.must("GET", "/v2/projects", nil, 200, rProjects); len(l.list) != 0 {
		t.Fatal("an oversized request created a project")
	}
}

func TestInvalidUTF8IsABadRequestNotACrash(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.must("POST", "/v2/projects", "{\"name\": \"caf\xe9\"}", 400, rProjects)
	if r.body["message"] != "Invalid JSON: the body is not UTF-8" {
		t.Fatalf("invalid UTF-8: %s", r.raw)
	}
}

var update = flag.Bool("update", false, "rewrite openapi.json from the routes")

func TestOpenAPIListsExactlyTheRegisteredRoutes(t *testing.T) {
	t.Parallel()
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	svc := project.NewService(project.Config{ProjectsDir: t.TempDir(), Computes: reg.Agents})
	app, a, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", View: web.New(web.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	// What Fiber really serves, read from its router, not from our list.
	served := map[string]bool{}
	for _, r := range app.GetRoutes(true) {
		if r.Method == "HEAD" || !strings.HasPrefix(r.Path, "/v2/") {
			continue // middleware, the capture view's page and files, /metrics
		}
		served[r.Method+" "+r.Path] = true
	}
	doc := a.OpenAPI()
	documented := map[string]bool{}
	for path, ops := range doc["paths"].(map[string]map[string]any) {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+fiberPathOf(path, op)] = true
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("route %s is served but not documented", k)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("route %s is documented but not served", k)
		}
	}
	for _, op := range flatten(doc) {
		if op["summary"] == "undocumented" {
			t.Errorf("operation %v has no entry in routeDocs", op["operationId"])
		}
	}
	// The committed copy is the generated one.
	data, _ := json.MarshalIndent(doc, "", "  ")
	data = append(data, '\n')
	if *update {
		os.WriteFile("openapi.json", data, 0o644)
	}
	committed, err := os.ReadFile("openapi.json")
	if err != nil || string(committed) != string(data) {
		t.Fatalf("controller/api/openapi.json is stale: run go test ./controller/api -run OpenAPI -update")
	}
	// And it is served.
	r := httptest.NewRequest("GET", "/v2/openapi.json", nil)
	resp, _ := app.Test(r, -1)
	var served2 map[string]any
	json.NewDecoder(resp.Body).Decode(&served2)
	if served2["openapi"] != "3.1.0" || resp.Header.Get("X-Route") != "/v2/openapi.json" {
		t.Fatalf("served document: %v", served2["openapi"])
	}
}

// fiberPathOf maps an OpenAPI path back to Fiber's form: a parameter
// documented as holding '/' is Fiber's greedy "*".
func fiberPathOf(path string, op any) string {
	greedy := map[string]bool{}
	if o, ok := op.(map[string]any); ok {
		params, _ := o["parameters"].([]any)
		for _, p := range params {
			if pm, ok := p.(map[string]any); ok && strings.Contains(fmt.Sprint(pm["description"]), "may contain '/'") {
				greedy[fmt.Sprint(pm["name"])] = true
			}
		}
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			if greedy[strings.Trim(p, "{}")] {
				parts[i] = "*"
			} else {
				parts[i] = ":" + strings.Trim(p, "{}")
			}
		}
	}
	return strings.Join(parts, "/")
}

func flatten(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, ops := range doc["paths"].(map[string]map[string]any) {
		for _, op := range ops {
			out = append(out, op.(map[string]any))
		}
	}
	return out
}

// benchServer is the API over a real agent whose nodes are fakes, served on
// loopback: benchmarks measure what a keep-alive client sees.
type benchAPI struct {
	url    string
	client *http.Client
}

func benchServer(b *testing.B) *benchAPI {
	a, _ := benchServerWith(b, nil)
	return a
}

// benchServerWith is benchServer with a hook that sets more of the API's
// configuration; it returns the app too, to drive its handler directly.
func benchServerWith(b *testing.B, configure func(*api.Config)) (*benchAPI, *fiber.App) {
	return benchServerOver(b, configure, nil)
}

// benchServerOver is benchServerWith serving through wrap (a TLS
// listener), which also gives the URL's scheme and the client.
func benchServerOver(b *testing.B, configure func(*api.Config), wrap func(net.Listener) (net.Listener, string, *http.Client)) (*benchAPI, *fiber.App) {
	data := b.TempDir()
	h := host.New(host.Config{DataDir: data, Runners: map[string]host.RunnerFactory{
		"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
			return node.NewFake(env.Agent, env.OnStop), nil
		},
	}})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{}))
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	reg.Add(b.Context(), compute.Compute{ID: "local", URL: agent.URL})
	dir := filepath.Join(data, "projects")
	svc := project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Store: &topology.Store{Dir: dir}})
	cfg := api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59"}
	if configure != nil {
		configure(&cfg)
	}
	app, _, err := api.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	scheme, client := "http", &http.Client{}
	if wrap != nil {
		ln, scheme, client = wrap(ln)
	}
	go app.Listener(api.QuietIdle(ln))
	b.Cleanup(func() { app.Shutdown(); h.Close(); agent.Close() })
	return &benchAPI{url: scheme + "://" + addr, client: client}, app
}

func benchDo(b *testing.B, a *benchAPI, method, path, body string, want int) []byte {
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	resp, err := a.client.Do(req)
	if err != nil {
		b.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		b.Fatalf("%s %s: %v %d %s", method, path, err, resp.StatusCode, out)
	}
	return out
}

// benchProject makes a project with nLinks links between two hubs of
// nLinks ports (hubs, not VPCS: a project holds at most 255 VPCS).
func benchProject(b *testing.B, app *benchAPI, nLinks int) (pid, lid string) {
	var p struct {
		ProjectID string `json:"project_id"`
	}
	json.Unmarshal(benchDo(b, app, "POST", "/v2/projects", `{"name": "bench"}`, 201), &p)
	if nLinks == 0 {
		return p.ProjectID, ""
	}
	var mapping []map[string]any
	for i := range nLinks {
		mapping = append(mapping, map[string]any{"name": fmt.Sprint("e", i), "port_number": i})
	}
	var ids [2]string
	for j := range 2 {
		body, _ := json.Marshal(map[string]any{"name": "Hub", "node_type": "ethernet_hub", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": mapping}})
		var n struct {
			NodeID string `json:"node_id"`
		}
		json.Unmarshal(benchDo(b, app, "POST", "/v2/projects/"+p.ProjectID+"/nodes", string(body), 201), &n)
		ids[j] = n.NodeID
	}
	for i := range nLinks {
		var l struct {
			LinkID string `json:"link_id"`
		}
		json.Unmarshal(benchDo(b, app, "POST", "/v2/projects/"+p.ProjectID+"/links",
			fmt.Sprintf(`{"nodes": [{"node_id": %q, "adapter_number": 0, "port_number": %d}, {"node_id": %q, "adapter_number": 0, "port_number": %d}]}`,
				ids[0], i, ids[1], i), 201), &l)
		if i == 0 {
			lid = l.LinkID
		}
	}
	return p.ProjectID, lid
}

func BenchmarkGetLink(b *testing.B) {
	app := benchServer(b)
	pid, lid := benchProject(b, app, 1)
	b.ReportAllocs()
	for b.Loop() {
		benchDo(b, app, "GET", "/v2/projects/"+pid+"/links/"+lid, "", 200)
	}
}

// BenchmarkGetLinkHandler is the controller's own CPU for a GET link, as
// the real controller runs it (access log at info, request metrics on),
// without the network: the app's handler on a request in memory. What it
// leaves out (reading the request and writing the reply on a socket) is
// the same for a trivial fasthttp handler; scripts/bench -api measures it.
func BenchmarkGetLinkHandler(b *testing.B) {
	a, app := benchServerWith(b, func(c *api.Config) {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "api") // as cli.Logger's
		c.Requests = metrics.NewHTTP(prometheus.NewRegistry())
	})
	pid, lid := benchProject(b, a, 1)
	benchGet(b, app.Handler(), "/v2/projects/"+pid+"/links/"+lid)
}

// BenchmarkGetLinkFiberFloor is BenchmarkGetLinkHandler's floor: a Fiber
// app configured as the API's (Immutable) with the link's route only,
// answering the same bytes and X-Route, with no middleware, log, metrics
// or project. What BenchmarkGetLinkHandler costs above it is the API's.
func BenchmarkGetLinkFiberFloor(b *testing.B) {
	body := []byte(strings.Repeat("x", 709))
	app := fiber.New(fiber.Config{Immutable: true, StreamRequestBody: true, DisablePreParseMultipartForm: true})
	app.Get("/v2/projects/:project_id/links/:link_id", func(c *fiber.Ctx) error {
		c.Set("X-Route", "/v2/projects/{project_id}/links/{link_id}")
		if c.Params("project_id") == "" || c.Params("link_id") == "" {
			return fiber.ErrNotFound
		}
		c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
		return c.Send(body)
	})
	benchGet(b, app.Handler(), "/v2/projects/9c3b4b1e-6f4e-4c1b-9e8a-2f0a7d2c9a11/links/1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9")
}

// benchGet times handler answering GET path with a 200, on one request
// context in memory, reset between requests.
func benchGet(b *testing.B, handler fasthttp.RequestHandler, path string) {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(path)
		handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

func BenchmarkListThousandLinks(b *testing.B) {
	app := benchServer(b)
	pid, _ := benchProject(b, app, 1000)
	b.ReportAllocs()
	for b.Loop() {
		benchDo(b, app, "GET", "/v2/projects/"+pid+"/links", "", 200)
	}
}

func BenchmarkCreateNode(b *testing.B) {
	app := benchServer(b)
	b.ReportAllocs()
	var pid string
	n := 0
	for b.Loop() {
		if n%200 == 0 { // a project holds at most 255 VPCS (one-byte MAC index)
			b.StopTimer()
			var p struct {
				ProjectID string `json:"project_id"`
			}
			json.Unmarshal(benchDo(b, app, "POST", "/v2/projects", fmt.Sprintf(`{"name": "bench-%d"}`, n), 201), &p)
			pid = p.ProjectID
			b.StartTimer()
		}
		n++
		benchDo(b, app, "POST", "/v2/projects/"+pid+"/nodes", `{"name": "PC", "node_type": "vpcs", "compute_id": "local"}`, 201)
	}
}

func TestSwitchHubAndCloudNodesThroughTheRealAgent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	nodes := "/v2/projects/" + pid + "/nodes"
	const switchTemplate = "1966b864-93e7-32d5-965f-001384eec461"
	sw := s.must("POST", "/v2/projects/"+pid+"/templates/"+switchTemplate, map[string]any{"x": 0, "y": 0, "compute_id": "local"}, 201,
		"/v2/projects/{project_id}/templates/{template_id}")
	ports := sw.body["ports"].([]any)
	if sw.body["name"] != "Switch1" || sw.body["status"] != "started" || sw.body["console"] != nil || sw.body["console_type"] != "none" || len(ports) != 8 {
		t.Fatalf("switch: %s", sw.raw)
	}
	if p := ports[3].(map[string]any); p["name"] != "Ethernet3" || p["short_name"] != "e3" || p["port_number"] != 3.0 {
		t.Fatalf("switch port 3: %v", p)
	}
	pc := s.must("POST", nodes, map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
	link := s.must("POST", "/v2/projects/"+pid+"/links", map[string]any{"nodes": []any{
		map[string]any{"node_id": pc.body["node_id"], "adapter_number": 0, "port_number": 0},
		map[string]any{"node_id": sw.body["node_id"], "adapter_number": 0, "port_number": 3},
	}}, 201, rLinks)
	lp := "/v2/projects/" + pid + "/links/" + link.body["link_id"].(string)
	// The PC is stopped; the switch always runs, so the link can capture.
	c := s.must("POST", lp+"/start_capture", map[string]any{"capture_format": "pcapng"}, 201, rStart)
	if c.body["capture_file_name"] != "PC1_0-0_to_Switch1_0-3.pcapng" || !strings.HasSuffix(c.body["capture_file_path"].(string), ".pcapng") {
		t.Fatalf("pcapng capture: %s", c.raw)
	}
	s.must("POST", lp+"/stop_capture", nil, 201, rStop)
	s.must("POST", nodes, map[string]any{"name": "X", "node_type": "ethernet_hub", "compute_id": "local",
		"properties": map[string]any{"ports_mapping": []any{map[string]any{"name": "e0", "type": "access"}}}}, 400, rNodes)
	cloud := func(name string, lport int) map[string]any {
		return s.must("POST", nodes, map[string]any{"name": name, "node_type": "cloud", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": []any{map[string]any{
				"name": "UDP tunnel 1", "port_number": 0, "type": "udp", "lport": lport, "rhost": "127.0.0.1", "rport": lport + 1}}}}, 201, rNodes).body
	}
	a, b := cloud("Gen", testenv.UnusedUDPPort(t)), cloud("Sink", testenv.UnusedUDPPort(t))
	s.must("POST", "/v2/projects/"+pid+"/links", map[string]any{"nodes": []any{
		map[string]any{"node_id": a["node_id"], "adapter_number": 0, "port_number": 0},
		map[string]any{"node_id": b["node_id"], "adapter_number": 0, "port_number": 0},
	}}, 201, rLinks)
}
