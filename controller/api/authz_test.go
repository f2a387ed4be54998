package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"golang.org/x/crypto/bcrypt"
)

// usersServer is the API over a real agent (fake nodes) whose callers are
// the users of an access database: admin (the super admin), and alice,
// bob and carol, members of "students", whose ACEs let them make
// projects (User on /projects, not propagating) and see templates and
// computes, and nothing else.
type usersServer struct {
	*server
	svc *access.Service
}

func newUsersServer(t *testing.T) *usersServer {
	t.Helper()
	ctx := context.Background()
	svc, err := access.Open(ctx, access.Config{Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Bootstrap(ctx, "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, r := range svc.Roles() {
		roles[r.Name] = r.ID
	}
	g, err := svc.CreateGroup(ctx, "students")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		u, err := svc.CreateUser(ctx, access.UserCreate{Username: name, Password: name + "-password"})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.AddMember(ctx, g.ID, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, ace := range []struct {
		path      string
		propagate bool
	}{{"/projects", false}, {"/templates", true}, {"/computes", true}, {"/symbols", true}} {
		if _, err := svc.CreateACE(ctx, access.ACESpec{Type: access.ACEGroup, Path: ace.path, RoleID: roles["User"], GroupID: g.ID, Propagate: ace.propagate, Allowed: true}); err != nil {
			t.Fatal(err)
		}
	}
	s := newServerConfig(t, nil, func(c *api.Config) {
		c.Access = svc
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("labtap_up 1\n")) })
	})
	return &usersServer{server: s, svc: svc}
}

// as is the server's client acting as user (password: user-password).
func (s *usersServer) as(user string) *server {
	c := *s.server
	c.user, c.password = user, user+"-password"
	return &c
}

// aliceLabIDs is what alice made: an opened project with two running nodes, a
// link between them capturing, a drawing and a snapshot.
type aliceLabIDs struct {
	project, node, link, drawing, snapshot string
}

func (s *usersServer) aliceLab(t *testing.T) aliceLabIDs {
	t.Helper()
	a := s.as("alice")
	var l aliceLabIDs
	l.project = a.must("POST", "/v2/projects", map[string]any{"name": "alice-lab"}, 201, rProjects).body["project_id"].(string)
	p := "/v2/projects/" + l.project
	var nodes []string
	for _, name := range []string{"PC1", "PC2"} {
		nodes = append(nodes, a.must("POST", p+"/nodes", map[string]any{"name": name, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes).body["node_id"].(string))
	}
	l.node = nodes[0]
	l.link = a.must("POST", p+"/links", map[string]any{"nodes": []any{
		map[string]any{"node_id": nodes[0], "adapter_number": 0, "port_number": 0},
		map[string]any{"node_id": nodes[1], "adapter_number": 0, "port_number": 0},
	}}, 201, rLinks).body["link_id"].(string)
	l.drawing = a.must("POST", p+"/drawings", map[string]any{"svg": "<svg height=\"10\" width=\"10\"></svg>", "x": 1, "y": 2}, 201, "/v2/projects/{project_id}/drawings").body["drawing_id"].(string)
	l.snapshot = a.must("POST", p+"/snapshots", map[string]any{"name": "snap"}, 201, "/v2/projects/{project_id}/snapshots").body["snapshot_id"].(string)
	a.must("POST", p+"/nodes/start", nil, 204, rNodes+"/start")
	a.must("POST", p+"/links/"+l.link+"/start_capture", map[string]any{}, 201, rStart)
	return l
}

// state is what a refused request must leave as it was: the project's
// files and what the controller and the agent say of it.
func (s *usersServer) state(t *testing.T, l aliceLabIDs) string {
	t.Helper()
	var b strings.Builder
	dir := filepath.Join(s.data, "projects", l.project)
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "captures") {
			return nil // a running capture's file grows by itself
		}
		data, _ := os.ReadFile(path)
		fmt.Fprintf(&b, "%s %x\n", strings.TrimPrefix(path, dir), data)
		return nil
	})
	admin := s.as("admin")
	p := "/v2/projects/" + l.project
	for _, q := range []string{p, p + "/nodes", p + "/links", p + "/drawings", p + "/snapshots"} {
		r := admin.do("GET", q, nil)
		fmt.Fprintf(&b, "%s %d %s\n", q, r.status, r.raw)
	}
	return b.String()
}

// sweep sends every route of the OpenAPI document as bob, on alice's
// aliceLabIDs, and lists what went wrong: a reply on her project that is neither
// 403 nor exactly an absent project's, a reply elsewhere that names her
// objects, or anything of hers changed.
func (s *usersServer) sweep(t *testing.T, l aliceLabIDs) []string {
	bob := s.as("bob")
	absent := uuid.NewString()
	values := map[string]string{
		"node_id": l.node, "link_id": l.link, "drawing_id": l.drawing, "snapshot_id": l.snapshot,
		"compute_id": "local", "template_id": "19021f99-e36f-394d-b4a1-8aaa902ab9cc", "emulator": "vpcs",
		"action:.+": "x", "path:.+": "a.txt", "filename:.+": "a.qcow2", "filename": "a.qcow2", "symbol_id:.+": "a.svg",
		"engine": "vmware", "asset": "app.js",
	}
	fill := func(template, pid string) string {
		out := template
		for k, v := range values {
			out = strings.ReplaceAll(out, "{"+k+"}", v)
		}
		return strings.ReplaceAll(out, "{project_id}", pid)
	}
	var routes []api.Route
	for path, ops := range s.api.OpenAPI()["paths"].(map[string]map[string]any) {
		for method := range ops {
			routes = append(routes, api.Route{Method: strings.ToUpper(method), Template: path})
		}
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Template+routes[i].Method < routes[j].Template+routes[j].Method })
	// The pages beside the API are in no document.
	routes = append(routes, api.Route{Method: "GET", Template: "/v2/projects/{project_id}/links/{link_id}/view"},
		api.Route{Method: "GET", Template: "/v2/projects/{project_id}/links/{link_id}/packets"})
	var bad []string
	before := s.state(t, l)
	for _, r := range routes {
		if r.Template == "/v2/notifications" {
			continue // a stream of bob's own objects (filtered by the streams), endless
		}
		var body any
		if r.Method == "POST" || r.Method == "PUT" {
			body = map[string]any{}
		}
		got := bob.do(r.Method, fill(r.Template, l.project), body)
		if strings.Contains(r.Template, "{project_id}") {
			twin := bob.do(r.Method, fill(r.Template, absent), body)
			same := got.status == twin.status && bytes.Equal(got.raw, bytes.ReplaceAll(twin.raw, []byte(absent), []byte(l.project)))
			if !(got.status == 404 && same) && !(got.status == 403 && strings.Contains(string(got.raw), "Permission denied")) {
				bad = append(bad, fmt.Sprintf("%s %s: %d %s (an absent project: %d %s)", r.Method, r.Template, got.status, got.raw, twin.status, twin.raw))
			}
		} else {
			for _, id := range []string{l.project, l.node, l.link, l.drawing, l.snapshot} {
				if bytes.Contains(got.raw, []byte(id)) {
					bad = append(bad, fmt.Sprintf("%s %s: %d names alice's %s: %s", r.Method, r.Template, got.status, id, got.raw))
				}
			}
		}
		if after := s.state(t, l); after != before {
			bad = append(bad, fmt.Sprintf("%s %s: %d %s changed alice's aliceLabIDs", r.Method, r.Template, got.status, got.raw))
			before = after
		}
	}
	return bad
}

// For every route of the OpenAPI document, a second user's request on the
// first user's project answers as an absent project does, or 403, and
// changes nothing of it (its files; the nodes, links, captures,
// drawings and snapshots the controller and agent report).
func TestEveryRouteRefusesAnotherUsersProject(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	l := s.aliceLab(t)
	for _, b := range s.sweep(t, l) {
		t.Error(b)
	}
}

// The sweep above can fail: with one route's entry forgotten (it asks
// only for a login), it names that route. Not parallel: it changes the
// table every API is built from.
func TestTheRouteSweepCatchesAnUncheckedRoute(t *testing.T) {
	for _, r := range []api.Route{
		{Method: "PUT", Template: "/v2/projects/{project_id}"},
		{Method: "POST", Template: "/v2/projects/{project_id}/links/{link_id}/stop_capture"},
		{Method: "GET", Template: "/v2/projects/{project_id}/nodes/{node_id}"},
	} {
		restore := api.UncheckPermission(r)
		s := newUsersServer(t)
		restore()
		l := s.aliceLab(t)
		bad := s.sweep(t, l)
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, r.Method+" "+r.Template+":") }) {
			t.Errorf("%s %s left unchecked, the sweep saw nothing: %q", r.Method, r.Template, bad)
		}
	}
}

// Every registered route has its entry in the table of permissions (one
// without is the administrators' alone).
func TestEveryRouteHasAPermission(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	for _, r := range s.api.Routes() {
		if !api.HasPermission(r) {
			t.Errorf("%s %s has no entry in permissions", r.Method, r.Template)
		}
	}
}

// A user who may audit a project but not change it gets 403 with GNS3
// 3.x's message, and nothing changes; lists hold the projects each user
// may audit, and only those.
func TestAnAuditorSeesAProjectButChangesNothing(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	l := s.aliceLab(t)
	ctx := context.Background()
	var carol, auditor string
	for _, u := range s.svc.Users() {
		if u.Username == "carol" {
			carol = u.ID
		}
	}
	for _, r := range s.svc.Roles() {
		if r.Name == "Auditor" {
			auditor = r.ID
		}
	}
	if _, err := s.svc.CreateACE(ctx, access.ACESpec{Type: access.ACEUser, Path: "/projects/" + l.project, RoleID: auditor, UserID: carol, Propagate: true, Allowed: true}); err != nil {
		t.Fatal(err)
	}
	c := s.as("carol")
	p := "/v2/projects/" + l.project
	c.must("GET", p, nil, 200, rProject)
	c.must("GET", p+"/nodes/"+l.node, nil, 200, rNode)
	before := s.state(t, l)
	for _, req := range []struct{ method, path, route, privilege string }{
		{"PUT", p, rProject, "Project.Modify"},
		{"DELETE", p, rProject, "Project.Allocate"},
		{"POST", p + "/nodes/" + l.node + "/stop", rNode + "/stop", "Node.PowerMgmt"},
		{"POST", p + "/links/" + l.link + "/stop_capture", rStop, "Link.Capture"},
	} {
		r := c.must(req.method, req.path, map[string]any{"name": "carol's"}, 403, req.route)
		if want := "Permission denied (privilege " + req.privilege + " is required)"; r.body["message"] != want {
			t.Errorf("%s %s: %s, want %q", req.method, req.path, r.raw, want)
		}
	}
	if s.state(t, l) != before {
		t.Error("a refused request changed alice's lab")
	}
	ids := func(who string) []string {
		var out []string
		for _, p := range s.as(who).must("GET", "/v2/projects", nil, 200, rProjects).list {
			out = append(out, p.(map[string]any)["project_id"].(string))
		}
		return out
	}
	bobs := s.as("bob").must("POST", "/v2/projects", map[string]any{"name": "bob-lab"}, 201, rProjects).body["project_id"].(string)
	for who, want := range map[string][]string{"alice": {l.project}, "bob": {bobs}, "carol": {l.project}} {
		if got := ids(who); !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", who, got, want)
		}
	}
	if got := ids("admin"); len(got) != 2 {
		t.Errorf("admin lists %v, want both", got)
	}
}

// The maker of a project holds it by an ACE made with it, and the ACEs on
// a project go when it is deleted (a project imported later with the
// same id is nobody's).
func TestAProjectsACEsLiveAndDieWithIt(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	a := s.as("alice")
	pid := a.must("POST", "/v2/projects", map[string]any{"name": "mine"}, 201, rProjects).body["project_id"].(string)
	on := func() int {
		n := 0
		for _, e := range s.svc.ACEs() {
			if strings.HasPrefix(e.Path, "/projects/"+pid) {
				n++
			}
		}
		return n
	}
	if on() != 1 {
		t.Fatalf("ACEs on the new project: %d, want 1", on())
	}
	dup := a.must("POST", "/v2/projects/"+pid+"/duplicate", map[string]any{"name": "mine-2"}, 201, rProject+"/duplicate").body["project_id"].(string)
	a.must("GET", "/v2/projects/"+dup, nil, 200, rProject)
	s.as("bob").must("GET", "/v2/projects/"+dup, nil, 404, rProject)
	a.must("DELETE", "/v2/projects/"+pid, nil, 204, rProject)
	if on() != 0 {
		t.Fatalf("ACEs left on the deleted project: %d", on())
	}
}

// /metrics and the controller's switches are the administrators': the
// super admin, or a holder of the Administrator role on "/".
func TestMetricsAndShutdownAreForAdministrators(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	s.as("bob").must("PUT", "/v2/iou_license", map[string]any{}, 403, "/v2/iou_license")
	if r := s.as("bob").do("GET", "/metrics", nil); r.status != 403 {
		t.Errorf("bob's /metrics: %d %s", r.status, r.raw)
	}
	if r := s.as("admin").do("GET", "/metrics", nil); r.status != 200 {
		t.Errorf("admin's /metrics: %d %s", r.status, r.raw)
	}
	s.as("bob").must("POST", "/v2/shutdown", nil, 403, "/v2/shutdown")
	var bob, admin string
	for _, u := range s.svc.Users() {
		if u.Username == "bob" {
			bob = u.ID
		}
	}
	for _, r := range s.svc.Roles() {
		if r.Name == "Administrator" {
			admin = r.ID
		}
	}
	if s.svc.Administrator(bob) {
		t.Fatal("bob is an administrator already")
	}
	if _, err := s.svc.CreateACE(context.Background(), access.ACESpec{Type: access.ACEUser, Path: "/", RoleID: admin, UserID: bob, Propagate: true, Allowed: true}); err != nil {
		t.Fatal(err)
	}
	if !s.svc.Administrator(bob) {
		t.Fatal("bob with Administrator on / is no administrator")
	}
	if r := s.as("bob").do("GET", "/metrics", nil); r.status != 200 {
		t.Errorf("administrator bob's /metrics: %d %s", r.status, r.raw)
	}
}
