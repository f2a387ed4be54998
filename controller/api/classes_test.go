package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"golang.org/x/crypto/bcrypt"
)

// classroom is a server with users: the super admin (admin), a teacher
// who may make projects (role User on /projects, not below) and audit
// the class's group, and students alice, bob and carol, in group class.
type classroom struct {
	*server
	svc                        *access.Service
	group                      string
	userRole                   string
	teacher, alice, bob, carol access.User
}

func newClassroom(t *testing.T) *classroom {
	t.Helper()
	svc, err := access.Open(context.Background(), access.Config{Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	ctx := context.Background()
	if _, err := svc.Bootstrap(ctx, "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	s := newServerConfig(t, nil, func(c *api.Config) {
		c.Access, c.User, c.Password = svc, "admin", "admin-password"
	})
	cr := &classroom{server: s, svc: svc}
	user := func(name string) access.User {
		u, err := svc.CreateUser(ctx, access.UserCreate{Username: name, Password: name + "-password"})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	cr.teacher, cr.alice, cr.bob, cr.carol = user("teacher"), user("alice"), user("bob"), user("carol")
	g, err := svc.CreateGroup(ctx, "class")
	if err != nil {
		t.Fatal(err)
	}
	cr.group = g.ID
	for _, u := range []access.User{cr.alice, cr.bob, cr.carol} {
		if err := svc.AddMember(ctx, g.ID, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	role := func(name string) string {
		for _, r := range svc.Roles() {
			if r.Name == name {
				return r.ID
			}
		}
		t.Fatalf("no role %s", name)
		return ""
	}
	cr.userRole = role("User")
	cr.grant(cr.teacher, "/projects", "User", false)
	cr.grant(cr.teacher, "/access/groups/"+g.ID, "User manager", false)
	return cr
}

// grant gives u the role on path.
func (cr *classroom) grant(u access.User, path, role string, propagate bool) {
	cr.t.Helper()
	var id string
	for _, r := range cr.svc.Roles() {
		if r.Name == role {
			id = r.ID
		}
	}
	if _, err := cr.svc.CreateACE(context.Background(), access.ACESpec{Type: "user", Path: path, RoleID: id, UserID: u.ID, Propagate: propagate, Allowed: true}); err != nil {
		cr.t.Fatal(err)
	}
}

// as makes the following requests as username (its password is
// "<username>-password"; admin's "admin-password").
func (cr *classroom) as(username string) *classroom {
	cr.user, cr.password = username, username+"-password"
	return cr
}

// template makes project name as admin: two VPCS nodes and a link, and
// gives the teacher the User role on it.
func (cr *classroom) template(name string) string {
	cr.t.Helper()
	cr.as("admin")
	p := cr.must("POST", "/v2/projects", map[string]any{"name": name}, 201, rProjects).body["project_id"].(string)
	var nodes []string
	for _, n := range []string{"PC1", "PC2"} {
		r := cr.must("POST", "/v2/projects/"+p+"/nodes", map[string]any{"name": n, "node_type": "vpcs", "compute_id": "local"}, 201, rNodes)
		nodes = append(nodes, r.body["node_id"].(string))
	}
	cr.must("POST", "/v2/projects/"+p+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": nodes[0], "adapter_number": 0, "port_number": 0}, {"node_id": nodes[1], "adapter_number": 0, "port_number": 0}}}, 201, rLinks)
	cr.grant(cr.teacher, "/projects/"+p, "User", true)
	return p
}

func (cr *classroom) projectNames() []string {
	var out []string
	for _, p := range cr.as("admin").must("GET", "/v2/projects", nil, 200, rProjects).list {
		out = append(out, p.(map[string]any)["name"].(string))
	}
	slices.Sort(out)
	return out
}

const (
	rDistribute = "/v3/projects/{project_id}/distribute"
	rReset      = "/v3/projects/{project_id}/copies/{copy_id}/reset"
)

// TestATeacherDistributesATemplateToAClassAndResetsACopy: one call gives
// each member of a group a copy named after them, which only they (and
// the teacher) may see and change; calling again makes nothing new; one
// call puts a changed copy back as the template is, same id and ACEs.
func TestATeacherDistributesATemplateToAClassAndResetsACopy(t *testing.T) {
	t.Parallel()
	cr := newClassroom(t)
	tmpl := cr.template("lab1")

	r := cr.as("teacher").must("POST", "/v3/projects/"+tmpl+"/distribute", map[string]any{"user_group_id": cr.group}, 201, rDistribute)
	copies := map[string]string{} // username → project id
	for _, c := range r.body["copies"].([]any) {
		c := c.(map[string]any)
		if c["created"] != true || c["name"] != "lab1-"+c["username"].(string) {
			t.Errorf("copy %v", c)
		}
		copies[c["username"].(string)] = c["project_id"].(string)
	}
	if len(copies) != 3 || r.body["project_id"] != tmpl || r.body["user_group_id"] != cr.group {
		t.Fatalf("distribution: %s", r.raw)
	}
	for _, id := range copies {
		if n := len(cr.as("admin").must("GET", "/v2/projects/"+id+"/nodes", nil, 200, rNodes).list); n != 2 {
			t.Errorf("copy %s has %d nodes, want the template's 2", id, n)
		}
	}
	// Each student may see and change their own copy only; the teacher all.
	for name, u := range map[string]access.User{"alice": cr.alice, "bob": cr.bob, "carol": cr.carol} {
		for owner, id := range copies {
			for _, priv := range []string{"Project.Audit", "Project.Modify", "Node.Console"} {
				if got := cr.svc.Allowed(u.ID, priv, "/projects/"+id); got != (owner == name) {
					t.Errorf("%s holds %s on %s's copy: %v", name, priv, owner, got)
				}
			}
		}
		if cr.svc.Allowed(u.ID, "Project.Audit", "/projects/"+tmpl) {
			t.Errorf("%s may see the template", name)
		}
	}
	for owner, id := range copies {
		if !cr.svc.Allowed(cr.teacher.ID, "Project.Modify", "/projects/"+id) {
			t.Errorf("the teacher may not change %s's copy", owner)
		}
	}
	// Through the /v2 API the GNS3 GUI speaks: each lists only theirs.
	for user, want := range map[string][]string{"alice": {"lab1-alice"}, "bob": {"lab1-bob"},
		"teacher": {"lab1", "lab1-alice", "lab1-bob", "lab1-carol"}} {
		var got []string
		for _, p := range cr.as(user).must("GET", "/v2/projects", nil, 200, rProjects).list {
			got = append(got, p.(map[string]any)["name"].(string))
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", user, got, want)
		}
	}
	cr.as("alice").must("GET", "/v2/projects/"+copies["bob"], nil, 404, rProject)
	cr.as("alice").must("GET", "/v2/projects/"+copies["alice"]+"/nodes", nil, 200, rNodes)

	// Again: nothing new.
	before := cr.projectNames()
	r = cr.as("teacher").must("POST", "/v3/projects/"+tmpl+"/distribute", map[string]any{"user_group_id": cr.group}, 201, rDistribute)
	for _, c := range r.body["copies"].([]any) {
		if c := c.(map[string]any); c["created"] != false || c["project_id"] != copies[c["username"].(string)] {
			t.Errorf("second distribution: %v", c)
		}
	}
	if after := cr.projectNames(); !slices.Equal(after, before) {
		t.Errorf("a second distribution made projects: %v, were %v", after, before)
	}

	// Alice opens her copy, deletes a node and starts the other; the
	// teacher resets it.
	alice := copies["alice"]
	cr.as("admin").must("POST", "/v2/projects/"+alice+"/open", nil, 201, "/v2/projects/{project_id}/open")
	nodes := cr.must("GET", "/v2/projects/"+alice+"/nodes", nil, 200, rNodes).list
	cr.must("DELETE", "/v2/projects/"+alice+"/nodes/"+nodes[0].(map[string]any)["node_id"].(string), nil, 204, rNode)
	cr.must("POST", "/v2/projects/"+alice+"/nodes/"+nodes[1].(map[string]any)["node_id"].(string)+"/start", nil, 200, "/v2/projects/{project_id}/nodes/{node_id}/start")
	r = cr.as("teacher").must("POST", "/v3/projects/"+tmpl+"/copies/"+alice+"/reset", nil, 200, rReset)
	if r.body["project_id"] != alice || r.body["name"] != "lab1-alice" || r.body["status"] != "opened" {
		t.Errorf("reset: %s", r.raw)
	}
	nodes = cr.as("admin").must("GET", "/v2/projects/"+alice+"/nodes", nil, 200, rNodes).list
	if len(nodes) != 2 {
		t.Fatalf("after the reset: %d nodes, want 2", len(nodes))
	}
	for _, n := range nodes {
		if n := n.(map[string]any); n["status"] != "stopped" {
			t.Errorf("after the reset, node %v is %v", n["name"], n["status"])
		}
	}
	if n := len(cr.must("GET", "/v2/projects/"+alice+"/links", nil, 200, rLinks).list); n != 1 {
		t.Errorf("after the reset: %d links, want 1", n)
	}
	if !cr.svc.Allowed(cr.alice.ID, "Project.Modify", "/projects/"+alice) || cr.svc.Allowed(cr.bob.ID, "Project.Audit", "/projects/"+alice) {
		t.Errorf("the reset changed who may use the copy")
	}
	// A closed copy is reset and left closed.
	bob := copies["bob"]
	if r = cr.as("teacher").must("POST", "/v3/projects/"+tmpl+"/copies/"+bob+"/reset", nil, 200, rReset); r.body["status"] != "closed" {
		t.Errorf("reset of a closed copy: %s", r.raw)
	}

	// Students cannot distribute or reset: the template is absent to
	// them, and bob may not reset alice's copy even from a project he sees.
	cr.as("alice").must("POST", "/v3/projects/"+tmpl+"/distribute", map[string]any{"user_group_id": cr.group}, 404, rDistribute)
	cr.as("bob").must("POST", "/v3/projects/"+tmpl+"/copies/"+alice+"/reset", nil, 404, rReset)
	cr.as("bob").must("POST", "/v3/projects/"+bob+"/copies/"+alice+"/reset", nil, 404, rReset)
	if after := cr.projectNames(); !slices.Equal(after, before) {
		t.Errorf("refused calls made projects: %v", after)
	}
}

// TestADistributionThatFailsPartWayLeavesNothing: the copy for the second
// member fails; the first member's copy and its ACEs are taken back.
func TestADistributionThatFailsPartWayLeavesNothing(t *testing.T) {
	t.Parallel()
	cr := newClassroom(t)
	tmpl := cr.template("lab2")
	aces := len(cr.svc.ACEs())
	before := cr.projectNames()
	cr.api.SetDistributeFault(func(member string) error {
		if member == "bob" {
			return errors.New("disk full")
		}
		return nil
	})
	cr.as("teacher").must("POST", "/v3/projects/"+tmpl+"/distribute", map[string]any{"user_group_id": cr.group}, 500, rDistribute)
	if after := cr.projectNames(); !slices.Equal(after, before) {
		t.Errorf("projects after a failed distribution: %v, were %v", after, before)
	}
	if n := len(cr.svc.ACEs()); n != aces {
		t.Errorf("ACEs after a failed distribution: %d, were %d", n, aces)
	}
}

// TestDistributionRefusesBadRequestsAndChangesNothing: each bad body or
// group, and a caller without the privileges, is refused, and nothing is
// made.
func TestDistributionRefusesBadRequestsAndChangesNothing(t *testing.T) {
	t.Parallel()
	cr := newClassroom(t)
	tmpl := cr.template("lab3")
	before, aces := cr.projectNames(), len(cr.svc.ACEs())
	for name, tt := range map[string]struct {
		user   string
		body   any
		status int
	}{
		"no body":          {"teacher", nil, 400},
		"no group":         {"teacher", map[string]any{}, 400},
		"group not a uuid": {"teacher", map[string]any{"user_group_id": "class"}, 400},
		"unknown member":   {"teacher", map[string]any{"user_group_id": cr.group, "name": "x"}, 400},
		"group a number":   {"teacher", map[string]any{"user_group_id": 7}, 400},
		"no such group":    {"admin", map[string]any{"user_group_id": "00000000-0000-0000-0000-000000000001"}, 404},
		"another group":    {"teacher", map[string]any{"user_group_id": "00000000-0000-0000-0000-000000000001"}, 403},
		"a student":        {"carol", map[string]any{"user_group_id": cr.group}, 404},
		"bad password":     {"nobody", map[string]any{"user_group_id": cr.group}, 401},
	} {
		t.Run(name, func(t *testing.T) {
			r := cr.as(tt.user).do("POST", "/v3/projects/"+tmpl+"/distribute", tt.body)
			if r.status != tt.status {
				t.Errorf("%d %s, want %d", r.status, r.raw, tt.status)
			}
		})
	}
	if after := cr.projectNames(); !slices.Equal(after, before) || len(cr.svc.ACEs()) != aces {
		t.Errorf("refusals made projects or ACEs: %v", after)
	}
}

// TestTwoDistributionsAtOnceMakeOneCopyEach: two calls racing each other
// make each member one copy, not two.
func TestTwoDistributionsAtOnceMakeOneCopyEach(t *testing.T) {
	t.Parallel()
	cr := newClassroom(t)
	tmpl := cr.template("lab4")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/v3/projects/"+tmpl+"/distribute", strings.NewReader(`{"user_group_id": "`+cr.group+`"}`))
			req.SetBasicAuth("teacher", "teacher-password")
			resp, err := cr.app.Test(req, -1)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Errorf("distribution: %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if got, want := cr.projectNames(), []string{"lab4", "lab4-alice", "lab4-bob", "lab4-carol"}; !slices.Equal(got, want) {
		t.Errorf("projects %v, want %v", got, want)
	}
}
