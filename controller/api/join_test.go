package api_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/internal/pki"
)

// joinServer is an API with authentication on and agents allowed to join.
func joinServer(t *testing.T) (*server, *compute.Enrollment) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := pki.LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	e, err := compute.NewEnrollment(ca, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newServerConfig(t, nil, func(c *api.Config) {
		c.User, c.Password = "admin", "pw"
		c.Computes.(*compute.Registry).SetEnrollment(e)
		c.Enroll = e
	})
	return s, e
}

func TestJoinTokensNeedCredentialsAndTheJoinNeedsOnlyTheToken(t *testing.T) {
	s, e := joinServer(t)
	for _, ttl := range []string{`{"ttl": -1}`, `{"ttl": 604801}`, `{"ttl": "1h"}`, `[1]`} {
		if r := s.do("POST", "/v3/computes/join-tokens", ttl); r.status/100 != 4 {
			t.Errorf("ttl %s: %d %s", ttl, r.status, r.raw)
		}
	}
	r := s.must("POST", "/v3/computes/join-tokens", `{"ttl": 60}`, 201, "/v3/computes/join-tokens")
	tok, _ := r.body["token"].(string)
	if !strings.HasPrefix(tok, "labtap-join-") || r.body["ca_sha256"] != e.CAFingerprint() || r.body["expires_at"] == nil {
		t.Fatalf("token reply %s", r.raw)
	}
	// The join itself goes without credentials; the token route does not.
	user, password := s.user, s.password
	s.user, s.password = "", ""
	if r := s.do("POST", "/v3/computes/join-tokens", `{}`); r.status != 401 {
		t.Errorf("a token without credentials: %d", r.status)
	}
	_, csr, _ := pki.NewKeyAndCSR("a1")
	body := map[string]any{"token": tok, "csr": string(csr), "compute_id": "a1", "host": "127.0.0.2", "port": 3081}
	r = s.do("POST", "/v3/computes/join", body)
	if r.status != 201 || r.header.Get("X-Route") != "/v3/computes/join" || r.body["certificate"] == nil {
		t.Fatalf("join: %d %s", r.status, r.raw)
	}
	if strings.Contains(string(r.raw), "PRIVATE KEY") {
		t.Error("the join reply holds a private key")
	}
	body["compute_id"] = "a2"
	r = s.do("POST", "/v3/computes/join", body)
	if r.status != 403 || !strings.Contains(r.body["message"].(string), "already used") {
		t.Errorf("replayed join: %d %s", r.status, r.raw)
	}
	if r := s.do("POST", "/v3/computes/join", strings.Repeat(" ", 17<<10)+"{}"); r.status/100 != 4 {
		t.Errorf("an oversized join: %d", r.status)
	}
	// The compute is listed, its certificate serial never shown.
	s.user, s.password = user, password
	r = s.must("GET", "/v2/computes/a1", nil, 200, "/v2/computes/{compute_id}")
	if r.body["protocol"] != "https" || strings.Contains(string(r.raw), "serial") {
		t.Errorf("joined compute %s", r.raw)
	}
}

func TestWithoutTLSAutoAgentsCannotJoin(t *testing.T) {
	s := newServer(t)
	if r := s.do("POST", "/v3/computes/join-tokens", `{}`); r.status != 409 || !strings.Contains(r.body["message"].(string), "--tls auto") {
		t.Errorf("token: %d %s", r.status, r.raw)
	}
	if r := s.do("POST", "/v3/computes/join", `{"token": "x"}`); r.status != 409 {
		t.Errorf("join: %d %s", r.status, r.raw)
	}
}
