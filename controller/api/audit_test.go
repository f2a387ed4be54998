package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"golang.org/x/crypto/bcrypt"
)

// auditBuffer is an audit trail in memory, safe for concurrent use.
type auditBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *auditBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns the lines written since the last take, decoded; it fails
// the test on a line that is not one JSON object.
func (b *auditBuffer) take(t *testing.T) (lines []api.AuditRecord, raw string) {
	t.Helper()
	b.mu.Lock()
	raw = b.buf.String()
	b.buf.Reset()
	b.mu.Unlock()
	for l := range strings.SplitSeq(strings.TrimSuffix(raw, "\n"), "\n") {
		if l == "" {
			continue
		}
		var r api.AuditRecord
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		lines = append(lines, r)
	}
	return lines, raw
}

// newAuditedServer is newAccessServer's server with an audit trail.
func newAuditedServer(t *testing.T) (*accessServer, *auditBuffer) {
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
	trail := &auditBuffer{}
	app, _, err := api.New(api.Config{Projects: projects, Computes: reg, Agents: reg.Agents, Version: "2.2.59",
		User: "admin", Password: "s3cret", Access: svc, Audit: trail})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	return &accessServer{t: t, url: "http://" + ln.Addr().String(), svc: svc, http: &http.Client{}}, trail
}

// TestAuditTrailHasALinePerChangeAndPerRefusal: a change leaves one line
// naming who, the route, the objects (the path's and the created one's)
// and the answer; a read leaves none; a refusal (401, 403) leaves one
// with its message; a password change's line holds no password, and no
// line holds a token or a Basic credential.
func TestAuditTrailHasALinePerChangeAndPerRefusal(t *testing.T) {
	t.Parallel()
	s, trail := newAuditedServer(t)
	admin := s.login("admin", "admin-password")
	if lines, raw := trail.take(t); len(lines) != 1 || lines[0].User != "admin" || lines[0].Route != "/v3/access/users/login" || lines[0].Status != 200 {
		t.Errorf("a login: %s", raw)
	}

	r := s.must("POST", "/v3/access/users", admin, map[string]any{"username": "alice", "password": "alice-first-password"}, 201)
	aliceID := r.obj()["user_id"].(string)
	lines, raw := trail.take(t)
	if len(lines) != 1 {
		t.Fatalf("a user created: %d lines, want 1:\n%s", len(lines), raw)
	}
	l := lines[0]
	if l.User != "admin" || l.UserID == "" || l.Method != "POST" || l.Route != "/v3/access/users" || l.Status != 201 ||
		l.Objects["user_id"] != aliceID || l.Client != "127.0.0.1" || l.Time.IsZero() || l.Message != "" {
		t.Errorf("a user created: %s", raw)
	}

	s.must("GET", "/v3/access/users", admin, nil, 200)
	if lines, raw := trail.take(t); len(lines) != 0 {
		t.Errorf("a read: %s", raw)
	}

	alice := s.login("alice", "alice-first-password")
	trail.take(t)
	s.must("PUT", "/v3/access/users/me", alice, map[string]any{"password": "alice-second-password"}, 200)
	lines, raw = trail.take(t)
	if len(lines) != 1 || lines[0].User != "alice" || lines[0].Route != "/v3/access/users/me" || lines[0].Status != 200 {
		t.Errorf("a password change: %s", raw)
	}
	if strings.Contains(raw, "alice-second-password") || strings.Contains(raw, "password\"") {
		t.Errorf("the password change's line holds the password: %s", raw)
	}

	// Refusals: alice may not list users (403), a bad password (401),
	// each with its message; a refused read leaves a line too.
	s.must("GET", "/v3/access/users", s.login("alice", "alice-second-password"), nil, 403)
	lines, raw = trail.take(t)
	if len(lines) != 2 || lines[1].Status != 403 || lines[1].User != "alice" || lines[1].Method != "GET" ||
		!strings.Contains(lines[1].Message, "User.Audit") {
		t.Errorf("a 403: %s", raw)
	}
	s.must("GET", "/v3/access/users/"+aliceID, basic("alice", "wrong-password"), nil, 401)
	lines, raw = trail.take(t)
	if len(lines) != 1 || lines[0].Status != 401 || lines[0].User != "" || lines[0].Objects["user_id"] != aliceID {
		t.Errorf("a 401: %s", raw)
	}
	if strings.Contains(raw, "wrong-password") || strings.Contains(raw, "Basic") {
		t.Errorf("the 401's line holds the credential: %s", raw)
	}

	// /v2: a change names the project it made, and its deletion the project.
	v2 := basic("admin", "admin-password")
	r = s.must("POST", "/v2/projects", v2, map[string]any{"name": "audited"}, 201)
	pid := r.obj()["project_id"].(string)
	s.must("DELETE", "/v2/projects/"+pid+"?token=secret-in-query", v2, nil, 204)
	lines, raw = trail.take(t)
	if len(lines) != 2 || lines[0].User != "admin" || lines[0].Route != "/v2/projects" || lines[0].Objects["project_id"] != pid || lines[0].Status != 201 ||
		lines[1].Route != "/v2/projects/{project_id}" || lines[1].Objects["project_id"] != pid || lines[1].Status != 204 {
		t.Errorf("/v2 changes: %s", raw)
	}
	if strings.Contains(raw, "secret-in-query") {
		t.Errorf("a line holds the query string: %s", raw)
	}
	for _, secret := range []string{strings.TrimPrefix(admin, "Bearer "), "s3cret", "admin-password", "alice-first-password"} {
		if strings.Contains(raw, secret) {
			t.Errorf("a line holds %q", secret)
		}
	}
}
