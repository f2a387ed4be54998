package access

import (
	"context"
	"database/sql"
	"net/mail"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Bounds of the values clients send.
const (
	MaxNameLen        = 64   // usernames, group and role names
	MaxFullNameLen    = 255  // bytes
	MaxEmailLen       = 254  // bytes
	MaxDescriptionLen = 1024 // bytes
	MinPasswordLen    = 8    // characters
	MaxPasswordLen    = 72   // bytes: bcrypt reads no further
)

// namePattern is what a username or a group name may be: GNS3's
// characters, anchored at both ends, with a length.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{3,64}$`)

func checkUsername(name string) error {
	if !namePattern.MatchString(name) {
		return errorf(ErrInvalid, "username must be 3 to %d letters, digits, '_' or '-'", MaxNameLen)
	}
	return nil
}

func checkGroupName(name string) error {
	if !namePattern.MatchString(name) {
		return errorf(ErrInvalid, "group name must be 3 to %d letters, digits, '_' or '-'", MaxNameLen)
	}
	return nil
}

func checkPassword(p string) error {
	if utf8.RuneCountInString(p) < MinPasswordLen || len(p) > MaxPasswordLen || !utf8.ValidString(p) {
		return errorf(ErrInvalid, "password must be at least %d characters and at most %d bytes", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

func checkEmail(e string) error {
	if e == "" {
		return nil
	}
	a, err := mail.ParseAddress(e)
	if len(e) > MaxEmailLen || err != nil || a.Address != e || a.Name != "" {
		return errorf(ErrInvalid, "email must be an address such as user@example.com, at most %d bytes", MaxEmailLen)
	}
	return nil
}

// checkText bounds a free text: valid UTF-8, no control character.
func checkText(field, s string, max int) error {
	if len(s) > max || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return errorf(ErrInvalid, "%s must be at most %d bytes of text without control characters", field, max)
	}
	return nil
}

// nullable stores "" as NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func copyUser(u *User) User { return *u }

// Users lists every user, the super admin included, oldest first.
func (s *Service) Users() []User {
	st := s.state.Load()
	out := make([]User, 0, len(st.userOrder))
	for _, u := range st.userOrder {
		out = append(out, copyUser(u))
	}
	return out
}

// User returns the user id.
func (s *Service) User(id string) (User, error) {
	u, ok := s.state.Load().users[id]
	if !ok {
		return User{}, errorf(ErrNotFound, "User '%s' not found", id)
	}
	return copyUser(u), nil
}

// UserCreate is what a new user is made of. Active nil means true.
type UserCreate struct {
	Username, Password, Email, FullName string
	Active                              *bool
}

// UserUpdate changes the fields that are not nil. Email or FullName ""
// clears it.
type UserUpdate struct {
	Username, Password, Email, FullName *string
	Active                              *bool
}

func (u *UserCreate) check() error {
	if err := checkUsername(u.Username); err != nil {
		return err
	}
	if err := checkPassword(u.Password); err != nil {
		return err
	}
	if err := checkEmail(u.Email); err != nil {
		return err
	}
	return checkText("full_name", u.FullName, MaxFullNameLen)
}

func (u *UserUpdate) check() error {
	if u.Username != nil {
		if err := checkUsername(*u.Username); err != nil {
			return err
		}
	}
	if u.Password != nil {
		if err := checkPassword(*u.Password); err != nil {
			return err
		}
	}
	if u.Email != nil {
		if err := checkEmail(*u.Email); err != nil {
			return err
		}
	}
	if u.FullName != nil {
		return checkText("full_name", *u.FullName, MaxFullNameLen)
	}
	return nil
}

// taken reports the 400 for a username or email another user than self has.
func (st *state) taken(self, username, email string) error {
	if o, ok := st.byName[username]; ok && o.ID != self {
		return errorf(ErrExists, "Username '%s' is already registered", username)
	}
	if email != "" {
		for _, o := range st.users {
			if o.Email == email && o.ID != self {
				return errorf(ErrExists, "Email '%s' is already registered", email)
			}
		}
	}
	return nil
}

// CreateUser adds a user, in no group. A new user is never a super admin.
func (s *Service) CreateUser(ctx context.Context, c UserCreate) (User, error) {
	if err := c.check(); err != nil {
		return User{}, err
	}
	if err := s.state.Load().taken("", c.Username, c.Email); err != nil {
		return User{}, err // answered before the costly hash
	}
	hash, err := s.hash(c.Password)
	if err != nil {
		return User{}, err
	}
	id := uuid.NewString()
	active := c.Active == nil || *c.Active
	err = s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.taken("", c.Username, c.Email); err != nil {
			return err
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, `INSERT INTO users (user_id, username, email, full_name, hashed_password, is_active, is_superadmin, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)`, id, c.Username, nullable(c.Email), nullable(c.FullName), hash, active, now, now)
		return err
	})
	if err != nil {
		return User{}, err
	}
	return s.User(id)
}

// UpdateUser changes a user. A new password, a new username or turning
// the user inactive revokes its tokens and its cached credentials.
func (s *Service) UpdateUser(ctx context.Context, id string, up UserUpdate) (User, error) {
	if err := up.check(); err != nil {
		return User{}, err
	}
	if _, err := s.User(id); err != nil {
		return User{}, err
	}
	var hash string
	if up.Password != nil {
		var err error
		if hash, err = s.hash(*up.Password); err != nil {
			return User{}, err
		}
	}
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		u, ok := st.users[id]
		if !ok {
			return errorf(ErrNotFound, "User '%s' not found", id)
		}
		next := *u
		revoke := false
		if up.Username != nil && *up.Username != u.Username {
			next.Username, revoke = *up.Username, true
		}
		if up.Email != nil {
			next.Email = *up.Email
		}
		if up.FullName != nil {
			next.FullName = *up.FullName
		}
		if up.Active != nil {
			next.Active = *up.Active
			revoke = revoke || u.Active && !next.Active
		}
		if up.Password != nil {
			next.hash, revoke = hash, true
		}
		if err := st.taken(id, next.Username, next.Email); err != nil {
			return err
		}
		if revoke {
			next.TokenVersion++
		}
		_, err := tx.ExecContext(ctx, `UPDATE users SET username = ?, email = ?, full_name = ?, hashed_password = ?, is_active = ?,
			token_version = ?, updated_at = ? WHERE user_id = ?`, next.Username, nullable(next.Email), nullable(next.FullName),
			next.hash, next.Active, next.TokenVersion, s.stamp(), id)
		return err
	})
	s.cache.dropUser(id)
	if err != nil {
		return User{}, err
	}
	return s.User(id)
}

// DeleteUser removes a user, with its memberships and ACEs. The super
// admin cannot be removed.
func (s *Service) DeleteUser(ctx context.Context, id string) error {
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		u, ok := st.users[id]
		if !ok {
			return errorf(ErrNotFound, "User '%s' not found", id)
		}
		if u.Superadmin {
			return errorf(ErrForbidden, "The super admin cannot be deleted")
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM users WHERE user_id = ?", id)
		return err
	})
	s.cache.dropUser(id)
	return err
}

// Logout revokes every token of the user.
func (s *Service) Logout(ctx context.Context, id string) error {
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.users[id]; !ok {
			return errorf(ErrNotFound, "User '%s' not found", id)
		}
		_, err := tx.ExecContext(ctx, "UPDATE users SET token_version = token_version + 1 WHERE user_id = ?", id)
		return err
	})
	s.cache.dropUser(id)
	return err
}

// UserGroups lists the groups of a user; an unknown user has none.
func (s *Service) UserGroups(id string) []Group {
	st := s.state.Load()
	out := []Group{}
	for _, g := range st.groupOrder {
		for _, gid := range st.userGroups[id] {
			if gid == g.ID {
				out = append(out, *g)
			}
		}
	}
	return out
}

// Groups lists every group.
func (s *Service) Groups() []Group {
	st := s.state.Load()
	out := make([]Group, 0, len(st.groupOrder))
	for _, g := range st.groupOrder {
		out = append(out, *g)
	}
	return out
}

// Group returns the group id.
func (s *Service) Group(id string) (Group, error) {
	g, ok := s.state.Load().groups[id]
	if !ok {
		return Group{}, errorf(ErrNotFound, "User group '%s' not found", id)
	}
	return *g, nil
}

func (st *state) groupNamed(name, except string) error {
	for _, g := range st.groups {
		if g.Name == name && g.ID != except {
			return errorf(ErrExists, "User group '%s' already exists", name)
		}
	}
	return nil
}

// CreateGroup adds a group.
func (s *Service) CreateGroup(ctx context.Context, name string) (Group, error) {
	if err := checkGroupName(name); err != nil {
		return Group{}, err
	}
	id := uuid.NewString()
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.groupNamed(name, ""); err != nil {
			return err
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, `INSERT INTO user_groups (user_group_id, name, is_builtin, created_at, updated_at)
			VALUES (?, ?, 0, ?, ?)`, id, name, now, now)
		return err
	})
	if err != nil {
		return Group{}, err
	}
	return s.Group(id)
}

// UpdateGroup renames a group; built-in groups cannot be renamed.
func (s *Service) UpdateGroup(ctx context.Context, id string, name *string) (Group, error) {
	if name != nil {
		if err := checkGroupName(*name); err != nil {
			return Group{}, err
		}
	}
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		g, ok := st.groups[id]
		if !ok {
			return errorf(ErrNotFound, "User group '%s' not found", id)
		}
		if g.Builtin {
			return errorf(ErrForbidden, "Built-in user group '%s' cannot be updated", id)
		}
		if name == nil {
			return nil
		}
		if err := st.groupNamed(*name, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE user_groups SET name = ?, updated_at = ? WHERE user_group_id = ?", *name, s.stamp(), id)
		return err
	})
	if err != nil {
		return Group{}, err
	}
	return s.Group(id)
}

// DeleteGroup removes a group, with its memberships and ACEs; built-in
// groups cannot be removed.
func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		g, ok := st.groups[id]
		if !ok {
			return errorf(ErrNotFound, "User group '%s' not found", id)
		}
		if g.Builtin {
			return errorf(ErrForbidden, "Built-in user group '%s' cannot be deleted", id)
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM user_groups WHERE user_group_id = ?", id)
		return err
	})
}

// Members lists a group's users, by username; an unknown group has none.
func (s *Service) Members(groupID string) []User {
	st := s.state.Load()
	out := []User{}
	for _, uid := range st.members[groupID] {
		out = append(out, copyUser(st.users[uid]))
	}
	return out
}

// AddMember puts a user in a group (built-in groups included).
func (s *Service) AddMember(ctx context.Context, groupID, userID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		u, ok := st.users[userID]
		if !ok {
			return errorf(ErrNotFound, "User '%s' not found", userID)
		}
		g, ok := st.groups[groupID]
		if !ok {
			return errorf(ErrNotFound, "User group '%s' not found", groupID)
		}
		for _, m := range st.members[groupID] {
			if m == userID {
				return errorf(ErrExists, "Username '%s' is already member of group '%s'", u.Username, g.Name)
			}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO user_group_members (user_group_id, user_id) VALUES (?, ?)", groupID, userID)
		return err
	})
}

// RemoveMember takes a user out of a group.
func (s *Service) RemoveMember(ctx context.Context, groupID, userID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.users[userID]; !ok {
			return errorf(ErrNotFound, "User '%s' not found", userID)
		}
		if _, ok := st.groups[groupID]; !ok {
			return errorf(ErrNotFound, "User group '%s' not found", groupID)
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM user_group_members WHERE user_group_id = ? AND user_id = ?", groupID, userID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errorf(ErrNotFound, "User '%s' is not a member of group '%s'", userID, groupID)
		}
		return nil
	})
}
