package access

import (
	"context"
	"database/sql"
	"strings"
)

// Names of the built-in roles the API gives and checks by itself.
const (
	RoleAdministrator = "Administrator"
	RoleUser          = "User"
)

// roleID is the id of the role named name, or "".
func (st *state) roleID(name string) string {
	for _, r := range st.roleOrder {
		if r.Name == name {
			return r.ID
		}
	}
	return ""
}

// Administrator reports whether userID is the super admin, or an active
// user holding every privilege of the built-in Administrator role on "/"
// (an Administrator ACE on "/" that propagates, or the like): what the
// controller's own surfaces (/metrics, profiles, shutdown) ask.
func (s *Service) Administrator(userID string) bool {
	st := s.state.Load()
	u, ok := st.users[userID]
	if !ok {
		return false
	}
	if u.Superadmin {
		return true
	}
	id := st.roleID(RoleAdministrator)
	return id != "" && u.Active && len(st.rolePrivs[id]) > 0 && st.holdsRole(userID, id, "/")
}

// GrantOwner gives userID the built-in User role on the resource path p
// (a project it made: /projects/{id}), propagating to what is below, so
// that it may use it whatever else the ACL says.
func (s *Service) GrantOwner(ctx context.Context, userID, p string) error {
	id := s.state.Load().roleID(RoleUser)
	if id == "" {
		return errorf(ErrNotFound, "Role '%s' not found", RoleUser)
	}
	_, err := s.CreateACE(ctx, ACESpec{Type: ACEUser, Path: p, RoleID: id, UserID: userID, Propagate: true, Allowed: true})
	return err
}

// DeleteACEsUnder deletes, in one transaction, every ACE on the resource
// path p or below it (those of a deleted project), and reports how many.
func (s *Service) DeleteACEsUnder(ctx context.Context, p string) (int, error) {
	p = CanonicalPath(p)
	n := 0
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		n = 0
		for _, a := range st.aces {
			if a.Path != p && !strings.HasPrefix(a.Path, p+"/") {
				continue
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM acl WHERE ace_id = ?", a.ID); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
