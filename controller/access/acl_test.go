package access

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalPath(t *testing.T) {
	const id = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	tests := []struct{ in, want string }{
		{"/v3/projects/" + id + "/open", "/projects/" + id + "/open"},
		{"/v2/projects", "/projects"},
		{"/v3", "/"},
		{"/", "/"},
		{"/projects/", "/projects"},
		{"/projects/0F6BC2B1-7A0C-4B7E-9E8F-1234567890AB", "/projects/" + id},
		{"/projects/0f6bc2b17a0c4b7e9e8f1234567890ab/nodes", "/projects/" + id + "/nodes"},
		{"/projects/{0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab}", "/projects/" + id},
		{"/projects/urn:uuid:0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", "/projects/" + id},
		{"/projects/x/../" + id, "/projects/" + id},
		{"/v3x/projects", "/v3x/projects"},
	}
	for _, tt := range tests {
		if got := CanonicalPath(tt.in); got != tt.want {
			t.Errorf("CanonicalPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestResourceOf(t *testing.T) {
	const p, n = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", "1f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/projects", "/projects"},
		{"/projects/load", "/projects"},
		{"/projects/" + p, "/projects/" + p},
		{"/projects/" + p + "/open", "/projects/" + p},
		{"/projects/" + p + "/files/a/b.cfg", "/projects/" + p},
		{"/projects/" + p + "/nodes", "/projects/" + p + "/nodes"},
		{"/projects/" + p + "/nodes/start", "/projects/" + p + "/nodes"},
		{"/projects/" + p + "/nodes/" + n + "/start", "/projects/" + p + "/nodes/" + n},
		{"/computes/local/docker/images", "/computes/local"},
		{"/access/users/me", "/access/users"},
		{"/access/roles/" + p + "/privileges/" + n, "/access/roles/" + p},
		{"/images/router.qcow2", "/images/router.qcow2"},
	}
	for _, tt := range tests {
		if got := resourceOf(tt.in); got != tt.want {
			t.Errorf("resourceOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestACEPathValidation(t *testing.T) {
	const id = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	tests := []struct {
		path, want string // want "" = refused
	}{
		{"/", "/"},
		{"/projects", "/projects"},
		{"/projects/" + id, "/projects/" + id},
		{"/projects/0F6BC2B1-7A0C-4B7E-9E8F-1234567890AB", "/projects/" + id},
		{"/projects/" + id + "/nodes/" + id + "/start", "/projects/" + id + "/nodes/" + id + "/start"},
		{"/projects/load", "/projects/load"},
		{"/computes/local", "/computes/local"},
		{"/images/router.qcow2", "/images/router.qcow2"},
		{"/access/users/" + id, "/access/users/" + id},
		{"/pools/" + id, "/pools/" + id},
		{"/projects/", ""},
		{"/projects/invalid", ""},
		{"/nothing", ""},
		{"projects", ""},
		{"/projects//x", ""},
		{"/projects/" + id + "/../x", ""},
		{"/access/whatever", ""},
		{"/images/a b", ""},
	}
	for _, tt := range tests {
		got, err := checkACEPath(tt.path)
		if tt.want == "" {
			if !errors.Is(err, ErrBadPath) || err.Error() != "Path '"+tt.path+"' doesn't match any existing endpoint" {
				t.Errorf("checkACEPath(%q) = %q, %v; want refused", tt.path, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("checkACEPath(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}

// TestAllowedWorkedExamples runs the worked examples of GNS3 3.x's ACL
// (user U in group G; R a role holding the privilege asked), with
// labtap's answer; gns3 says where GNS3 answers otherwise, and why
// labtap does not.
func TestAllowedWorkedExamples(t *testing.T) {
	const (
		x = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
		n = "1f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	)
	type ace struct {
		group     bool
		path      string
		role      string // "" = Auditor (holds Project.Audit and Node.Audit)
		deny      bool
		propagate bool
	}
	type check struct {
		privilege, path string
		want            bool
		gns3            string // GNS3's answer when it differs, and why
	}
	tests := []struct {
		name   string
		aces   []ace
		checks []check
	}{
		{"no ACE", nil, []check{{"Project.Audit", "/v3/projects/" + x, false, ""}}},
		{"group allow on / propagates", []ace{{group: true, path: "/", propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/" + x, true, ""}}},
		{"user allow on /projects without propagate", []ace{{path: "/projects"}},
			[]check{
				{"Project.Audit", "/v3/projects", true, ""},
				{"Project.Audit", "/v3/projects/" + x, false, ""},
			}},
		{"user allow on /projects/X without propagate", []ace{{path: "/projects/" + x, role: "User"}},
			[]check{
				{"Project.Audit", "/v3/projects/" + x, true, ""},
				{"Project.Allocate", "/v3/projects/" + x + "/open", true, "403: a non-propagating allow covers the exact URL only (W14)"},
				{"Node.Audit", "/v3/projects/" + x + "/nodes", false, ""},
			}},
		{"deny on /projects without propagate", []ace{{path: "/", propagate: true}, {path: "/projects", deny: true}},
			[]check{
				{"Project.Audit", "/v3/projects/" + x, true, "403: GNS3 ignores propagate on denies"},
				{"Project.Audit", "/v3/projects", false, ""},
			}},
		{"propagating deny on /projects", []ace{{path: "/", propagate: true}, {path: "/projects", deny: true, propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/" + x, false, ""}}},
		{"deeper allow beats shallower deny", []ace{{path: "/projects", deny: true, propagate: true}, {path: "/projects/" + x, propagate: true}},
			[]check{{"Node.Audit", "/v3/projects/" + x + "/nodes", true, ""}}},
		{"user tier before group tier", []ace{{path: "/", propagate: true}, {group: true, path: "/projects/" + x, deny: true, propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/" + x, true, ""}}},
		{"No Access deny", []ace{{group: true, path: "/", role: "User", propagate: true}, {group: true, path: "/projects/" + x, role: "No Access", deny: true, propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/" + x, false, "allowed: a deny only loads its role's privileges, No Access has none (W13)"}}},
		{"deny is per privilege", []ace{{group: true, path: "/", role: "User", propagate: true}, {group: true, path: "/projects/" + x, role: "Auditor", deny: true, propagate: true}},
			[]check{
				{"Project.Audit", "/v3/projects/" + x, false, ""},
				{"Node.PowerMgmt", "/v3/projects/" + x + "/nodes/" + n + "/start", true, ""},
			}},
		{"upper-case UUID is the same project", []ace{{path: "/projects", propagate: true}, {path: "/projects/" + x, deny: true, propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/0F6BC2B1-7A0C-4B7E-9E8F-1234567890AB", false, "allowed: IDs compared as raw strings (W17)"}}},
		{"deny wins at the same path", []ace{{path: "/projects", propagate: true}, {path: "/projects", deny: true, propagate: true}},
			[]check{{"Project.Audit", "/v3/projects/" + x, false, "whichever the database returns first (W15)"}}},
		{"privilege outside the role", []ace{{path: "/", propagate: true}},
			[]check{{"Node.PowerMgmt", "/v3/projects/" + x + "/nodes/" + n + "/start", false, ""}}},
		{"non-propagating deny keeps to its resource's actions", []ace{{path: "/", propagate: true, role: "User"}, {path: "/projects/" + x, deny: true, role: "User"}},
			[]check{
				{"Project.Allocate", "/v3/projects/" + x + "/open", false, ""},
				{"Node.Audit", "/v3/projects/" + x + "/nodes", true, "403: deny ignores propagate"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newService(t)
			ctx := context.Background()
			u := mustUser(t, s, "user")
			g, err := s.CreateGroup(ctx, "group")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.AddMember(ctx, g.ID, u.ID); err != nil {
				t.Fatal(err)
			}
			for _, a := range tt.aces {
				role := a.role
				if role == "" {
					role = "Auditor"
				}
				sp := ACESpec{Type: ACEUser, UserID: u.ID, Path: a.path, RoleID: roleNamed(t, s, role).ID, Allowed: !a.deny, Propagate: a.propagate}
				if a.group {
					sp.Type, sp.UserID, sp.GroupID = ACEGroup, "", g.ID
				}
				if _, err := s.CreateACE(ctx, sp); err != nil {
					t.Fatalf("CreateACE(%+v): %v", sp, err)
				}
			}
			for _, c := range tt.checks {
				if got := s.Allowed(u.ID, c.privilege, c.path); got != c.want {
					t.Errorf("Allowed(%s, %s) = %v, want %v (GNS3: %s)", c.privilege, c.path, got, c.want, c.gns3)
				}
			}
		})
	}
}

func TestAllowedSuperadminAndInactive(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	if _, err := s.Bootstrap(ctx, "admin", "admin-password"); err != nil {
		t.Fatal(err)
	}
	admin := s.Users()[0]
	if !s.Allowed(admin.ID, "Project.Audit", "/v3/projects") {
		t.Error("the super admin is refused")
	}
	u := mustUser(t, s, "user")
	if _, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, UserID: u.ID, Path: "/", RoleID: roleNamed(t, s, "User").ID, Allowed: true, Propagate: true}); err != nil {
		t.Fatal(err)
	}
	if !s.Allowed(u.ID, "Project.Audit", "/v3/projects") {
		t.Fatal("user with User on / is refused Project.Audit")
	}
	off := false
	if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	if s.Allowed(u.ID, "Project.Audit", "/v3/projects") {
		t.Error("an inactive user is allowed")
	}
	if s.Allowed("nobody", "Project.Audit", "/v3/projects") {
		t.Error("an unknown user is allowed")
	}
}

func TestACEChecks(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	u := mustUser(t, s, "user")
	role := roleNamed(t, s, "User").ID
	tests := []struct {
		name string
		sp   ACESpec
		want error
	}{
		{"bad path", ACESpec{Type: ACEUser, UserID: u.ID, Path: "/nothing", RoleID: role}, ErrBadPath},
		{"user type without user", ACESpec{Type: ACEUser, GroupID: groupNamed(t, s, "Users").ID, Path: "/", RoleID: role}, ErrInvalid},
		{"bad type", ACESpec{Type: "robot", UserID: u.ID, Path: "/", RoleID: role}, ErrInvalid},
		{"unknown user", ACESpec{Type: ACEUser, UserID: "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab", Path: "/", RoleID: role}, ErrNotFound},
		{"unknown role", ACESpec{Type: ACEUser, UserID: u.ID, Path: "/", RoleID: "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"}, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CreateACE(ctx, tt.sp); !errors.Is(err, tt.want) {
				t.Errorf("CreateACE() = %v, want %v", err, tt.want)
			}
		})
	}
	if n := len(s.ACEs()); n != 0 {
		t.Errorf("refused ACEs left %d", n)
	}
	a, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, UserID: u.ID, Path: "/", RoleID: role, Allowed: true})
	if err != nil {
		t.Fatal(err)
	}
	bad := ACESpec{Type: ACEUser, UserID: u.ID, Path: "/projects/invalid", RoleID: role}
	if _, err := s.UpdateACE(ctx, a.ID, bad); !errors.Is(err, ErrBadPath) {
		t.Errorf("UpdateACE with a bad path = %v, want ErrBadPath (GNS3 checks paths on create only)", err)
	}
	// Deleting the user deletes its ACEs in the same transaction.
	if err := s.DeleteUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(s.ACEs()); n != 0 {
		t.Errorf("the deleted user's ACEs stayed: %d", n)
	}
}

// FuzzACEPath holds the path checks to their promises on any input: an
// accepted path is canonical (checking it again gives it back), and
// every function of a path returns without panicking.
func FuzzACEPath(f *testing.F) {
	for _, s := range []string{"/", "/projects", "/projects/0F6BC2B1-7A0C-4B7E-9E8F-1234567890AB/nodes/start",
		"/v3/projects/x/../y", "/computes/local/docker/images", "/access/users/me", "//", "/images/a.qcow2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := CanonicalPath(p)
		if CanonicalPath(c) != c {
			t.Errorf("CanonicalPath(%q) = %q, not canonical", p, c)
		}
		resourceOf(c)
		got, err := checkACEPath(p)
		if err != nil {
			return
		}
		if again, err := checkACEPath(got); err != nil || again != got {
			t.Errorf("checkACEPath(%q) = %q, then %q, %v", p, got, again, err)
		}
		if !strings.HasPrefix(got, "/") || len(got) > MaxPathLen {
			t.Errorf("checkACEPath(%q) = %q", p, got)
		}
	})
}

// TestSecurityUUIDSpellingDoesNotBypassADeny: GNS3 3.x compares ACE
// paths with request paths as strings, while its router takes a UUID in
// upper case, without hyphens, in braces or as a URN.
func TestSecurityUUIDSpellingDoesNotBypassADeny(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	u := mustUser(t, s, "user")
	role := roleNamed(t, s, "User").ID
	const x = "0f6bc2b1-7a0c-4b7e-9e8f-1234567890ab"
	for _, sp := range []ACESpec{
		{Type: ACEUser, UserID: u.ID, Path: "/", RoleID: role, Allowed: true, Propagate: true},
		{Type: ACEUser, UserID: u.ID, Path: "/projects/" + x, RoleID: role, Allowed: false, Propagate: true},
	} {
		if _, err := s.CreateACE(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	for _, spelling := range []string{x, strings.ToUpper(x), strings.ReplaceAll(x, "-", ""), "{" + x + "}", "urn:uuid:" + x} {
		if s.Allowed(u.ID, "Node.Audit", "/v3/projects/"+spelling+"/nodes") {
			t.Errorf("denied project reached as %s", spelling)
		}
	}
}
