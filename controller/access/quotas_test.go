package access

import (
	"context"
	"errors"
	"slices"
	"testing"
)

const (
	projA = "0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a01"
	projB = "0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a02"
	projC = "0a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a03"
)

func scopes(qs []QuotaScope) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.Scope)
	}
	return out
}

// Whose quotas a change in a project keeps: its owner's, its owner's
// groups' (not for an administrator), its pools'; each over its projects.
func TestQuotasFor(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	class, err := s.CreateGroup(ctx, "class-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []User{alice, bob} {
		if err := s.AddMember(ctx, class.ID, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := s.CreatePool(ctx, "lab pool")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetOwner(ctx, projA, alice.ID))
	must(s.SetOwner(ctx, projB, bob.ID))
	must(s.AddPoolResource(ctx, pool.ID, projA, "lab"))
	must(s.AddPoolResource(ctx, pool.ID, projC, "other"))
	if qs := s.QuotasFor(projA); len(qs) != 0 {
		t.Fatalf("no quota set, yet %v", scopes(qs))
	}
	three := Unlimited()
	three.Nodes = 3
	must(s.SetQuota(ctx, QuotaUser, alice.ID, three))
	must(s.SetQuota(ctx, QuotaGroup, class.ID, three))
	must(s.SetQuota(ctx, QuotaPool, pool.ID, three))
	qs := s.QuotasFor(projA)
	if got := scopes(qs); !slices.Equal(got, []string{"user alice", "group class-a", "pool lab pool"}) {
		t.Fatalf("scopes %v", got)
	}
	want := [][]string{{projA}, {projA, projB}, {projA, projC}}
	for i, q := range qs {
		if !slices.Equal(q.Projects, want[i]) || q.Max != three {
			t.Errorf("%s: projects %v max %+v, want %v", q.Scope, q.Projects, q.Max, want[i])
		}
	}
	// An administrator is limited only by its own quota.
	admins, err := s.CreateGroup(ctx, "admins")
	must(err)
	must(s.AddMember(ctx, admins.ID, bob.ID))
	_, err = s.CreateACE(ctx, ACESpec{Type: ACEGroup, Path: "/", GroupID: admins.ID, RoleID: roleNamed(t, s, "Administrator").ID, Propagate: true, Allowed: true})
	must(err)
	if got := scopes(s.QuotasFor(projB)); len(got) != 0 {
		t.Fatalf("an administrator's project keeps %v", got)
	}
	if got := s.QuotasFor(projA)[1]; got.Scope != "group class-a" || !slices.Equal(got.Projects, []string{projA}) {
		t.Fatalf("the group's quota counts %v: an administrator's projects are not its groups'", got.Projects)
	}
	must(s.SetQuota(ctx, QuotaUser, bob.ID, three))
	if got := scopes(s.QuotasFor(projB)); !slices.Equal(got, []string{"user bob"}) {
		t.Fatalf("an administrator with a quota of its own keeps %v", got)
	}
	// Unlimited removes a quota; a deleted subject takes its quota along.
	must(s.SetQuota(ctx, QuotaUser, alice.ID, Unlimited()))
	must(s.DeletePool(ctx, pool.ID))
	if got := scopes(s.QuotasFor(projA)); !slices.Equal(got, []string{"group class-a"}) {
		t.Fatalf("scopes %v", got)
	}
	// Bounds, unknown subjects: refused, nothing changed.
	bad := Unlimited()
	bad.RAMMB = -5
	if err := s.SetQuota(ctx, QuotaGroup, class.ID, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative RAM: %v", err)
	}
	if err := s.SetQuota(ctx, QuotaUser, projC, three); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	if l, _ := s.Quota(QuotaGroup, class.ID); l != three {
		t.Fatalf("group quota %+v after refusals", l)
	}
	// A project with no recorded maker is the first user's given the User
	// role on it alone (a class's copy: its member's, not its teacher's).
	for _, u := range []User{bob, alice} {
		_, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: "/projects/" + projC, UserID: u.ID, RoleID: roleNamed(t, s, "User").ID, Propagate: true, Allowed: true})
		must(err)
	}
	if s.Owner(projC) != bob.ID || !slices.Contains(s.QuotaProjects(QuotaUser, bob.ID), projC) {
		t.Fatalf("projC is %q's, want bob's", s.Owner(projC))
	}
	// Forgetting a project drops its owner.
	must(s.ForgetProject(ctx, projA))
	if s.Owner(projA) != "" || len(s.QuotasFor(projA)) != 0 {
		t.Fatal("a forgotten project keeps its owner")
	}
}

// An ACE on a pool gives its role on the pool's projects, and on nothing
// else; taking a project out of one pool leaves it in the others.
func TestPoolACEs(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	alice := mustUser(t, s, "alice")
	p1, _ := s.CreatePool(ctx, "p1")
	p2, _ := s.CreatePool(ctx, "p2")
	if _, err := s.CreatePool(ctx, "p1"); !errors.Is(err, ErrExists) || err.Error() != "Resource pool 'p1' already exists" {
		t.Fatalf("duplicate name: %v", err)
	}
	for _, p := range []Pool{p1, p2} {
		if err := s.AddPoolResource(ctx, p.ID, projA, "lab"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddPoolResource(ctx, p1.ID, projA, "lab"); !errors.Is(err, ErrExists) || err.Error() != "Resource '"+projA+"' is already in 'p1'" {
		t.Fatalf("added twice: %v", err)
	}
	if _, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: "/pools/" + p1.ID, UserID: alice.ID, RoleID: roleNamed(t, s, "User").ID, Propagate: true, Allowed: true}); err != nil {
		t.Fatal(err)
	}
	if !s.Allowed(alice.ID, "Node.Allocate", "/v2/projects/"+projA+"/nodes") || s.Allowed(alice.ID, "Project.Audit", "/projects/"+projB) {
		t.Fatal("a pool ACE does not give its role on the pool's projects only")
	}
	if err := s.RemovePoolResource(ctx, p2.ID, projA); err != nil {
		t.Fatal(err)
	}
	if got := s.PoolResources(p1.ID); len(got) != 1 || got[0].ID != projA || got[0].Name != "lab" || got[0].Type != "project" {
		t.Fatalf("p1 holds %+v after projA left p2", got)
	}
	if err := s.RemovePoolResource(ctx, p1.ID, projA); err != nil {
		t.Fatal(err)
	}
	if s.Allowed(alice.ID, "Project.Audit", "/projects/"+projA) {
		t.Fatal("a project out of the pool is still allowed through it")
	}
	if err := s.RemovePoolResource(ctx, p1.ID, projA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
}
