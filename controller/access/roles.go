package access

import (
	"context"
	"database/sql"
	"slices"

	"github.com/google/uuid"
)

func checkRoleName(name string) error {
	if name == "" {
		return errorf(ErrInvalid, "role name must not be empty")
	}
	return checkText("name", name, MaxNameLen)
}

// Privileges lists the privileges, in the catalogue's order.
func (s *Service) Privileges() []Privilege {
	return slices.Clone(s.state.Load().privileges)
}

func copyRole(r *Role) Role {
	c := *r
	c.Privileges = slices.Clone(r.Privileges)
	return c
}

// Roles lists every role, built-in ones first.
func (s *Service) Roles() []Role {
	st := s.state.Load()
	out := make([]Role, 0, len(st.roleOrder))
	for _, r := range st.roleOrder {
		out = append(out, copyRole(r))
	}
	return out
}

// Role returns the role id.
func (s *Service) Role(id string) (Role, error) {
	r, ok := s.state.Load().roles[id]
	if !ok {
		return Role{}, errorf(ErrNotFound, "Role '%s' not found", id)
	}
	return copyRole(r), nil
}

func (st *state) roleNamed(name, except string) error {
	for _, r := range st.roles {
		if r.Name == name && r.ID != except {
			return errorf(ErrExists, "Role '%s' already exists", name)
		}
	}
	return nil
}

// CreateRole adds a role with no privilege.
func (s *Service) CreateRole(ctx context.Context, name, description string) (Role, error) {
	if err := checkRoleName(name); err != nil {
		return Role{}, err
	}
	if err := checkText("description", description, MaxDescriptionLen); err != nil {
		return Role{}, err
	}
	id := uuid.NewString()
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.roleNamed(name, ""); err != nil {
			return err
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, `INSERT INTO roles (role_id, name, description, is_builtin, created_at, updated_at)
			VALUES (?, ?, ?, 0, ?, ?)`, id, name, nullable(description), now, now)
		return err
	})
	if err != nil {
		return Role{}, err
	}
	return s.Role(id)
}

// UpdateRole renames or re-describes a role (the fields not nil); built-in
// roles cannot change.
func (s *Service) UpdateRole(ctx context.Context, id string, name, description *string) (Role, error) {
	if name != nil {
		if err := checkRoleName(*name); err != nil {
			return Role{}, err
		}
	}
	if description != nil {
		if err := checkText("description", *description, MaxDescriptionLen); err != nil {
			return Role{}, err
		}
	}
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		r, ok := st.roles[id]
		if !ok {
			return errorf(ErrNotFound, "Role '%s' not found", id)
		}
		if r.Builtin {
			return errorf(ErrForbidden, "Built-in role '%s' cannot be updated", id)
		}
		next := *r
		if name != nil {
			if err := st.roleNamed(*name, id); err != nil {
				return err
			}
			next.Name = *name
		}
		if description != nil {
			next.Description = *description
		}
		_, err := tx.ExecContext(ctx, "UPDATE roles SET name = ?, description = ?, updated_at = ? WHERE role_id = ?",
			next.Name, nullable(next.Description), s.stamp(), id)
		return err
	})
	if err != nil {
		return Role{}, err
	}
	return s.Role(id)
}

// DeleteRole removes a role and every ACE that gives it; built-in roles
// cannot be removed.
func (s *Service) DeleteRole(ctx context.Context, id string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		r, ok := st.roles[id]
		if !ok {
			return errorf(ErrNotFound, "Role '%s' not found", id)
		}
		if r.Builtin {
			return errorf(ErrForbidden, "Built-in role '%s' cannot be deleted", id)
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM roles WHERE role_id = ?", id)
		return err
	})
}

// RolePrivileges lists a role's privileges; an unknown role has none.
func (s *Service) RolePrivileges(id string) []Privilege {
	if r, ok := s.state.Load().roles[id]; ok {
		return slices.Clone(r.Privileges)
	}
	return []Privilege{}
}

// rolePrivilege checks a role privilege change: the privilege, then the
// role, exist, and the role is not built-in (their privileges are fixed
// here, unlike GNS3's, so that no one can widen Auditor or User).
func (st *state) rolePrivilege(roleID, privID string) error {
	if _, ok := st.privByID[privID]; !ok {
		return errorf(ErrNotFound, "Privilege '%s' not found", privID)
	}
	r, ok := st.roles[roleID]
	if !ok {
		return errorf(ErrNotFound, "Role '%s' not found", roleID)
	}
	if r.Builtin {
		return errorf(ErrForbidden, "Built-in role '%s' cannot be updated", roleID)
	}
	return nil
}

// AddRolePrivilege adds a privilege to a role; adding one it has changes
// nothing.
func (s *Service) AddRolePrivilege(ctx context.Context, roleID, privID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.rolePrivilege(roleID, privID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO role_privileges (role_id, privilege_id) VALUES (?, ?)", roleID, privID)
		return err
	})
}

// RemoveRolePrivilege takes a privilege out of a role.
func (s *Service) RemoveRolePrivilege(ctx context.Context, roleID, privID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.rolePrivilege(roleID, privID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM role_privileges WHERE role_id = ? AND privilege_id = ?", roleID, privID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errorf(ErrNotFound, "Privilege '%s' is not in role '%s'", privID, roleID)
		}
		return nil
	})
}
