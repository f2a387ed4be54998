package api_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"golang.org/x/crypto/bcrypt"
)

// newQuotaServer is the API over a real agent (fake nodes) whose callers
// are admin (the super admin) and alice, bob and carol, members of
// "students" (User on /projects), with the quotas of the access database
// on, as the controller wires them.
func newQuotaServer(t *testing.T) (*usersServer, access.Group) {
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
	var user string
	for _, r := range svc.Roles() {
		if r.Name == "User" {
			user = r.ID
		}
	}
	for _, p := range []string{"/projects", "/computes"} {
		if _, err := svc.CreateACE(ctx, access.ACESpec{Type: access.ACEGroup, Path: p, RoleID: user, GroupID: g.ID, Allowed: true, Propagate: p != "/projects"}); err != nil {
			t.Fatal(err)
		}
	}
	s := newServerConfig(t, nil, func(c *api.Config) {
		c.Access = svc
		c.Projects.SetQuotas(api.Quotas(svc))
	})
	return &usersServer{server: s, svc: svc}, g
}

const rQuotaGroup = "/v3/access/groups/{user_group_id}/quota"

func (s *usersServer) nodeCount(t *testing.T, project string) int {
	t.Helper()
	return len(s.as("admin").must("GET", "/v2/projects/"+project+"/nodes", nil, 200, rNodes).list)
}

func newVPCS(name string) map[string]any {
	return map[string]any{"name": name, "node_type": "vpcs", "compute_id": "local"}
}

// A group's quota limits each member, counted over every member's
// projects: at the limit a create or a start is a 409 that names the
// quota, and changes nothing. The super admin, in no limited group, is
// not limited until a quota is set on it.
func TestQuotasOfAGroupLimitItsMembersAndNotTheAdmin(t *testing.T) {
	s, students := newQuotaServer(t)
	admin, alice, bob := s.as("admin"), s.as("alice"), s.as("bob")
	q := "/v3/access/groups/" + students.ID + "/quota"

	// Only an administrator sets a quota; bounds are checked, nothing set.
	if r := alice.do("PUT", q, map[string]any{"max_nodes": 100}); r.status != 403 {
		t.Fatalf("a student sets its group's quota: %d %s", r.status, r.raw)
	}
	for _, bad := range []any{map[string]any{"max_nodes": -1}, map[string]any{"max_nodes": "2"}, map[string]any{"max_ram_mb": 1 << 40}, "[]"} {
		if r := admin.do("PUT", q, bad); r.status != 422 {
			t.Fatalf("PUT quota %v = %d %s, want 422", bad, r.status, r.raw)
		}
	}
	if r := alice.must("GET", q, nil, 200, rQuotaGroup); r.body["max_nodes"] != nil {
		t.Fatalf("after refusals the quota is %s", r.raw)
	}
	r := admin.must("PUT", q, map[string]any{"max_nodes": 2, "max_running_nodes": 1}, 200, rQuotaGroup)
	if r.body["max_nodes"] != 2.0 || r.body["max_running_nodes"] != 1.0 || r.body["max_ram_mb"] != nil {
		t.Fatalf("quota %s", r.raw)
	}

	lab := alice.must("POST", "/v2/projects", map[string]any{"name": "alice-lab"}, 201, rProjects).body["project_id"].(string)
	p := "/v2/projects/" + lab
	pc1 := alice.must("POST", p+"/nodes", newVPCS("PC1"), 201, rNodes).body["node_id"].(string)
	pc2 := alice.must("POST", p+"/nodes", newVPCS("PC2"), 201, rNodes).body["node_id"].(string)
	r = alice.must("POST", p+"/nodes", newVPCS("PC3"), 409, rNodes)
	if r.body["message"] != "quota exceeded: nodes 2/2 for group students (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}
	if n := s.nodeCount(t, lab); n != 2 {
		t.Fatalf("%d nodes after the refused create", n)
	}
	// A duplicate brings its nodes at once: made, counted, undone.
	projects := len(admin.must("GET", "/v2/projects", nil, 200, rProjects).list)
	r = alice.must("POST", p+"/duplicate", map[string]any{"name": "alice-copy"}, 409, "/v2/projects/{project_id}/duplicate")
	if r.body["message"] != "quota exceeded: nodes 2/2 for group students (this needs 2 more)" {
		t.Fatalf("409 says %s", r.raw)
	}
	if n := len(admin.must("GET", "/v2/projects", nil, 200, rProjects).list); n != projects {
		t.Fatalf("%d projects after the refused duplicate, want %d", n, projects)
	}
	alice.must("POST", p+"/nodes/"+pc1+"/start", nil, 200, rNode+"/start")
	r = alice.must("POST", p+"/nodes/"+pc2+"/start", nil, 409, rNode+"/start")
	if r.body["message"] != "quota exceeded: running nodes 1/1 for group students (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}
	if st := alice.must("GET", p+"/nodes/"+pc2, nil, 200, rNode).body["status"]; st != "stopped" {
		t.Fatalf("refused node is %v", st)
	}
	r = alice.must("GET", q, nil, 200, rQuotaGroup)
	if u := r.body["usage"].(map[string]any); u["nodes"] != 2.0 || u["running_nodes"] != 1.0 || u["projects"] != 1.0 {
		t.Fatalf("usage %s", r.raw)
	}

	// Bob is a member: alice's nodes fill the group's quota for him too.
	bobLab := bob.must("POST", "/v2/projects", map[string]any{"name": "bob-lab"}, 201, rProjects).body["project_id"].(string)
	r = bob.must("POST", "/v2/projects/"+bobLab+"/nodes", newVPCS("PC1"), 409, rNodes)
	if r.body["message"] != "quota exceeded: nodes 2/2 for group students (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}

	// The super admin is in no limited group: not limited...
	adminLab := admin.must("POST", "/v2/projects", map[string]any{"name": "admin-lab"}, 201, rProjects).body["project_id"].(string)
	for _, name := range []string{"PC1", "PC2", "PC3"} {
		admin.must("POST", "/v2/projects/"+adminLab+"/nodes", newVPCS(name), 201, rNodes)
	}
	// ... until a quota is set on it.
	adminID := admin.must("GET", "/v3/access/users/me", nil, 200, "/v3/access/users/me").body["user_id"].(string)
	admin.must("PUT", "/v3/access/users/"+adminID+"/quota", map[string]any{"max_nodes": 3}, 200, "/v3/access/users/{user_id}/quota")
	r = admin.must("POST", "/v2/projects/"+adminLab+"/nodes", newVPCS("PC4"), 409, rNodes)
	if r.body["message"] != "quota exceeded: nodes 3/3 for user admin (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}
	// A user reads its own quota, not another's.
	if r := alice.do("GET", "/v3/access/users/"+adminID+"/quota", nil); r.status != 403 {
		t.Fatalf("alice reads admin's quota: %d %s", r.status, r.raw)
	}
}

// GNS3 3.x's resource pools: routes, shapes, statuses; a pool ACE gives
// its role on the pool's projects; a pool's quota limits its projects.
func TestResourcePools(t *testing.T) {
	s, _ := newQuotaServer(t)
	admin, alice, carol := s.as("admin"), s.as("alice"), s.as("carol")
	const rPools, rPool, rResources = "/v3/pools", "/v3/pools/{resource_pool_id}", "/v3/pools/{resource_pool_id}/resources"
	if r := alice.do("GET", "/v3/pools", nil); r.status != 403 || r.body["message"] != "Permission denied (privilege Pool.Audit is required)" {
		t.Fatalf("a student lists pools: %d %s", r.status, r.raw)
	}
	pool := admin.must("POST", "/v3/pools", map[string]any{"name": "lab-a"}, 201, rPools).body
	id := pool["resource_pool_id"].(string)
	if pool["name"] != "lab-a" || pool["created_at"] == nil {
		t.Fatalf("pool %v", pool)
	}
	if r := admin.must("POST", "/v3/pools", map[string]any{"name": "lab-a"}, 400, rPools); r.body["message"] != "Resource pool 'lab-a' already exists" {
		t.Fatalf("duplicate: %s", r.raw)
	}
	admin.must("POST", "/v3/pools", map[string]any{}, 422, rPools)
	if r := admin.must("GET", "/v3/pools", nil, 200, rPools); len(r.list) != 1 {
		t.Fatalf("pools %s", r.raw)
	}
	admin.must("PUT", "/v3/pools/"+id, map[string]any{"name": "lab-b"}, 200, rPool)
	found := false
	for _, e := range admin.must("GET", "/v3/access/acl/endpoints", nil, 200, "/v3/access/acl/endpoints").list {
		e := e.(map[string]any)
		found = found || e["endpoint"] == "/pools/"+id && e["name"] == "Resource pool: lab-b" && e["endpoint_type"] == "pool"
	}
	if !found {
		t.Fatal("the ACL's endpoints do not list the pool")
	}
	missing := "/v3/pools/0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0aff"
	if r := admin.must("GET", missing, nil, 404, rPool); r.body["message"] != "Resource pool '0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0aff' not found" {
		t.Fatalf("missing pool: %s", r.raw)
	}

	lab := alice.must("POST", "/v2/projects", map[string]any{"name": "alice-lab"}, 201, rProjects).body["project_id"].(string)
	res := "/v3/pools/" + id + "/resources/" + lab
	admin.must("PUT", "/v3/pools/"+id+"/resources/0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0aff", nil, 404, rResources+"/{resource_id}")
	admin.must("PUT", res, nil, 204, rResources+"/{resource_id}")
	if r := admin.must("PUT", res, nil, 400, rResources+"/{resource_id}"); r.body["message"] != "Resource '"+lab+"' is already in 'lab-b'" {
		t.Fatalf("added twice: %s", r.raw)
	}
	r := admin.must("GET", "/v3/pools/"+id+"/resources", nil, 200, rResources)
	if len(r.list) != 1 || r.list[0].(map[string]any)["resource_id"] != lab || r.list[0].(map[string]any)["resource_type"] != "project" || r.list[0].(map[string]any)["name"] != "alice-lab" {
		t.Fatalf("resources %s", r.raw)
	}

	// Carol sees alice's project through an ACE on the pool.
	if r := carol.do("GET", "/v2/projects/"+lab, nil); r.status != 404 {
		t.Fatalf("carol, no ACE: %d", r.status)
	}
	carolID := ""
	for _, u := range s.svc.Users() {
		if u.Username == "carol" {
			carolID = u.ID
		}
	}
	var auditor string
	for _, ro := range s.svc.Roles() {
		if ro.Name == "Auditor" {
			auditor = ro.ID
		}
	}
	admin.must("POST", "/v3/access/acl", map[string]any{"ace_type": "user", "path": "/pools/" + id, "user_id": carolID, "role_id": auditor}, 201, "/v3/access/acl")
	carol.must("GET", "/v2/projects/"+lab, nil, 200, "/v2/projects/{project_id}")

	// The pool's quota limits its projects, whoever makes the nodes.
	admin.must("PUT", "/v3/pools/"+id+"/quota", map[string]any{"max_nodes": 1}, 200, "/v3/pools/{resource_pool_id}/quota")
	alice.must("POST", "/v2/projects/"+lab+"/nodes", newVPCS("PC1"), 201, rNodes)
	r = admin.must("POST", "/v2/projects/"+lab+"/nodes", newVPCS("PC2"), 409, rNodes)
	if r.body["message"] != "quota exceeded: nodes 1/1 for pool lab-b (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}

	admin.must("DELETE", res, nil, 204, rResources+"/{resource_id}")
	if r := carol.do("GET", "/v2/projects/"+lab, nil); r.status != 404 {
		t.Fatalf("carol after the project left the pool: %d", r.status)
	}
	admin.must("DELETE", "/v3/pools/"+id, nil, 204, rPool)
	admin.must("DELETE", "/v3/pools/"+id, nil, 404, rPool)
}

// Requests at a limit at once, each in a project of its own, from two
// members of a limited group: one passes, the others are 409s.
func TestQuotaConcurrentNodeCreatesThroughTheAPIOnePasses(t *testing.T) {
	s, students := newQuotaServer(t)
	admin := s.as("admin")
	admin.must("PUT", "/v3/access/groups/"+students.ID+"/quota", map[string]any{"max_nodes": 1}, 200, rQuotaGroup)
	var labs []string
	for i, user := range []string{"alice", "bob", "alice", "bob", "alice", "bob"} {
		labs = append(labs, s.as(user).must("POST", "/v2/projects", map[string]any{"name": fmt.Sprintf("lab%d", i)}, 201, rProjects).body["project_id"].(string))
	}
	statuses := make(chan int, len(labs))
	var wg sync.WaitGroup
	for i, lab := range labs {
		user := []string{"alice", "bob"}[i%2]
		wg.Go(func() {
			statuses <- s.as(user).do("POST", "/v2/projects/"+lab+"/nodes", newVPCS("PC1")).status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[201] != 1 || count[409] != len(labs)-1 {
		t.Fatalf("statuses %v, want one 201 and %d 409s", count, len(labs)-1)
	}
}

// A snapshot restore that brings back more nodes than its project has
// keeps the quotas: refused at the limit, the project as it was.
func TestQuotaSnapshotRestoreAtTheLimit(t *testing.T) {
	s, _ := newQuotaServer(t)
	admin, alice := s.as("admin"), s.as("alice")
	var aliceID string
	for _, u := range s.svc.Users() {
		if u.Username == "alice" {
			aliceID = u.ID
		}
	}
	admin.must("PUT", "/v3/access/users/"+aliceID+"/quota", map[string]any{"max_nodes": 2}, 200, "/v3/access/users/{user_id}/quota")
	lab := alice.must("POST", "/v2/projects", map[string]any{"name": "lab"}, 201, rProjects).body["project_id"].(string)
	p := "/v2/projects/" + lab
	alice.must("POST", p+"/nodes", newVPCS("PC1"), 201, rNodes)
	pc2 := alice.must("POST", p+"/nodes", newVPCS("PC2"), 201, rNodes).body["node_id"].(string)
	snap := alice.must("POST", p+"/snapshots", map[string]any{"name": "two"}, 201, "/v2/projects/{project_id}/snapshots").body["snapshot_id"].(string)
	alice.must("DELETE", p+"/nodes/"+pc2, nil, 204, rNode)
	other := alice.must("POST", "/v2/projects", map[string]any{"name": "other"}, 201, rProjects).body["project_id"].(string)
	alice.must("POST", "/v2/projects/"+other+"/nodes", newVPCS("PC1"), 201, rNodes)
	r := alice.must("POST", p+"/snapshots/"+snap+"/restore", nil, 409, "/v2/projects/{project_id}/snapshots/{snapshot_id}/restore")
	if r.body["message"] != "quota exceeded: nodes 2/2 for user alice (this needs 1 more)" {
		t.Fatalf("409 says %s", r.raw)
	}
	if n := s.nodeCount(t, lab); n != 1 {
		t.Fatalf("%d nodes after the refused restore, want 1", n)
	}
}
