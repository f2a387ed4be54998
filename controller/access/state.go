package access

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// User is a user account. Email and FullName are "" when unset.
type User struct {
	ID, Username, Email, FullName string
	Active, Superadmin            bool
	// LastLogin is zero until the first login.
	LastLogin, Created, Updated time.Time
	// TokenVersion goes up whenever the user's tokens must stop working.
	TokenVersion int
	hash         string
}

// Group is a group of users.
type Group struct {
	ID, Name         string
	Builtin          bool
	Created, Updated time.Time
}

// Privilege is one right, such as Project.Audit.
type Privilege struct {
	ID, Name, Description string
	Created, Updated      time.Time
}

// Role is a named set of privileges. Description is "" when unset.
type Role struct {
	ID, Name, Description string
	Builtin               bool
	// Privileges are in the catalogue's order; the caller may keep them.
	Privileges       []Privilege
	Created, Updated time.Time
}

// ACE types: whom an ACE is for.
const (
	ACEUser  = "user"
	ACEGroup = "group"
)

// ACE is an entry of the ACL: it gives (Allowed) or takes away the
// privileges of role RoleID, on Path, to the user UserID (Type ACEUser)
// or the members of group GroupID (Type ACEGroup). Propagate extends it
// from Path's resource to the resources below.
type ACE struct {
	ID, Type, Path          string
	Propagate, Allowed      bool
	UserID, GroupID, RoleID string
	Created, Updated        time.Time
}

// state is one published copy of the tables, never changed once
// published: readers load it without a lock.
type state struct {
	users      map[string]*User // by id
	byName     map[string]*User
	userOrder  []*User // by creation
	groups     map[string]*Group
	groupOrder []*Group
	members    map[string][]string // group id -> user ids, by username
	userGroups map[string][]string // user id -> group ids
	privileges []Privilege         // catalogue order
	privByID   map[string]Privilege
	roles      map[string]*Role
	roleOrder  []*Role
	rolePrivs  map[string]map[string]bool // role id -> privilege names
	aces       []*ACE                     // by creation
	aceByID    map[string]*ACE
	// userACEs and groupACEs index the ACL by subject, then path.
	userACEs, groupACEs map[string]map[string][]*ACE
	// decisions remembers Allowed's answers on this state (key: user,
	// privilege and path), at most maxDecisions of them (decided counts).
	decisions sync.Map
	decided   atomic.Int64
	// pools are the resource pools, projects' owners and quotas (pools.go).
	pools poolState
}

func parseTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	t, _ := time.Parse(timeFormat, s.String)
	return t
}

// reload reads every table and publishes them. Callers hold s.mu (or
// are Open).
func (s *Service) reload(ctx context.Context) error {
	st := &state{
		users: map[string]*User{}, byName: map[string]*User{}, groups: map[string]*Group{},
		members: map[string][]string{}, userGroups: map[string][]string{}, privByID: map[string]Privilege{},
		roles: map[string]*Role{}, rolePrivs: map[string]map[string]bool{}, aceByID: map[string]*ACE{},
		userACEs: map[string]map[string][]*ACE{}, groupACEs: map[string]map[string][]*ACE{},
	}
	err := eachRow(ctx, s.db, `SELECT user_id, username, email, full_name, hashed_password, is_active, is_superadmin,
		last_login, created_at, updated_at, token_version FROM users ORDER BY created_at, username`, func(r *sql.Rows) error {
		var u User
		var email, name, last, created, updated sql.NullString
		if err := r.Scan(&u.ID, &u.Username, &email, &name, &u.hash, &u.Active, &u.Superadmin, &last, &created, &updated, &u.TokenVersion); err != nil {
			return err
		}
		u.Email, u.FullName = email.String, name.String
		u.LastLogin, u.Created, u.Updated = parseTime(last), parseTime(created), parseTime(updated)
		st.users[u.ID], st.byName[u.Username] = &u, &u
		st.userOrder = append(st.userOrder, &u)
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, s.db, "SELECT user_group_id, name, is_builtin, created_at, updated_at FROM user_groups ORDER BY created_at, name", func(r *sql.Rows) error {
		var g Group
		var created, updated sql.NullString
		if err := r.Scan(&g.ID, &g.Name, &g.Builtin, &created, &updated); err != nil {
			return err
		}
		g.Created, g.Updated = parseTime(created), parseTime(updated)
		st.groups[g.ID] = &g
		st.groupOrder = append(st.groupOrder, &g)
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, s.db, `SELECT m.user_group_id, m.user_id FROM user_group_members m JOIN users u USING (user_id)
		ORDER BY u.username`, func(r *sql.Rows) error {
		var g, u string
		if err := r.Scan(&g, &u); err != nil {
			return err
		}
		st.members[g] = append(st.members[g], u)
		st.userGroups[u] = append(st.userGroups[u], g)
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, s.db, "SELECT privilege_id, name, description, created_at, updated_at FROM privileges ORDER BY seq", func(r *sql.Rows) error {
		var p Privilege
		var created, updated sql.NullString
		if err := r.Scan(&p.ID, &p.Name, &p.Description, &created, &updated); err != nil {
			return err
		}
		p.Created, p.Updated = parseTime(created), parseTime(updated)
		st.privileges = append(st.privileges, p)
		st.privByID[p.ID] = p
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, s.db, "SELECT role_id, name, description, is_builtin, created_at, updated_at FROM roles ORDER BY created_at, rowid", func(r *sql.Rows) error {
		var ro Role
		var desc, created, updated sql.NullString
		if err := r.Scan(&ro.ID, &ro.Name, &desc, &ro.Builtin, &created, &updated); err != nil {
			return err
		}
		ro.Description = desc.String
		ro.Created, ro.Updated = parseTime(created), parseTime(updated)
		ro.Privileges = []Privilege{}
		st.roles[ro.ID] = &ro
		st.roleOrder = append(st.roleOrder, &ro)
		st.rolePrivs[ro.ID] = map[string]bool{}
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, s.db, "SELECT role_id, privilege_id FROM role_privileges", func(r *sql.Rows) error {
		var role, priv string
		if err := r.Scan(&role, &priv); err != nil {
			return err
		}
		if p, ok := st.privByID[priv]; ok && st.roles[role] != nil {
			st.roles[role].Privileges = append(st.roles[role].Privileges, p)
			st.rolePrivs[role][p.Name] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	seq := make(map[string]int, len(st.privileges))
	for i, p := range st.privileges {
		seq[p.ID] = i
	}
	for _, ro := range st.roles {
		slices.SortFunc(ro.Privileges, func(a, b Privilege) int { return cmp.Compare(seq[a.ID], seq[b.ID]) })
	}
	err = eachRow(ctx, s.db, `SELECT ace_id, ace_type, path, propagate, allowed, user_id, group_id, role_id, created_at, updated_at
		FROM acl ORDER BY created_at, rowid`, func(r *sql.Rows) error {
		var a ACE
		var user, group, created, updated sql.NullString
		if err := r.Scan(&a.ID, &a.Type, &a.Path, &a.Propagate, &a.Allowed, &user, &group, &a.RoleID, &created, &updated); err != nil {
			return err
		}
		a.UserID, a.GroupID = user.String, group.String
		a.Created, a.Updated = parseTime(created), parseTime(updated)
		st.aces = append(st.aces, &a)
		st.aceByID[a.ID] = &a
		index := st.userACEs
		subject := a.UserID
		if a.Type == ACEGroup {
			index, subject = st.groupACEs, a.GroupID
		}
		if index[subject] == nil {
			index[subject] = map[string][]*ACE{}
		}
		index[subject][a.Path] = append(index[subject][a.Path], &a)
		return nil
	})
	if err != nil {
		return err
	}
	if err := loadPools(ctx, s.db, st); err != nil {
		return err
	}
	s.state.Store(st)
	return nil
}

func eachRow(ctx context.Context, db *sql.DB, query string, f func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
