package access

import (
	"context"
	"database/sql"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// MaxPathLen bounds an ACE's path.
const MaxPathLen = 512

// Resource paths. A path names a resource by collections and ids:
// /projects, /projects/{id}, /projects/{id}/nodes/{id}... Whatever
// follows the resource (/open, /start, /files/a.cfg) is an action on it.
// The first segment is a collection (or "access", whose next segment is);
// below it, only the collections listed here have ids of their own.

// idCollections are the collections whose ids are UUIDs; the others
// (computes, images, symbols, appliances, ...) take any segment as id.
var idCollections = map[string]bool{
	"projects": true, "nodes": true, "links": true, "drawings": true, "snapshots": true,
	"templates": true, "pools": true, "users": true, "groups": true, "roles": true, "acl": true,
	"resources": true, "privileges": true,
}

// subCollections are the collections inside a resource of a collection.
var subCollections = map[string][]string{
	"projects": {"nodes", "links", "drawings", "snapshots"},
	"pools":    {"resources"},
}

// rootCollections are the first segments an ACE path may have.
var rootCollections = map[string]bool{
	"projects": true, "templates": true, "computes": true, "images": true, "symbols": true,
	"appliances": true, "pools": true, "access": true, "notifications": true, "statistics": true,
	"iou_license": true, "gns3vm": true,
}

// accessCollections are the collections under /access.
var accessCollections = map[string]bool{"users": true, "groups": true, "roles": true, "acl": true, "privileges": true}

var segmentPattern = regexp.MustCompile(`^[A-Za-z0-9._~@+-]{1,255}$`)

// CanonicalPath is the path an ACL check sees for a request path: the
// API version prefix (/v2, /v3) dropped, cleaned of "." and ".." and
// repeated or trailing slashes, and every UUID segment spelled lowercase
// with hyphens, so that /projects/{ID} in any spelling GNS3's router
// accepts is the same resource as in an ACE.
func CanonicalPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = path.Clean(p)
	if len(p) >= 3 && p[1] == 'v' && p[2] >= '0' && p[2] <= '9' && (len(p) == 3 || p[3] == '/') {
		p = p[3:]
		if p == "" {
			p = "/"
		}
	}
	if !strings.ContainsAny(p, "-{}:") && len(p) < 32 {
		return p // no UUID can be in it
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if len(s) >= 32 {
			if id, err := uuid.Parse(s); err == nil {
				segs[i] = id.String()
			}
		}
	}
	return strings.Join(segs, "/")
}

// resourceOf is the resource a canonical path acts on: the path up to
// its last collection or id, without the action that follows.
func resourceOf(p string) string {
	r, _ := splitResource(p)
	return r
}

// splitResource splits a canonical path into its resource and, when an
// action follows, whether the action stands where an id of a collection
// with UUID ids was expected (/projects/load, /projects/{id}/nodes/start).
func splitResource(p string) (res string, actionAtID bool) {
	if p == "/" {
		return p, false
	}
	segs := strings.Split(p[1:], "/")
	join := func(n int) string { return "/" + strings.Join(segs[:n], "/") }
	wantID := false // the next segment is the id of collection coll
	coll := ""
	for i, s := range segs {
		switch {
		case i == 0:
			coll, wantID = s, s != "access"
		case i == 1 && segs[0] == "access":
			if !accessCollections[s] {
				return join(i), false
			}
			coll, wantID = s, true
		case wantID:
			if idCollections[coll] && uuid.Validate(s) != nil {
				return join(i), true
			}
			wantID = false
		default:
			if !slices.Contains(subCollections[coll], s) {
				return join(i), false
			}
			coll, wantID = s, true
		}
	}
	return p, false
}

// checkACEPath canonicalises an ACE's path and checks it names something:
// "/" or a known root collection, segments of plain characters, and a
// UUID wherever an id of a collection with UUID ids stands.
func checkACEPath(p string) (string, error) {
	bad := errorf(ErrBadPath, "Path '%s' doesn't match any existing endpoint", truncate(p, MaxPathLen))
	if len(p) > MaxPathLen || !strings.HasPrefix(p, "/") {
		return "", bad
	}
	if p == "/" {
		return p, nil
	}
	if strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return "", bad
	}
	segs := strings.Split(p[1:], "/")
	for _, s := range segs {
		if !segmentPattern.MatchString(s) || s == "." || s == ".." {
			return "", bad
		}
	}
	if !rootCollections[segs[0]] {
		return "", bad
	}
	if segs[0] == "access" && len(segs) > 1 && !accessCollections[segs[1]] {
		return "", bad
	}
	c := CanonicalPath(p)
	// Where an id of a collection with UUID ids stands, a UUID must (or
	// an action on the whole collection).
	if r, atID := splitResource(c); atID && !isCollectionAction(strings.Split(strings.TrimPrefix(c, r+"/"), "/")[0]) {
		return "", bad
	}
	return c, nil
}

// isCollectionAction reports whether s is an action on a whole
// collection, such as /projects/load or /projects/{id}/nodes/start.
func isCollectionAction(s string) bool {
	switch s {
	case "load", "import", "start", "stop", "suspend", "reload", "console", "endpoints", "me", "login", "logout", "authenticate":
		return true
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ACESpec is what an ACE is made of (create and update alike).
type ACESpec struct {
	Type, Path, RoleID, UserID, GroupID string
	Propagate, Allowed                  bool
}

// check validates the spec against st and returns it with its path
// canonical.
func (sp ACESpec) check(st *state) (ACESpec, error) {
	p, err := checkACEPath(sp.Path)
	if err != nil {
		return sp, err
	}
	sp.Path = p
	switch sp.Type {
	case ACEUser:
		if sp.UserID == "" || sp.GroupID != "" {
			return sp, errorf(ErrInvalid, "an ACE of type 'user' needs user_id and no group_id")
		}
		if _, ok := st.users[sp.UserID]; !ok {
			return sp, errorf(ErrNotFound, "User '%s' not found", sp.UserID)
		}
	case ACEGroup:
		if sp.GroupID == "" || sp.UserID != "" {
			return sp, errorf(ErrInvalid, "an ACE of type 'group' needs group_id and no user_id")
		}
		if _, ok := st.groups[sp.GroupID]; !ok {
			return sp, errorf(ErrNotFound, "User group '%s' not found", sp.GroupID)
		}
	default:
		return sp, errorf(ErrInvalid, "ace_type must be 'user' or 'group'")
	}
	if _, ok := st.roles[sp.RoleID]; !ok {
		return sp, errorf(ErrNotFound, "Role '%s' not found", sp.RoleID)
	}
	return sp, nil
}

// ACEs lists the ACL, oldest first.
func (s *Service) ACEs() []ACE {
	st := s.state.Load()
	out := make([]ACE, 0, len(st.aces))
	for _, a := range st.aces {
		out = append(out, *a)
	}
	return out
}

// ACE returns the ACE id.
func (s *Service) ACE(id string) (ACE, error) {
	a, ok := s.state.Load().aceByID[id]
	if !ok {
		return ACE{}, errorf(ErrNotFound, "ACL entry '%s' not found", id)
	}
	return *a, nil
}

// CreateACE adds an entry to the ACL.
func (s *Service) CreateACE(ctx context.Context, sp ACESpec) (ACE, error) {
	id := uuid.NewString()
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		sp, err := sp.check(st)
		if err != nil {
			return err
		}
		now := s.stamp()
		_, err = tx.ExecContext(ctx, `INSERT INTO acl (ace_id, ace_type, path, propagate, allowed, user_id, group_id, role_id, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, sp.Type, sp.Path, sp.Propagate, sp.Allowed,
			nullable(sp.UserID), nullable(sp.GroupID), sp.RoleID, now, now)
		return err
	})
	if err != nil {
		return ACE{}, err
	}
	return s.ACE(id)
}

// UpdateACE replaces an entry of the ACL, checked as a new one is.
func (s *Service) UpdateACE(ctx context.Context, id string, sp ACESpec) (ACE, error) {
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.aceByID[id]; !ok {
			return errorf(ErrNotFound, "ACL entry '%s' not found", id)
		}
		sp, err := sp.check(st)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE acl SET ace_type = ?, path = ?, propagate = ?, allowed = ?, user_id = ?, group_id = ?,
			role_id = ?, updated_at = ? WHERE ace_id = ?`, sp.Type, sp.Path, sp.Propagate, sp.Allowed,
			nullable(sp.UserID), nullable(sp.GroupID), sp.RoleID, s.stamp(), id)
		return err
	})
	if err != nil {
		return ACE{}, err
	}
	return s.ACE(id)
}

// DeleteACE removes an entry of the ACL.
func (s *Service) DeleteACE(ctx context.Context, id string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.aceByID[id]; !ok {
			return errorf(ErrNotFound, "ACL entry '%s' not found", id)
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM acl WHERE ace_id = ?", id)
		return err
	})
}

// Allowed reports whether user userID holds privilege on the resource
// path p (a request path; the version prefix may stay). The super admin
// holds every privilege; an inactive or unknown user none.
//
// The ACL is walked as GNS3 3.x walks it, with its weak points fixed:
// only the ACEs whose role contains privilege count, plus denies whose
// role has no privilege at all (No Access), which deny everything. The
// user's own ACEs are looked at first, then those of its groups; within
// each, from p's deepest prefix up to "/", the first prefix with an ACE
// that applies decides, a deny winning over an allow at the same prefix.
// An ACE applies to its own path's resource, the actions on it, and,
// when it propagates, everything below; without propagate, a deny is as
// confined as an allow. No decision is a denial.
func (s *Service) Allowed(userID, privilege, p string) bool {
	st := s.state.Load()
	if len(userID)+len(privilege)+len(p) > maxDecisionKey {
		return st.allowed(userID, privilege, p)
	}
	// Decisions are remembered with the state they were made on: a
	// change publishes a new state, and so forgets them all.
	k := userID + "\x00" + privilege + "\x00" + p
	if d, ok := st.decisions.Load(k); ok {
		return d.(bool)
	}
	d := st.allowed(userID, privilege, p)
	if st.decided.Add(1) > maxDecisions {
		// Full (paths nobody asks twice, perhaps): start afresh.
		st.decisions.Clear()
		st.decided.Store(1)
	}
	st.decisions.Store(k, d)
	return d
}

// maxDecisions bounds the decisions a state remembers, and maxDecisionKey
// the size of one: at most about 1 MiB.
const (
	maxDecisions   = 4096
	maxDecisionKey = 256
)

func (st *state) allowed(userID, privilege, p string) bool {
	u, ok := st.users[userID]
	if !ok {
		return false
	}
	if u.Superadmin {
		return true
	}
	if !u.Active {
		return false
	}
	p = CanonicalPath(p)
	res := resourceOf(p)
	if d := st.walk(st.userACEs[userID], nil, privilege, p, res); d != 0 {
		return d > 0
	}
	var groups []map[string][]*ACE
	for _, g := range st.userGroups[userID] {
		if m := st.groupACEs[g]; m != nil {
			groups = append(groups, m)
		}
	}
	return st.walk(nil, groups, privilege, p, res) > 0
}

// walk looks for a decision in one tier (one subject's ACEs, or several
// groups'): 1 granted, -1 denied, 0 none.
func (st *state) walk(one map[string][]*ACE, many []map[string][]*ACE, privilege, p, res string) int {
	if one == nil && len(many) == 0 {
		return 0
	}
	for prefix := p; ; {
		allow, deny := false, false
		check := func(aces []*ACE) {
			for _, a := range aces {
				if !a.Propagate && prefix != p && prefix != res {
					continue
				}
				privs := st.rolePrivs[a.RoleID]
				switch {
				case privs[privilege]:
				case !a.Allowed && len(privs) == 0: // a deny with No Access denies all
				default:
					continue
				}
				if a.Allowed {
					allow = true
				} else {
					deny = true
				}
			}
		}
		check(one[prefix])
		for _, m := range many {
			check(m[prefix])
		}
		// A pool's ACEs stand at the path of each of its projects.
		for _, pool := range st.poolsOf(prefix) {
			check(one["/pools/"+pool])
			for _, m := range many {
				check(m["/pools/"+pool])
			}
		}
		switch {
		case deny:
			return -1
		case allow:
			return 1
		}
		if prefix == "/" {
			return 0
		}
		prefix = path.Dir(prefix)
	}
}

// Granting. Holding User, Group, Role or ACE privileges must not be a way
// to more: in GNS3 3.x, Group.Modify lets its holder join a group with
// Administrator on "/", Role.Modify widen a role it has, ACE.Allocate give
// itself any role anywhere. Here a user may grant only what it holds.

// holdsRole reports whether userID holds every privilege of role on p.
func (st *state) holdsRole(userID, roleID, p string) bool {
	for name := range st.rolePrivs[roleID] {
		if !st.allowed(userID, name, p) {
			return false
		}
	}
	return true
}

// MayGrantACE reports whether userID may create (or turn an ACE into)
// sp: a deny takes nothing from userID to give, an allow needs every
// privilege of its role on its path.
func (s *Service) MayGrantACE(userID string, sp ACESpec) bool {
	if !sp.Allowed {
		return true
	}
	return s.state.Load().holdsRole(userID, sp.RoleID, CanonicalPath(sp.Path))
}

// MayGrantMembership reports whether userID may put a user in group
// groupID: it must hold what each of the group's allowing ACEs gives.
func (s *Service) MayGrantMembership(userID, groupID string) bool {
	st := s.state.Load()
	for p, aces := range st.groupACEs[groupID] {
		for _, a := range aces {
			if a.Allowed && !st.holdsRole(userID, a.RoleID, p) {
				return false
			}
		}
	}
	return true
}

// MayGrantPrivilege reports whether userID may add privilege privID to
// role roleID: it must hold it wherever an ACE allows the role.
func (s *Service) MayGrantPrivilege(userID, roleID, privID string) bool {
	st := s.state.Load()
	p, ok := st.privByID[privID]
	if !ok {
		return true // the change fails on its own, as not found
	}
	for _, a := range st.aces {
		if a.RoleID == roleID && a.Allowed && !st.allowed(userID, p.Name, a.Path) {
			return false
		}
	}
	return true
}

// MayLiftACE reports whether userID may change or delete ACE aceID: a
// deny that applies to userID (its own or one of its groups') is the
// super admin's to lift, not the denied user's.
func (s *Service) MayLiftACE(userID, aceID string) bool {
	st := s.state.Load()
	a, ok := st.aceByID[aceID]
	if !ok || a.Allowed || st.users[userID] != nil && st.users[userID].Superadmin {
		return true // an unknown ACE fails on its own, as not found
	}
	return a.UserID != userID && (a.GroupID == "" || !slices.Contains(st.userGroups[userID], a.GroupID))
}

// MayLeaveGroup reports whether userID may take user memberID out of
// group groupID: a user does not leave a group that denies it something.
func (s *Service) MayLeaveGroup(userID, groupID, memberID string) bool {
	st := s.state.Load()
	if userID != memberID || st.users[userID] != nil && st.users[userID].Superadmin {
		return true
	}
	for _, aces := range st.groupACEs[groupID] {
		for _, a := range aces {
			if !a.Allowed {
				return false
			}
		}
	}
	return true
}

// poolsOf lists the pools of the project whose path is p
// (/projects/{id}), none for any other path.
func (st *state) poolsOf(p string) []string {
	id, ok := strings.CutPrefix(p, "/projects/")
	if !ok || strings.Contains(id, "/") {
		return nil
	}
	return st.pools.projectPools[id]
}
