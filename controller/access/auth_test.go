package access

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

func TestAuthenticateCachesCredentials(t *testing.T) {
	s, clk := newService(t)
	ctx := context.Background()
	u := mustUser(t, s, "alice")
	start := s.hashes.Load()
	for range 5 {
		if _, err := s.Authenticate(ctx, "alice", "password-alice"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.hashes.Load() - start; n != 1 {
		t.Errorf("5 authentications hashed %d times, want 1", n)
	}
	// A wrong password is never cached, and always costs a hash.
	for range 2 {
		if _, err := s.Authenticate(ctx, "alice", "wrong-password"); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("wrong password: %v", err)
		}
	}
	if n := s.hashes.Load() - start; n != 3 {
		t.Errorf("hashes = %d, want 3", n)
	}
	// So does an unknown user (no faster answer to tell it apart).
	if _, err := s.Authenticate(ctx, "nobody", "password-alice"); err == nil || err.Error() != "Authentication was unsuccessful." {
		t.Errorf("unknown user: %v", err)
	}
	if n := s.hashes.Load() - start; n != 4 {
		t.Errorf("hashes = %d, want 4", n)
	}
	// The entry expires.
	clk.t = clk.t.Add(6 * time.Minute)
	s.Authenticate(ctx, "alice", "password-alice")
	if n := s.hashes.Load() - start; n != 5 {
		t.Errorf("after expiry: hashes = %d, want 5", n)
	}
	// A password change drops it: the old password fails at once.
	pw := "new-password"
	if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Password: &pw}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "password-alice"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("old password after the change: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Errorf("new password: %v", err)
	}
	// Disabling drops it too.
	off := false
	if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("disabled user: %v", err)
	}
}

func TestTokens(t *testing.T) {
	s, clk := newService(t)
	ctx := context.Background()
	u := mustUser(t, s, "alice")
	login := func() string {
		t.Helper()
		tok, err := s.Login(ctx, "alice", "password-alice")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok := login()
	if got, err := s.AuthenticateToken(ctx, tok); err != nil || got.ID != u.ID {
		t.Fatalf("AuthenticateToken = %+v, %v", got, err)
	}
	if got, _ := s.User(u.ID); !got.LastLogin.Equal(clk.t.Truncate(time.Second)) {
		t.Errorf("last_login = %v, want %v", got.LastLogin, clk.t)
	}
	t.Run("expires", func(t *testing.T) {
		clk.t = clk.t.Add(DefaultTokenTTL + tokenLeeway + time.Second)
		defer func() { clk.t = clk.t.Add(-(DefaultTokenTTL + tokenLeeway + time.Second)) }()
		if _, err := s.AuthenticateToken(ctx, tok); err == nil || err.Error() != "Could not validate credentials" {
			t.Errorf("expired token: %v", err)
		}
	})
	t.Run("other key or algorithm", func(t *testing.T) {
		c := claims{Ver: 0, RegisteredClaims: jwt.RegisteredClaims{Subject: u.ID, ExpiresAt: jwt.NewNumericDate(clk.t.Add(time.Hour))}}
		other, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte("another key of more than 32 characters"))
		hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, c).SignedString(s.secret)
		none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
		noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{RegisteredClaims: jwt.RegisteredClaims{Subject: u.ID}}).SignedString(s.secret)
		byName, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "alice", ExpiresAt: c.ExpiresAt}}).SignedString(s.secret)
		for name, tok := range map[string]string{"other key": other, "HS512": hs512, "none": none, "no exp": noExp, "username subject": byName, "garbage": "a.b.c"} {
			if _, err := s.AuthenticateToken(ctx, tok); err == nil || err.Error() != "Could not validate credentials" {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	revoked := func(t *testing.T, tok string) {
		t.Helper()
		if _, err := s.AuthenticateToken(ctx, tok); err == nil || err.Error() != "Token has been revoked for 'alice'" {
			t.Errorf("AuthenticateToken = %v, want revoked", err)
		}
	}
	t.Run("logout", func(t *testing.T) {
		tok := login()
		if err := s.Logout(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		revoked(t, tok)
	})
	t.Run("password change", func(t *testing.T) {
		tok := login()
		pw := "password-alice" // the same password still revokes
		if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Password: &pw}); err != nil {
			t.Fatal(err)
		}
		revoked(t, tok)
	})
	t.Run("disable", func(t *testing.T) {
		tok := login()
		off, on := false, true
		if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Active: &off}); err != nil {
			t.Fatal(err)
		}
		revoked(t, tok)
		if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Active: &on}); err != nil {
			t.Fatal(err)
		}
		revoked(t, tok) // re-enabling does not bring old tokens back
	})
	t.Run("rename", func(t *testing.T) {
		tok := login()
		name, back := "alice2", "alice"
		if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Username: &name}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Username: &back}); err != nil {
			t.Fatal(err)
		}
		revoked(t, tok)
	})
	t.Run("delete", func(t *testing.T) {
		tok := login()
		if err := s.DeleteUser(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		mustUser(t, s, "alice") // a new alice does not inherit the old one's tokens
		if _, err := s.AuthenticateToken(ctx, tok); err == nil {
			t.Error("a deleted user's token works for the next user of its name")
		}
	})
}

func TestTokenSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Path: filepath.Join(dir, "access.db"), BcryptCost: bcrypt.MinCost}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bootstrap(context.Background(), "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.Login(context.Background(), "admin", "admin-password")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AuthenticateToken(context.Background(), tok); err != nil {
		t.Errorf("token after restart: %v", err)
	}
}

func TestBootstrap(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	cfg := Config{Path: filepath.Join(dir, "access.db"), BcryptCost: bcrypt.MinCost,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if made, err := s.Bootstrap(context.Background(), "admin", "first-password"); err != nil || !made {
		t.Fatalf("Bootstrap = %v, %v", made, err)
	}
	u := s.Users()
	if len(u) != 1 || !u[0].Superadmin || u[0].FullName != "Super Administrator" {
		t.Fatalf("users = %+v", u)
	}
	s.Close()
	s, err = Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if made, err := s.Bootstrap(context.Background(), "admin", "other-password"); err != nil || made {
		t.Fatalf("second Bootstrap = %v, %v", made, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "password differs") {
		t.Errorf("no warning for the changed password: %s", logs.String())
	}
	if _, err := s.Authenticate(context.Background(), "admin", "first-password"); err != nil {
		t.Errorf("the database's password was replaced: %v", err)
	}
	// Flags /v3 could not have started from do not matter once there are users.
	if made, err := s.Bootstrap(context.Background(), "admin", "short"); err != nil || made {
		t.Errorf("Bootstrap with a short password over an existing database = %v, %v", made, err)
	}
	if err := s.DeleteUser(context.Background(), u[0].ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("DeleteUser(super admin) = %v, want ErrForbidden", err)
	}
}

// TestChangeFailureLeavesNothing fails a change inside its transaction,
// after its SQL ran: neither the database nor what the service serves
// keeps any of it.
func TestChangeFailureLeavesNothing(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	u := mustUser(t, s, "alice")
	boom := errors.New("boom")
	s.hook = func(step string) error { return boom }
	name, pw := "bob-the-user", "bob-password"
	if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Username: &name, Password: &pw}); !errors.Is(err, boom) {
		t.Fatalf("UpdateUser = %v, want boom", err)
	}
	s.hook = nil
	if err := s.reload(ctx); err != nil { // what the database holds
		t.Fatal(err)
	}
	got, _ := s.User(u.ID)
	if got.Username != "alice" || got.TokenVersion != u.TokenVersion {
		t.Errorf("after the failed change: %+v", got)
	}
	if _, err := s.Authenticate(ctx, "alice", "password-alice"); err != nil {
		t.Errorf("the old password stopped working: %v", err)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	for _, cost := range []int{bcrypt.MinCost, bcrypt.DefaultCost, 12} {
		b.Run(fmt.Sprintf("uncached/cost%d", cost), func(b *testing.B) {
			s, _ := newService(b)
			s.cfg.BcryptCost = cost
			s.CreateUser(context.Background(), UserCreate{Username: "alice", Password: "password-alice"})
			b.ResetTimer()
			for b.Loop() {
				s.cache.dropUser(s.Users()[0].ID)
				if _, err := s.Authenticate(context.Background(), "alice", "password-alice"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("cached", func(b *testing.B) {
		s, _ := newService(b)
		mustUser(b, s, "alice")
		s.Authenticate(context.Background(), "alice", "password-alice")
		for b.Loop() {
			if _, err := s.Authenticate(context.Background(), "alice", "password-alice"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("token", func(b *testing.B) {
		s, _ := newService(b)
		mustUser(b, s, "alice")
		tok, _ := s.Login(context.Background(), "alice", "password-alice")
		for b.Loop() {
			if _, err := s.AuthenticateToken(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAllowed asks for a node start deep in a project, with 100
// users of 10 groups and 1,000 ACEs, so the walk goes up to "/".
func BenchmarkAllowed(b *testing.B) {
	s, _ := newService(b)
	ctx := context.Background()
	role := roleNamed(b, s, "User").ID
	var groups []Group
	for i := range 10 {
		g, err := s.CreateGroup(ctx, fmt.Sprintf("group%d", i))
		if err != nil {
			b.Fatal(err)
		}
		groups = append(groups, g)
	}
	var last User
	for i := range 100 {
		last = mustUser(b, s, fmt.Sprintf("user%d", i))
		s.AddMember(ctx, groups[i%10].ID, last.ID)
	}
	for i := range 1000 {
		sp := ACESpec{Type: ACEGroup, GroupID: groups[i%10].ID, RoleID: role, Allowed: true,
			Path: fmt.Sprintf("/projects/0f6bc2b1-7a0c-4b7e-9e8f-%012d", i)}
		if i == 999 {
			sp.Path = "/"
			sp.Propagate = true
		}
		if _, err := s.CreateACE(ctx, sp); err != nil {
			b.Fatal(err)
		}
	}
	path := "/v3/projects/0F6BC2B1-7A0C-4B7E-9E8F-1234567890AB/nodes/1f6bc2b1-7a0c-4b7e-9e8f-1234567890ab/start"
	if !s.Allowed(last.ID, "Node.PowerMgmt", path) {
		b.Fatal("not allowed")
	}
	for b.Loop() {
		s.Allowed(last.ID, "Node.PowerMgmt", path)
	}
}
