package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"golang.org/x/crypto/bcrypt"
)

// accessServer serves the API on a loopback port with the /v3/access
// routes, whose first super admin is admin with password admin-password;
// /v2 authenticates the same users (Config.User and Password, admin and
// s3cret, are not one of them).
type accessServer struct {
	t    *testing.T
	url  string
	svc  *access.Service
	http *http.Client
}

func newAccessServer(t *testing.T) *accessServer {
	t.Helper()
	svc, err := access.Open(context.Background(), access.Config{Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Bootstrap(context.Background(), "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	projects := project.NewService(project.Config{ProjectsDir: t.TempDir(), Computes: reg.Agents})
	app, _, err := api.New(api.Config{Projects: projects, Computes: reg, Agents: reg.Agents, Version: "2.2.59",
		User: "admin", Password: "s3cret", Access: svc})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	return &accessServer{t: t, url: "http://" + ln.Addr().String(), svc: svc, http: &http.Client{}}
}

type accessReply struct {
	status int
	header http.Header
	raw    []byte
	body   any
}

func (r accessReply) obj() map[string]any { m, _ := r.body.(map[string]any); return m }
func (r accessReply) list() []any         { l, _ := r.body.([]any); return l }
func (r accessReply) msg() string         { s, _ := r.obj()["message"].(string); return s }

// do sends a request; auth is "Bearer ...", "Basic ..." or "". body is
// sent as JSON, unless it is url.Values (a form) or a string (as is).
func (s *accessServer) do(method, path, auth string, body any) accessReply {
	s.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case url.Values:
		rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	case string:
		rd, ctype = strings.NewReader(b), "application/json"
	default:
		j, _ := json.Marshal(b)
		rd, ctype = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := accessReply{status: resp.StatusCode, header: resp.Header, raw: raw}
	json.Unmarshal(raw, &r.body)
	return r
}

// must sends a request and fails the test unless it gets status.
func (s *accessServer) must(method, path, auth string, body any, status int) accessReply {
	s.t.Helper()
	r := s.do(method, path, auth, body)
	if r.status != status {
		s.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.raw, status)
	}
	return r
}

func (s *accessServer) login(user, pass string) string {
	s.t.Helper()
	r := s.must("POST", "/v3/access/users/login", "", url.Values{"username": {user}, "password": {pass}}, 200)
	if r.obj()["token_type"] != "bearer" {
		s.t.Fatalf("login: %s", r.raw)
	}
	return "Bearer " + r.obj()["access_token"].(string)
}

func TestAccessLoginAndTokens(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	const login = "/v3/access/users/login"
	r := s.must("POST", login, "", url.Values{"username": {"admin"}, "password": {"wrong-password"}}, 401)
	if r.msg() != "Authentication was unsuccessful." || r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("bad password: %s %v", r.raw, r.header)
	}
	s.must("POST", login, "", url.Values{"username": {"admin"}}, 422)
	s.must("POST", login, "", url.Values{"username": {"admin"}, "password": {"admin-password"}, "grant_type": {"client_credentials"}}, 422)
	s.must("POST", login, "", map[string]any{"username": "admin", "password": "admin-password"}, 422)
	r = s.must("POST", "/v3/access/users/authenticate", "", map[string]any{"username": "admin", "password": "admin-password"}, 200)
	if !slices.Equal(keys(r.obj()), []string{"access_token", "token_type"}) {
		t.Errorf("token shape: %s", r.raw)
	}
	s.must("POST", "/v3/access/users/authenticate", "", map[string]any{"username": "admin"}, 422)
	admin := s.login("admin", "admin-password")

	r = s.must("GET", "/v3/access/users/me", "", nil, 401)
	if r.msg() != "Not authenticated" || r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("no credentials: %s", r.raw)
	}
	if r = s.must("GET", "/v3/access/users/me", "Bearer nope", nil, 401); r.msg() != "Could not validate credentials" {
		t.Errorf("bad token: %s", r.raw)
	}
	// A token in the URL is not looked at.
	s.must("GET", "/v3/access/users/me?token="+strings.TrimPrefix(admin, "Bearer "), "", nil, 401)
	r = s.must("GET", "/v3/access/users/me", admin, nil, 200)
	want := []string{"created_at", "email", "full_name", "is_active", "is_superadmin", "last_login", "updated_at", "user_id", "username"}
	if !slices.Equal(keys(r.obj()), want) || r.obj()["is_superadmin"] != true || r.obj()["full_name"] != "Super Administrator" ||
		r.obj()["email"] != nil || len(r.obj()["created_at"].(string)) != len("2026-05-19T11:32:18") || r.obj()["last_login"] == nil {
		t.Errorf("me: %s", r.raw)
	}
	// Basic works on /v3 too, with the database's credentials.
	s.must("GET", "/v3/access/users/me", basic("admin", "admin-password"), nil, 200)
	s.must("GET", "/v3/access/users/me", basic("admin", "s3cret"), nil, 401)
	// /v2 authenticates the database's users too, by token or Basic; the
	// configured credential is not one of them.
	s.must("GET", "/v2/version", admin, nil, 200)
	s.must("GET", "/v2/version", basic("admin", "admin-password"), nil, 200)
	s.must("GET", "/v2/version", basic("admin", "s3cret"), nil, 401)
	s.must("GET", "/v2/version", "Bearer nope", nil, 401)
	// A token in a plain route's URL is not looked at.
	s.must("GET", "/v2/version?token="+strings.TrimPrefix(admin, "Bearer "), "", nil, 401)

	s.must("POST", "/v3/access/users/logout", admin, nil, 204)
	if r = s.must("GET", "/v3/access/users/me", admin, nil, 401); r.msg() != "Token has been revoked for 'admin'" {
		t.Errorf("after logout: %s", r.raw)
	}
}

func basic(user, pass string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, pass)
	return req.Header.Get("Authorization")
}

func TestAccessUsersRoutes(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	admin := s.login("admin", "admin-password")
	const users = "/v3/access/users"
	r := s.must("POST", users, admin, map[string]any{"username": "alice", "password": "alice-password", "email": "alice@example.com",
		"is_superadmin": true, "unknown": 1}, 201)
	alice := r.obj()
	if alice["is_superadmin"] != false || alice["is_active"] != true || alice["email"] != "alice@example.com" || alice["last_login"] != nil {
		t.Errorf("created: %s", r.raw)
	}
	aliceID := alice["user_id"].(string)
	if r = s.must("POST", users, admin, map[string]any{"username": "alice", "password": "alice-password"}, 400); r.msg() != "Username 'alice' is already registered" {
		t.Errorf("duplicate: %s", r.raw)
	}
	for name, body := range map[string]any{
		"no password":     map[string]any{"username": "bob"},
		"short password":  map[string]any{"username": "bob", "password": "short"},
		"space in name":   map[string]any{"username": "bob smith", "password": "bob-password"},
		"number name":     map[string]any{"username": 12, "password": "bob-password"},
		"long full name":  map[string]any{"username": "bob", "password": "bob-password", "full_name": strings.Repeat("b", 300)},
		"bad email":       map[string]any{"username": "bob", "password": "bob-password", "email": "bob"},
		"null is_active":  map[string]any{"username": "bob", "password": "bob-password", "is_active": nil},
		"not an object":   []int{1},
		"password > 72 B": map[string]any{"username": "bob", "password": strings.Repeat("p", 73)},
	} {
		if r := s.do("POST", users, admin, body); r.status != 422 || r.msg() == "" {
			t.Errorf("%s: %d %s, want 422", name, r.status, r.raw)
		}
	}
	if r := s.do("POST", users, admin, `{"username":"bob","password":"bob-password","full_name":"`+strings.Repeat("b", 70<<10)+`"}`); r.status != 413 {
		t.Errorf("oversized body: %d %s", r.status, r.raw)
	}
	if n := len(s.must("GET", users, admin, nil, 200).list()); n != 2 {
		t.Errorf("%d users after the refused ones, want 2", n)
	}
	s.must("GET", users+"/"+aliceID, admin, nil, 200)
	// Any spelling of a UUID is the same user.
	s.must("GET", users+"/"+strings.ToUpper(aliceID), admin, nil, 200)
	const unknown = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	if r = s.must("GET", users+"/"+unknown, admin, nil, 404); r.msg() != "User '"+unknown+"' not found" {
		t.Errorf("unknown: %s", r.raw)
	}
	s.must("GET", users+"/not-a-uuid", admin, nil, 422)
	s.must("PUT", users+"/"+unknown, admin, map[string]any{"full_name": "x"}, 404)
	s.must("DELETE", users+"/"+unknown, admin, nil, 404)
	// Unchanged username and email are accepted (GNS3 answers 400).
	s.must("PUT", users+"/"+aliceID, admin, map[string]any{"username": "alice", "email": "alice@example.com", "full_name": "Alice"}, 200)

	// alice has no privilege yet.
	tok := s.login("alice", "alice-password")
	if r = s.must("GET", users, tok, nil, 403); r.msg() != "Permission denied (privilege User.Audit is required)" {
		t.Errorf("alice lists users: %s", r.raw)
	}
	s.must("GET", "/v3/access/users/me", tok, nil, 200)
	s.must("GET", "/v3/access/privileges", tok, nil, 200)
	// User manager on /access/users.
	roles := s.must("GET", "/v3/access/roles", admin, nil, 200).list()
	roleID := func(name string) string {
		for _, r := range roles {
			if r.(map[string]any)["name"] == name {
				return r.(map[string]any)["role_id"].(string)
			}
		}
		t.Fatalf("no role %s", name)
		return ""
	}
	s.must("POST", "/v3/access/acl", admin, map[string]any{"ace_type": "user", "user_id": aliceID, "path": "/access/users",
		"role_id": roleID("User manager")}, 201)
	s.must("GET", users, tok, nil, 200)
	// User.Modify does not reach the super admin.
	adminID := s.must("GET", "/v3/access/users/me", admin, nil, 200).obj()["user_id"].(string)
	s.must("PUT", users+"/"+adminID, tok, map[string]any{"password": "taken-over!"}, 403)
	if r = s.must("DELETE", users+"/"+adminID, admin, nil, 403); r.msg() != "The super admin cannot be deleted" {
		t.Errorf("delete super admin: %s", r.raw)
	}
	// A password change revokes alice's tokens.
	s.must("PUT", "/v3/access/users/me", tok, map[string]any{"password": "alice-password-2"}, 200)
	s.must("GET", "/v3/access/users/me", tok, nil, 401)
	tok = s.login("alice", "alice-password-2")
	// Disabled: refused, then deleted: gone.
	s.must("PUT", users+"/"+aliceID, admin, map[string]any{"is_active": false}, 200)
	s.must("GET", "/v3/access/users/me", tok, nil, 401)
	s.must("POST", "/v3/access/users/login", "", url.Values{"username": {"alice"}, "password": {"alice-password-2"}}, 401)
	s.must("DELETE", users+"/"+aliceID, admin, nil, 204)
	if n := len(s.must("GET", "/v3/access/acl", admin, nil, 200).list()); n != 0 {
		t.Errorf("the deleted user's ACE stayed (%d ACEs)", n)
	}
	// Unknown routes under /v3/access: 401, then 404.
	s.must("GET", "/v3/access/nothing", "", nil, 401)
	s.must("GET", "/v3/access/nothing", admin, nil, 404)
}

func TestAccessGroupsRolesACLRoutes(t *testing.T) {
	t.Parallel()
	s := newAccessServer(t)
	admin := s.login("admin", "admin-password")
	const groups, roles, acl = "/v3/access/groups", "/v3/access/roles", "/v3/access/acl"
	bob := s.must("POST", "/v3/access/users", admin, map[string]any{"username": "bob", "password": "bob-password"}, 201).obj()["user_id"].(string)

	// Groups.
	builtin := s.must("GET", groups, admin, nil, 200).list()
	if len(builtin) != 2 {
		t.Fatalf("groups: %v", builtin)
	}
	usersGroup := builtin[1].(map[string]any)["user_group_id"].(string)
	if r := s.must("DELETE", groups+"/"+usersGroup, admin, nil, 403); r.msg() != "Built-in user group '"+usersGroup+"' cannot be deleted" {
		t.Errorf("delete built-in group: %s", r.raw)
	}
	s.must("PUT", groups+"/"+usersGroup, admin, map[string]any{"name": "renamed"}, 403)
	r := s.must("POST", groups, admin, map[string]any{"name": "lab-1"}, 201)
	if !slices.Equal(keys(r.obj()), []string{"created_at", "is_builtin", "name", "updated_at", "user_group_id"}) {
		t.Errorf("group shape: %s", r.raw)
	}
	lab := r.obj()["user_group_id"].(string)
	if r = s.must("POST", groups, admin, map[string]any{"name": "lab-1"}, 400); r.msg() != "User group 'lab-1' already exists" {
		t.Errorf("duplicate group: %s", r.raw)
	}
	s.must("POST", groups, admin, map[string]any{"name": nil}, 422)
	s.must("POST", groups, admin, map[string]any{"name": "a b"}, 422)
	s.must("PUT", groups+"/"+lab+"/members/"+bob, admin, nil, 204)
	if r = s.must("PUT", groups+"/"+lab+"/members/"+bob, admin, nil, 400); r.msg() != "Username 'bob' is already member of group 'lab-1'" {
		t.Errorf("member twice: %s", r.raw)
	}
	if m := s.must("GET", groups+"/"+lab+"/members", admin, nil, 200).list(); len(m) != 1 || m[0].(map[string]any)["username"] != "bob" {
		t.Errorf("members: %v", m)
	}
	if g := s.must("GET", "/v3/access/users/"+bob+"/groups", admin, nil, 200).list(); len(g) != 1 {
		t.Errorf("bob's groups: %v", g)
	}
	s.must("DELETE", groups+"/"+lab+"/members/"+bob, admin, nil, 204)
	s.must("DELETE", groups+"/"+lab+"/members/"+bob, admin, nil, 404)          // GNS3: 500
	s.must("PUT", groups+"/"+lab, admin, map[string]any{"name": "Users"}, 400) // GNS3: 500
	s.must("GET", groups+"/0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", admin, nil, 404)

	// Roles and privileges.
	privs := s.must("GET", "/v3/access/privileges", admin, nil, 200).list()
	if len(privs) != 45 || privs[0].(map[string]any)["name"] != "User.Allocate" {
		t.Fatalf("privileges: %d", len(privs))
	}
	r = s.must("POST", roles, admin, map[string]any{"name": "Starter", "description": "starts nodes"}, 201)
	if !slices.Equal(keys(r.obj()), []string{"created_at", "description", "is_builtin", "name", "privileges", "role_id", "updated_at"}) ||
		len(r.obj()["privileges"].([]any)) != 0 {
		t.Errorf("role shape: %s", r.raw)
	}
	starter := r.obj()["role_id"].(string)
	var powerMgmt string
	for _, p := range privs {
		if p.(map[string]any)["name"] == "Node.PowerMgmt" {
			powerMgmt = p.(map[string]any)["privilege_id"].(string)
		}
	}
	s.must("PUT", roles+"/"+starter+"/privileges/"+powerMgmt, admin, nil, 204)
	s.must("PUT", roles+"/"+starter+"/privileges/"+powerMgmt, admin, nil, 204) // idempotent
	if p := s.must("GET", roles+"/"+starter+"/privileges", admin, nil, 200).list(); len(p) != 1 {
		t.Errorf("role privileges: %v", p)
	}
	builtinRole := s.must("GET", roles, admin, nil, 200).list()[0].(map[string]any)["role_id"].(string)
	if r = s.must("PUT", roles+"/"+builtinRole, admin, map[string]any{"name": "x"}, 403); r.msg() != "Built-in role '"+builtinRole+"' cannot be updated" {
		t.Errorf("update built-in role: %s", r.raw)
	}
	s.must("PUT", roles+"/"+builtinRole+"/privileges/"+powerMgmt, admin, nil, 403)
	s.must("DELETE", roles+"/"+builtinRole, admin, nil, 403)
	s.must("PUT", roles+"/"+starter+"/privileges/0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", admin, nil, 404)

	// ACL.
	ace := map[string]any{"ace_type": "group", "group_id": lab, "path": "/projects", "role_id": starter}
	r = s.must("POST", acl, admin, ace, 201)
	if !slices.Equal(keys(r.obj()), []string{"ace_id", "ace_type", "allowed", "created_at", "group_id", "path", "propagate", "role_id", "updated_at", "user_id"}) ||
		r.obj()["propagate"] != true || r.obj()["allowed"] != true || r.obj()["user_id"] != nil {
		t.Errorf("ACE: %s", r.raw)
	}
	aceID := r.obj()["ace_id"].(string)
	bad := map[string]any{"ace_type": "group", "group_id": lab, "path": "/projects/", "role_id": starter}
	if r = s.must("POST", acl, admin, bad, 400); r.msg() != "Path '/projects/' doesn't match any existing endpoint" {
		t.Errorf("bad path: %s", r.raw)
	}
	s.must("POST", acl, admin, map[string]any{"ace_type": "group", "path": "/", "role_id": starter}, 422)
	s.must("POST", acl, admin, map[string]any{"ace_type": "group", "group_id": lab, "path": "/", "role_id": starter, "allowed": nil}, 422)
	s.must("POST", acl, admin, map[string]any{"ace_type": "user", "user_id": "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", "path": "/", "role_id": starter}, 404)
	s.must("PUT", acl+"/"+aceID, admin, map[string]any{"ace_type": "group", "path": "/projects/x", "role_id": starter}, 400)
	r = s.must("PUT", acl+"/"+aceID, admin, map[string]any{"ace_type": "group", "path": "/", "role_id": starter, "propagate": false}, 200)
	if r.obj()["group_id"] != lab || r.obj()["propagate"] != false || r.obj()["allowed"] != true {
		t.Errorf("updated ACE kept the omitted fields? %s", r.raw)
	}
	if e := s.must("GET", acl+"/endpoints", admin, nil, 200).list(); len(e) < 5 {
		t.Errorf("endpoints: %v", e)
	}
	// Deleting the role deletes its ACE.
	s.must("DELETE", roles+"/"+starter, admin, nil, 204)
	s.must("GET", acl+"/"+aceID, admin, nil, 404)
	s.must("DELETE", acl+"/"+aceID, admin, nil, 404)
}

// Every user of the access database opens /v2 with its own Basic
// credentials (what the GNS3 GUI sends, one user per person) or its
// token; a disabled user, or a password changed since, no longer does.
func TestV2AuthenticatesEachUserOfTheAccessDatabase(t *testing.T) {
	s := newAccessServer(t)
	ctx := context.Background()
	u, err := s.svc.CreateUser(ctx, access.UserCreate{Username: "alice", Password: "alice-password"})
	if err != nil {
		t.Fatal(err)
	}
	s.must("GET", "/v2/version", basic("alice", "alice-password"), nil, 200)
	s.must("GET", "/v2/version", basic("alice", "wrong-password"), nil, 401)
	tok := s.login("alice", "alice-password")
	s.must("GET", "/v2/version", tok, nil, 200)
	// A WebSocket handshake may carry the token in its URL (a page cannot
	// set its header); a plain request may not.
	handshake := func(query string) int {
		req, _ := http.NewRequest("GET", s.url+"/v2/version?token="+url.QueryEscape(query), nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		resp, err := s.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := handshake(strings.TrimPrefix(tok, "Bearer ")); got != 200 {
		t.Errorf("a WebSocket handshake with ?token=<token>: %d", got)
	}
	if got := handshake(strings.TrimPrefix(basic("alice", "alice-password"), "Basic ")); got != 200 {
		t.Errorf("a WebSocket handshake with ?token=<basic>: %d", got)
	}
	s.must("GET", "/v2/version?token="+url.QueryEscape(strings.TrimPrefix(tok, "Bearer ")), "", nil, 401)
	newPass := "alice-password-2"
	if _, err := s.svc.UpdateUser(ctx, u.ID, access.UserUpdate{Password: &newPass}); err != nil {
		t.Fatal(err)
	}
	s.must("GET", "/v2/version", basic("alice", "alice-password"), nil, 401) // the cached credential is dropped
	s.must("GET", "/v2/version", tok, nil, 401)                              // and the token revoked
	s.must("GET", "/v2/version", basic("alice", newPass), nil, 200)
	off := false
	if _, err := s.svc.UpdateUser(ctx, u.ID, access.UserUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	s.must("GET", "/v2/version", basic("alice", newPass), nil, 401)
}
