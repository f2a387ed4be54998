package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/web"
	"github.com/valyala/fasthttp"
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
		c.View = web.New(web.Config{})
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
		api.Route{Method: "GET", Template: "/v2/projects/{project_id}/links/{link_id}/packets"},
		api.Route{Method: "GET", Template: "/"}, api.Route{Method: "GET", Template: "/ui/{asset}"},
		api.Route{Method: "GET", Template: "/metrics"})
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
		if testing.Short() && r.Method != "PUT" {
			continue // one is enough for the unit tier
		}
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
	// The profiles beside the API (--pprof-listen), behind Guard.
	prof := httptest.NewServer(s.api.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("profile")) })))
	defer prof.Close()
	profile := func(user string) int {
		req, _ := http.NewRequest("GET", prof.URL+"/debug/pprof/", nil)
		req.SetBasicAuth(user, user+"-password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := profile("bob"); got != 403 {
		t.Errorf("bob's profiles: %d, want 403", got)
	}
	if got := profile("admin"); got != 200 {
		t.Errorf("admin's profiles: %d, want 200", got)
	}
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
	if got := profile("bob"); got != 200 {
		t.Errorf("administrator bob's profiles: %d, want 200", got)
	}
}

// BenchmarkAuthz is the API over loopback with authentication off, and on
// as a user of the access database (HTTP Basic on every request, as the
// GNS3 GUI sends it, answered from the credential cache, and the ACL
// walked for the project's route): GET link, and start_capture (started
// then stopped each time). The two servers are asked in turn within each
// iteration, so that a shared machine's load weighs on both alike; it
// reports each one's mean GET and p50 start_capture, and the ratios
// on/off (auth on should stay within 10% of off).
func BenchmarkAuthz(b *testing.B) {
	type side struct {
		api  *benchAPI
		link string
		get  time.Duration
		caps []time.Duration
	}
	var sides [2]*side
	for i, mode := range []string{"off", "on"} {
		configure := func(*api.Config) {}
		auth := ""
		if mode == "on" {
			svc := benchAccess(b)
			configure = func(c *api.Config) { c.Access = svc }
			auth = basic("alice", "alice-password")
		}
		a, _ := benchServerWith(b, configure)
		a.client.Transport = authTransport{auth}
		pid, lid := benchProject(b, a, 1)
		sides[i] = &side{api: a, link: "/v2/projects/" + pid + "/links/" + lid}
	}
	b.Run("GetLink", func(b *testing.B) {
		for _, s := range sides {
			s.get = 0
		}
		n := 0
		for b.Loop() {
			for _, s := range sides {
				t0 := time.Now()
				benchDo(b, s.api, "GET", s.link, "", 200)
				s.get += time.Since(t0)
			}
			n++
		}
		b.ReportMetric(float64(sides[0].get.Nanoseconds())/float64(n), "off-ns/get")
		b.ReportMetric(float64(sides[1].get.Nanoseconds())/float64(n), "on-ns/get")
		b.ReportMetric(float64(sides[1].get)/float64(sides[0].get), "on/off")
	})
	b.Run("StartCapture", func(b *testing.B) {
		for _, s := range sides {
			s.caps = s.caps[:0]
		}
		for b.Loop() {
			for _, s := range sides {
				t0 := time.Now()
				benchDo(b, s.api, "POST", s.link+"/start_capture", "{}", 201)
				s.caps = append(s.caps, time.Since(t0))
				benchDo(b, s.api, "POST", s.link+"/stop_capture", "", 201)
			}
		}
		p50 := func(ds []time.Duration) float64 {
			ds = slices.Clone(ds)
			slices.Sort(ds)
			return float64(ds[len(ds)/2].Microseconds())
		}
		off, on := p50(sides[0].caps), p50(sides[1].caps)
		b.ReportMetric(off, "off-p50-µs")
		b.ReportMetric(on, "on-p50-µs")
		b.ReportMetric(on/off, "on/off")
	})
}

// authTransport sets Authorization on every request.
type authTransport struct{ auth string }

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.auth != "" {
		r.Header.Set("Authorization", t.auth)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkAuthzGetLinkHandler is BenchmarkAuthz's GET link without the
// network: the app's handler on a request in memory, so that what auth
// costs the controller is not lost in a shared machine's noise. Three
// servers are asked in turn: auth off, on (alice of the access database)
// and the old single credential (--user and --password without the
// database); it reports each one's ns per GET and on/off.
func BenchmarkAuthzGetLinkHandler(b *testing.B) {
	type side struct {
		handler fasthttp.RequestHandler
		path    string
		auth    string
		took    time.Duration
	}
	var sides []*side
	for _, mode := range []string{"off", "on", "single"} {
		auth := ""
		configure := func(*api.Config) {}
		switch mode {
		case "on":
			svc := benchAccess(b)
			configure = func(c *api.Config) { c.Access = svc }
			auth = basic("alice", "alice-password")
		case "single":
			configure = func(c *api.Config) { c.User, c.Password = "admin", "admin-password" }
			auth = basic("admin", "admin-password")
		}
		a, app := benchServerWith(b, configure)
		a.client.Transport = authTransport{auth}
		pid, lid := benchProject(b, a, 1)
		sides = append(sides, &side{handler: app.Handler(), path: "/v2/projects/" + pid + "/links/" + lid, auth: auth})
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, s := range sides {
			t0 := time.Now()
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI(s.path)
			if s.auth != "" {
				ctx.Request.Header.Set("Authorization", s.auth)
			}
			s.handler(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			s.took += time.Since(t0)
		}
		n++
	}
	for i, mode := range []string{"off", "on", "single"} {
		b.ReportMetric(float64(sides[i].took.Nanoseconds())/float64(n), mode+"-ns/get")
	}
	b.ReportMetric(float64(sides[1].took)/float64(sides[0].took), "on/off")
}

// benchAccess is an access database with alice, who may make projects
// (User on /projects, not propagating): what she makes is hers by the
// ACE made with it.
func benchAccess(b *testing.B) *access.Service {
	ctx := context.Background()
	svc, err := access.Open(ctx, access.Config{Path: filepath.Join(b.TempDir(), "access.db"), BcryptCost: bcrypt.MinCost})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	if _, err := svc.Bootstrap(ctx, "admin", "admin-password"); err != nil {
		b.Fatal(err)
	}
	alice, err := svc.CreateUser(ctx, access.UserCreate{Username: "alice", Password: "alice-password"})
	if err != nil {
		b.Fatal(err)
	}
	var user string
	for _, r := range svc.Roles() {
		if r.Name == "User" {
			user = r.ID
		}
	}
	if _, err := svc.CreateACE(ctx, access.ACESpec{Type: access.ACEUser, Path: "/projects", RoleID: user, UserID: alice.ID, Allowed: true}); err != nil {
		b.Fatal(err)
	}
	return svc
}

// A path that climbs out of its project ("..") is checked on the project
// its route's parameter names, not on where the path would lead once
// cleaned: bob's own project at the end of alice's path opens nothing of
// hers.
func TestAPathClimbingIntoOnesOwnProjectIsCheckedOnTheFirst(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	l := s.aliceLab(t)
	bob := s.as("bob")
	mine := bob.must("POST", "/v2/projects", map[string]any{"name": "bob-lab"}, 201, rProjects).body["project_id"].(string)
	for _, path := range []string{
		"/v2/projects/" + l.project + "/files/../../" + mine + "/files/x.txt",
		"/v2/projects/" + l.project + "/nodes/" + l.node + "/files/../../../../" + mine + "/files/x.txt",
	} {
		if r := bob.do("GET", path, nil); r.status != 404 || !strings.Contains(string(r.raw), "Project ID "+l.project+" doesn't exist") {
			t.Errorf("GET %s: %d %s", path, r.status, r.raw)
		}
	}
}

// An import makes a project of the importer's (it holds it, others do
// not see it); onto an id taken by a project the importer may not use,
// it is refused and changes nothing.
func TestAnImportIsTheImportersAndTakesNoOnesProject(t *testing.T) {
	t.Parallel()
	s := newUsersServer(t)
	l := s.aliceLab(t)
	alice, bob := s.as("alice"), s.as("bob")
	p := "/v2/projects/" + l.project
	alice.must("POST", p+"/nodes/stop", nil, 204, rNodes+"/stop")
	alice.must("POST", p+"/links/"+l.link+"/stop_capture", nil, 201, rStop)
	archive := alice.do("GET", p+"/export", nil)
	if archive.status != 200 || len(archive.raw) == 0 {
		t.Fatalf("export: %d %s", archive.status, archive.raw)
	}
	bob.must("GET", p+"/export", nil, 404, rProject+"/export")
	before := s.state(t, l)
	r := bob.do("POST", p+"/import", string(archive.raw))
	if r.status != 403 {
		t.Errorf("bob's import onto alice's project: %d %s", r.status, r.raw)
	}
	if s.state(t, l) != before {
		t.Error("a refused import changed alice's project")
	}
	id := uuid.NewString()
	if r := bob.do("POST", "/v2/projects/"+id+"/import?name=bobs", string(archive.raw)); r.status != 201 {
		t.Fatalf("bob's import: %d %s", r.status, r.raw)
	}
	bob.must("GET", "/v2/projects/"+id, nil, 200, rProject)
	alice.must("GET", "/v2/projects/"+id, nil, 404, rProject)
}
