package access

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// clock is a settable clock for tokens and caches.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newService opens a new database in a test directory, with the cheapest
// bcrypt cost, and a clock the test moves.
func newService(t testing.TB) (*Service, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)}
	s, err := Open(context.Background(), Config{
		Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: bcrypt.MinCost, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func mustUser(t testing.TB, s *Service, name string) User {
	t.Helper()
	u, err := s.CreateUser(context.Background(), UserCreate{Username: name, Password: "password-" + name})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func roleNamed(t testing.TB, s *Service, name string) Role {
	t.Helper()
	for _, r := range s.Roles() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no role %q", name)
	return Role{}
}

func groupNamed(t testing.TB, s *Service, name string) Group {
	t.Helper()
	for _, g := range s.Groups() {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %q", name)
	return Group{}
}

func TestSeededCatalogue(t *testing.T) {
	s, _ := newService(t)
	if n := len(s.Privileges()); n != 45 {
		t.Errorf("privileges = %d, want 45", n)
	}
	want := map[string]int{"Administrator": 45, "User": 24, "Auditor": 10, "Template manager": 9,
		"User manager": 6, "ACL manager": 6, "No Access": 0}
	roles := s.Roles()
	if len(roles) != len(want) {
		t.Errorf("roles = %d, want %d", len(roles), len(want))
	}
	for _, r := range roles {
		if n, ok := want[r.Name]; !ok || len(r.Privileges) != n || !r.Builtin {
			t.Errorf("role %s: %d privileges, builtin %v; want %d, builtin", r.Name, len(r.Privileges), r.Builtin, n)
		}
	}
	if p := s.Privileges(); p[0].Name != "User.Allocate" || p[0].Description != "Create or delete a user" ||
		p[44].Name != "Appliance.Audit" || p[9].Description != "Create or delete an ACE" {
		t.Errorf("catalogue order or descriptions: first %+v, tenth %+v, last %+v", p[0], p[9], p[44])
	}
	if g := s.Groups(); len(g) != 2 || !g[0].Builtin || !g[1].Builtin {
		t.Errorf("groups = %+v, want Administrators and Users, built-in", g)
	}
	if len(s.Users()) != 0 || len(s.ACEs()) != 0 {
		t.Errorf("a new database has users %v and ACEs %v", s.Users(), s.ACEs())
	}
}

func TestUserBounds(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	long := string(make([]byte, 300))
	tests := []struct {
		name string
		c    UserCreate
		want error
	}{
		{"short name", UserCreate{Username: "ab", Password: "password1"}, ErrInvalid},
		{"space in name (GNS3 takes it)", UserCreate{Username: "John Doe", Password: "password1"}, ErrInvalid},
		{"long name", UserCreate{Username: "a234567890123456789012345678901234567890123456789012345678901234x", Password: "password1"}, ErrInvalid},
		{"short password", UserCreate{Username: "alice", Password: "seven77"}, ErrInvalid},
		{"password over bcrypt's 72 bytes", UserCreate{Username: "alice", Password: "é123456789012345678901234567890123456789012345678901234567890123456789012"}, ErrInvalid},
		{"bad email", UserCreate{Username: "alice", Password: "password1", Email: "Alice <a@b.c>"}, ErrInvalid},
		{"long full name", UserCreate{Username: "alice", Password: "password1", FullName: long}, ErrInvalid},
		{"control in full name", UserCreate{Username: "alice", Password: "password1", FullName: "a\nb"}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CreateUser(ctx, tt.c); !errors.Is(err, tt.want) {
				t.Errorf("CreateUser() = %v, want %v", err, tt.want)
			}
		})
	}
	if n := len(s.Users()); n != 0 {
		t.Errorf("refused users left %d users", n)
	}
	a, err := s.CreateUser(ctx, UserCreate{Username: "alice", Password: "password1", Email: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, UserCreate{Username: "alice", Password: "password1"}); !errors.Is(err, ErrExists) || err.Error() != "Username 'alice' is already registered" {
		t.Errorf("second alice: %v", err)
	}
	if _, err := s.CreateUser(ctx, UserCreate{Username: "bob", Password: "password1", Email: "a@example.com"}); err == nil || err.Error() != "Email 'a@example.com' is already registered" {
		t.Errorf("bob with alice's email: %v", err)
	}
	// Unchanged username and email are not "already registered" (GNS3 says they are).
	name, email := "alice", "a@example.com"
	if _, err := s.UpdateUser(ctx, a.ID, UserUpdate{Username: &name, Email: &email}); err != nil {
		t.Errorf("update with unchanged name and email: %v", err)
	}
}
