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
