package api_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestSecurityUserModifyCannotTakeOverTheSuperAdmin: in GNS3 3.x a
// "User manager" (User.Modify) may set the super admin's password.
func TestSecurityUserModifyCannotTakeOverTheSuperAdmin(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	admin := s.login("admin", "admin-password")
	adminID := s.must("GET", "/v3/access/users/me", admin, nil, 200).obj()["user_id"].(string)
	mallory := s.must("POST", "/v3/access/users", admin, map[string]any{"username": "mallory", "password": "mallory-password"}, 201).obj()["user_id"].(string)
	var manager string
	for _, r := range s.must("GET", "/v3/access/roles", admin, nil, 200).list() {
		if r.(map[string]any)["name"] == "User manager" {
			manager = r.(map[string]any)["role_id"].(string)
		}
	}
	s.must("POST", "/v3/access/acl", admin, map[string]any{"ace_type": "user", "user_id": mallory, "path": "/", "role_id": manager}, 201)
	tok := s.login("mallory", "mallory-password")
	for _, body := range []map[string]any{{"password": "taken-over!"}, {"username": "mallory2"}, {"is_active": false}} {
		if r := s.do("PUT", "/v3/access/users/"+adminID, tok, body); r.status != 403 {
			t.Errorf("PUT super admin %v: %d %s, want 403", body, r.status, r.raw)
		}
	}
	s.must("POST", "/v3/access/users/login", "", url.Values{"username": {"admin"}, "password": {"admin-password"}}, 200)
	// The manager still manages the others.
	s.must("PUT", "/v3/access/users/"+mallory, tok, map[string]any{"full_name": "Mallory"}, 200)
}

// TestSecurityAccessTokenInTheURLIsRefused: GNS3 3.x takes ?token= on
// every HTTP route, so tokens end up in access and proxy logs.
func TestSecurityAccessTokenInTheURLIsRefused(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	tok := strings.TrimPrefix(s.login("admin", "admin-password"), "Bearer ")
	if r := s.do("GET", "/v3/access/users?token="+tok, "", nil); r.status != 401 {
		t.Errorf("token in the URL: %d %s, want 401", r.status, r.raw)
	}
}

// TestSecurityAccessLoginIsThrottled: GNS3 3.x lets anyone guess
// passwords as fast as it hashes them.
func TestSecurityAccessLoginIsThrottled(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	for range 10 {
		s.must("POST", "/v3/access/users/login", "", url.Values{"username": {"admin"}, "password": {"guess-guess"}}, 401)
	}
	r := s.do("POST", "/v3/access/users/login", "", url.Values{"username": {"admin"}, "password": {"admin-password"}})
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.msg() == "" {
		t.Errorf("11th login: %d %v %s, want 429 with Retry-After", r.status, r.header, r.raw)
	}
	if r := s.do("GET", "/v3/access/users/me", basic("admin", "admin-password"), nil); r.status != 429 {
		t.Errorf("Basic after the guesses: %d, want 429", r.status)
	}
}

// escalation is a server with a user mallory holding role on "/", and
// what the tests need of it.
type escalation struct {
	*accessServer
	admin, mallory, malloryID string
	roles, groups             map[string]string // ids by name
}

func newEscalation(t *testing.T, role string) *escalation {
	s := newAccessServer(t)
	e := &escalation{accessServer: s, admin: s.login("admin", "admin-password"), roles: map[string]string{}, groups: map[string]string{}}
	e.malloryID = s.must("POST", "/v3/access/users", e.admin, map[string]any{"username": "mallory", "password": "mallory-password"}, 201).obj()["user_id"].(string)
	for _, r := range s.must("GET", "/v3/access/roles", e.admin, nil, 200).list() {
		e.roles[r.(map[string]any)["name"].(string)] = r.(map[string]any)["role_id"].(string)
	}
	for _, g := range s.must("GET", "/v3/access/groups", e.admin, nil, 200).list() {
		e.groups[g.(map[string]any)["name"].(string)] = g.(map[string]any)["user_group_id"].(string)
	}
	s.must("POST", "/v3/access/acl", e.admin, map[string]any{"ace_type": "user", "user_id": e.malloryID, "path": "/", "role_id": e.roles[role]}, 201)
	e.mallory = s.login("mallory", "mallory-password")
	return e
}

// TestSecurityGroupModifyCannotJoinAMorePowerfulGroup: in GNS3 3.x a
// "User manager" may add itself to a group that is Administrator on "/".
func TestSecurityGroupModifyCannotJoinAMorePowerfulGroup(t *testing.T) {
	t.Parallel()
	e := newEscalation(t, "User manager")
	admins := e.groups["Administrators"]
	e.must("POST", "/v3/access/acl", e.admin, map[string]any{"ace_type": "group", "group_id": admins, "path": "/", "role_id": e.roles["Administrator"]}, 201)
	if r := e.do("PUT", "/v3/access/groups/"+admins+"/members/"+e.malloryID, e.mallory, nil); r.status != 403 {
		t.Errorf("mallory joins Administrators: %d %s, want 403", r.status, r.raw)
	}
	if m := e.must("GET", "/v3/access/groups/"+admins+"/members", e.admin, nil, 200).list(); len(m) != 0 {
		t.Errorf("members: %v", m)
	}
	// A group giving nothing more than mallory holds is hers to fill.
	e.must("PUT", "/v3/access/groups/"+e.groups["Users"]+"/members/"+e.malloryID, e.mallory, nil, 204)
	// The super admin may do it.
	e.must("PUT", "/v3/access/groups/"+admins+"/members/"+e.malloryID, e.admin, nil, 204)
}

// TestSecurityACEAllocateCannotGrantMoreThanItHolds: in GNS3 3.x an
// "ACL manager" may give itself Administrator on "/".
func TestSecurityACEAllocateCannotGrantMoreThanItHolds(t *testing.T) {
	t.Parallel()
	e := newEscalation(t, "ACL manager")
	grant := func(role, path string, allowed bool) accessReply {
		return e.do("POST", "/v3/access/acl", e.mallory, map[string]any{"ace_type": "user", "user_id": e.malloryID, "path": path,
			"role_id": e.roles[role], "allowed": allowed})
	}
	if r := grant("Administrator", "/", true); r.status != 403 {
		t.Errorf("mallory grants herself Administrator: %d %s, want 403", r.status, r.raw)
	}
	if r := grant("User", "/projects", true); r.status != 403 {
		t.Errorf("mallory grants herself User: %d %s, want 403", r.status, r.raw)
	}
	if r := grant("ACL manager", "/access/acl", true); r.status != 201 {
		t.Errorf("mallory grants what she holds: %d %s, want 201", r.status, r.raw)
	}
	if r := grant("Administrator", "/projects", false); r.status != 201 {
		t.Errorf("a deny: %d %s, want 201", r.status, r.raw)
	}
	// Nor by turning an ACE into more.
	aces := e.must("GET", "/v3/access/acl", e.admin, nil, 200).list()
	last := aces[len(aces)-1].(map[string]any)["ace_id"].(string)
	if r := e.do("PUT", "/v3/access/acl/"+last, e.mallory, map[string]any{"ace_type": "user", "path": "/", "role_id": e.roles["Administrator"], "allowed": true}); r.status != 403 {
		t.Errorf("mallory turns a deny into Administrator on /: %d %s, want 403", r.status, r.raw)
	}
}

// TestSecurityRoleModifyCannotWidenARoleBeyondItsOwn: in GNS3 3.x an
// "ACL manager" may add any privilege to a role it is given.
func TestSecurityRoleModifyCannotWidenARoleBeyondItsOwn(t *testing.T) {
	t.Parallel()
	e := newEscalation(t, "ACL manager")
	custom := e.must("POST", "/v3/access/roles", e.admin, map[string]any{"name": "Custom"}, 201).obj()["role_id"].(string)
	e.must("POST", "/v3/access/acl", e.admin, map[string]any{"ace_type": "user", "user_id": e.malloryID, "path": "/", "role_id": custom}, 201)
	privs := map[string]string{}
	for _, p := range e.must("GET", "/v3/access/privileges", e.admin, nil, 200).list() {
		privs[p.(map[string]any)["name"].(string)] = p.(map[string]any)["privilege_id"].(string)
	}
	if r := e.do("PUT", "/v3/access/roles/"+custom+"/privileges/"+privs["User.Allocate"], e.mallory, nil); r.status != 403 {
		t.Errorf("mallory widens Custom with User.Allocate: %d %s, want 403", r.status, r.raw)
	}
	e.must("PUT", "/v3/access/roles/"+custom+"/privileges/"+privs["Role.Audit"], e.mallory, nil, 204)
	if p := e.must("GET", "/v3/access/roles/"+custom+"/privileges", e.admin, nil, 200).list(); len(p) != 1 {
		t.Errorf("Custom's privileges: %v", p)
	}
}

// TestSecurityADeniedUserCannotLiftItsDeny: in GNS3 3.x an "ACL manager"
// may delete the deny put on itself, and a "User manager" leave the
// group that denies it.
func TestSecurityADeniedUserCannotLiftItsDeny(t *testing.T) {
	t.Parallel()
	e := newEscalation(t, "Administrator")
	deny := e.must("POST", "/v3/access/acl", e.admin, map[string]any{"ace_type": "user", "user_id": e.malloryID, "path": "/projects",
		"role_id": e.roles["Administrator"], "allowed": false}, 201).obj()["ace_id"].(string)
	if r := e.do("DELETE", "/v3/access/acl/"+deny, e.mallory, nil); r.status != 403 {
		t.Errorf("mallory deletes her deny: %d %s, want 403", r.status, r.raw)
	}
	if r := e.do("PUT", "/v3/access/acl/"+deny, e.mallory, map[string]any{"ace_type": "user", "path": "/templates", "role_id": e.roles["Administrator"]}); r.status != 403 {
		t.Errorf("mallory moves her deny: %d %s, want 403", r.status, r.raw)
	}
	users := e.groups["Users"]
	e.must("PUT", "/v3/access/groups/"+users+"/members/"+e.malloryID, e.admin, nil, 204)
	e.must("POST", "/v3/access/acl", e.admin, map[string]any{"ace_type": "group", "group_id": users, "path": "/images",
		"role_id": e.roles["Administrator"], "allowed": false}, 201)
	if r := e.do("DELETE", "/v3/access/groups/"+users+"/members/"+e.malloryID, e.mallory, nil); r.status != 403 {
		t.Errorf("mallory leaves the group denying her: %d %s, want 403", r.status, r.raw)
	}
	// The super admin lifts it.
	e.must("DELETE", "/v3/access/acl/"+deny, e.admin, nil, 204)
	e.must("DELETE", "/v3/access/groups/"+users+"/members/"+e.malloryID, e.admin, nil, 204)
}
