package access

import (
	"context"
	"fmt"
	"testing"
)

// A project's owner holds it and what is below it, and nothing beside
// it; DeleteACEsUnder takes every ACE on it and below, and no other; and
// Allowed's remembered decisions go with the state they were made on.
func TestOwnersAndTheirACEs(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	alice := mustUser(t, s, "alice")
	const (
		p1 = "/projects/0f6bc2b1-7a0c-4b7e-9e8f-000000000001"
		p2 = "/projects/0f6bc2b1-7a0c-4b7e-9e8f-000000000002"
	)
	if s.Allowed(alice.ID, "Node.PowerMgmt", p1+"/nodes/1f6bc2b1-7a0c-4b7e-9e8f-000000000001/start") {
		t.Fatal("allowed before owning")
	}
	if err := s.GrantOwner(ctx, alice.ID, p1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		priv, path string
		want       bool
	}{
		{"Node.PowerMgmt", "/v2" + p1 + "/nodes/1f6bc2b1-7a0c-4b7e-9e8f-000000000001/start", true},
		{"Project.Audit", p1, true},
		{"Project.Audit", p2, false},
		{"Template.Allocate", p1, false}, // not in User
	} {
		if got := s.Allowed(alice.ID, c.priv, c.path); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.priv, c.path, got, c.want)
		}
	}
	role := roleNamed(t, s, "Auditor").ID
	for _, p := range []string{p1 + "/nodes", p2} {
		if _, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: p, RoleID: role, UserID: alice.ID, Allowed: true}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DeleteACEsUnder(ctx, "/v2"+p1)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2", n, err)
	}
	if len(s.ACEs()) != 1 || s.ACEs()[0].Path != p2 {
		t.Fatalf("left: %+v", s.ACEs())
	}
	if s.Allowed(alice.ID, "Project.Audit", p1) {
		t.Error("a decision outlived the ACE it was made on")
	}
}

// Administrator: the super admin, or who holds the Administrator role on
// "/"; not an administrator of one project, nor an inactive user.
func TestAdministrator(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	if _, err := s.Bootstrap(ctx, "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	root := s.Users()[0]
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bobby")
	admin := roleNamed(t, s, "Administrator").ID
	s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: "/", RoleID: admin, UserID: alice.ID, Propagate: true, Allowed: true})
	s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: "/projects/0f6bc2b1-7a0c-4b7e-9e8f-000000000001", RoleID: admin, UserID: bob.ID, Propagate: true, Allowed: true})
	if !s.Administrator(root.ID) || !s.Administrator(alice.ID) || s.Administrator(bob.ID) || s.Administrator("nobody") {
		t.Fatalf("root %v alice %v bob %v", s.Administrator(root.ID), s.Administrator(alice.ID), s.Administrator(bob.ID))
	}
	off := false
	if _, err := s.UpdateUser(ctx, alice.ID, UserUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	if s.Administrator(alice.ID) {
		t.Error("an inactive user is an administrator")
	}
}

// Remembered decisions stay bounded whatever paths are asked, and right.
func TestRememberedDecisionsAreBounded(t *testing.T) {
	s, _ := newService(t)
	alice := mustUser(t, s, "alice")
	const p1 = "/projects/0f6bc2b1-7a0c-4b7e-9e8f-000000000001"
	if err := s.GrantOwner(context.Background(), alice.ID, p1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxDecisions {
		node := fmt.Sprintf("/nodes/1f6bc2b1-7a0c-4b7e-9e8f-%012d", i)
		if !s.Allowed(alice.ID, "Node.Audit", p1+node) || s.Allowed(alice.ID, "Node.Audit", "/projects/0f6bc2b1-7a0c-4b7e-9e8f-000000000002"+node) {
			t.Fatalf("wrong decision at %d", i)
		}
	}
	n := 0
	s.state.Load().decisions.Range(func(any, any) bool { n++; return true })
	if n > maxDecisions {
		t.Errorf("%d decisions remembered, bound %d", n, maxDecisions)
	}
}
