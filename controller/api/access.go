package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/access"
)

// The /v3/access routes: GNS3 3.x's users, groups, roles, privileges and
// ACL, with its paths, JSON shapes, messages and statuses. A client
// authenticates with a bearer token (POST /v3/access/users/login or
// /authenticate) or HTTP Basic, and each route asks the privilege GNS3
// asks, on the request's path. Their errors are GNS3 3.x's
// {"message": ...}, written here rather than by handleError, whose shape
// is GNS3 2's.

// maxAccessBody bounds a /v3/access request body.
const maxAccessBody = 64 << 10

type accessRoutes struct {
	svc  *access.Service
	auth *authLimiter
}

// accessError is a reply of a /v3/access route that is not the access
// model's: 401s, 403s and 422s found by the handlers.
type accessError struct {
	status int
	msg    string
}

func (e *accessError) Error() string { return e.msg }

func unprocessable(format string, args ...any) error {
	return &accessError{fiber.StatusUnprocessableEntity, fmt.Sprintf(format, args...)}
}

// registerAccess adds the /v3/access routes when Config.Access is set.
// They are added before the /v2 Basic authentication, which they do not
// go through: they authenticate by themselves.
func (a *API) registerAccess(app *fiber.App) {
	if a.cfg.Access == nil {
		return
	}
	r := &accessRoutes{svc: a.cfg.Access, auth: a.auth}
	g := app.Group("/v3/access", a.boundBody)
	add := func(method, path, privilege string, h func(*fiber.Ctx, access.User) error) {
		template := "/v3/access" + path
		a.accessTemplates = append(a.accessTemplates, template)
		value := []byte(template)
		g.Add(method, fiberPath(path), func(c *fiber.Ctx) error {
			c.Response().Header.SetCanonical(xRoute, value)
			return r.serve(c, privilege, h)
		})
	}
	public := func(method, path string, h fiber.Handler) {
		template := "/v3/access" + path
		a.accessTemplates = append(a.accessTemplates, template)
		value := []byte(template)
		g.Add(method, path, func(c *fiber.Ctx) error {
			c.Response().Header.SetCanonical(xRoute, value)
			if err := h(c); err != nil {
				return r.fail(c, err)
			}
			return nil
		})
	}
	const (
		users = "/users"
		user  = users + "/{user_id}"
		grps  = "/groups"
		grp   = grps + "/{user_group_id}"
		roles = "/roles"
		role  = roles + "/{role_id}"
		acl   = "/acl"
		ace   = acl + "/{ace_id}"
	)
	public("POST", users+"/login", r.login)
	public("POST", users+"/authenticate", r.authenticateJSON)
	add("POST", users+"/logout", "", r.logout)
	add("GET", users+"/me", "", r.me)
	add("PUT", users+"/me", "", r.updateMe)
	add("GET", users, "User.Audit", r.listUsers)
	add("POST", users, "User.Allocate", r.createUser)
	add("GET", user, "User.Audit", r.getUser)
	add("PUT", user, "User.Modify", r.updateUser)
	add("DELETE", user, "User.Allocate", r.deleteUser)
	add("GET", user+"/groups", "", r.userGroups) // Group.Audit, checked in the handler
	add("GET", grps, "Group.Audit", r.listGroups)
	add("POST", grps, "Group.Allocate", r.createGroup)
	add("GET", grp, "Group.Audit", r.getGroup)
	add("PUT", grp, "Group.Modify", r.updateGroup)
	add("DELETE", grp, "Group.Allocate", r.deleteGroup)
	add("GET", grp+"/members", "Group.Audit", r.members)
	add("PUT", grp+"/members/{user_id}", "Group.Modify", r.addMember)
	add("DELETE", grp+"/members/{user_id}", "Group.Modify", r.removeMember)
	add("GET", roles, "Role.Audit", r.listRoles)
	add("POST", roles, "Role.Allocate", r.createRole)
	add("GET", role, "Role.Audit", r.getRole)
	add("PUT", role, "Role.Modify", r.updateRole)
	add("DELETE", role, "Role.Allocate", r.deleteRole)
	add("GET", role+"/privileges", "Role.Audit", r.rolePrivileges)
	add("PUT", role+"/privileges/{privilege_id}", "Role.Modify", r.addRolePrivilege)
	add("DELETE", role+"/privileges/{privilege_id}", "Role.Modify", r.removeRolePrivilege)
	add("GET", "/privileges", "", r.privileges)
	add("GET", acl+"/endpoints", "ACE.Audit", r.endpoints)
	add("GET", acl, "ACE.Audit", r.listACEs)
	add("POST", acl, "ACE.Allocate", r.createACE)
	add("GET", ace, "ACE.Audit", r.getACE)
	add("PUT", ace, "ACE.Modify", r.updateACE)
	add("DELETE", ace, "ACE.Allocate", r.deleteACE)
	add("GET", user+"/quota", "", a.getQuota(access.QuotaUser, "user_id")) // pools.go
	add("PUT", user+"/quota", "", a.putQuota(access.QuotaUser, "user_id"))
	add("GET", grp+"/quota", "", a.getQuota(access.QuotaGroup, "user_group_id"))
	add("PUT", grp+"/quota", "", a.putQuota(access.QuotaGroup, "user_group_id"))
	// Anything else under /v3/access: 404 once authenticated (what exists
	// is not told to strangers).
	g.Use(func(c *fiber.Ctx) error {
		return r.serve(c, "", func(c *fiber.Ctx, _ access.User) error {
			return &accessError{fiber.StatusNotFound, "No route " + c.Method() + " " + c.Path()}
		})
	})
}

// serve authenticates the request, checks privilege (if any) on its
// path, and runs h.
func (r *accessRoutes) serve(c *fiber.Ctx, privilege string, h func(*fiber.Ctx, access.User) error) error {
	me, err := r.caller(c)
	if err == nil {
		c.Locals(callerKey, me) // the audit trail's who
	}
	if err == nil && privilege != "" && !r.svc.Allowed(me.ID, privilege, c.Path()) {
		err = denied(privilege)
	}
	if err == nil {
		err = h(c, me)
	}
	if err != nil {
		return r.fail(c, err)
	}
	return nil
}

// cannotGrant refuses a change that would give more than the caller
// holds (GNS3 3.x allows it).
func cannotGrant() error {
	return &accessError{fiber.StatusForbidden, "Permission denied (cannot grant privileges the caller does not hold)"}
}

// cannotLift refuses a change that would lift a deny from the caller.
func cannotLift() error {
	return &accessError{fiber.StatusForbidden, "Permission denied (a deny that applies to the caller is the super admin's to lift)"}
}

func denied(privilege string) error {
	return &accessError{fiber.StatusForbidden, "Permission denied (privilege " + privilege + " is required)"}
}

// caller is the request's user, by bearer token or Basic credentials
// (from the header only: a token in a URL ends up in logs).
func (r *accessRoutes) caller(c *fiber.Ctx) (access.User, error) {
	h := c.Get(fiber.HeaderAuthorization)
	scheme, value, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return r.svc.AuthenticateToken(c.UserContext(), strings.TrimSpace(value))
	case strings.EqualFold(scheme, "Basic"):
		user, pass, ok := parseBasic(h)
		if !ok {
			return access.User{}, &accessError{fiber.StatusUnauthorized, "Authentication was unsuccessful."}
		}
		return r.password(c, user, pass)
	}
	return access.User{}, &accessError{fiber.StatusUnauthorized, "Not authenticated"}
}

// password checks a username and password, throttled by client address
// as the /v2 Basic credential is.
func (r *accessRoutes) password(c *fiber.Ctx, user, pass string) (access.User, error) {
	ip := c.Context().RemoteIP().String()
	if wait := r.auth.blocked(ip); wait > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfter(wait)))
		return access.User{}, &accessError{fiber.StatusTooManyRequests, "Too many failed authentication attempts from " + ip + ": try again later"}
	}
	u, err := r.svc.Authenticate(c.UserContext(), user, pass)
	if errors.Is(err, access.ErrUnauthenticated) {
		r.auth.failed(ip, user)
	}
	return u, err
}

// fail writes err as GNS3 3.x's error reply.
func (r *accessRoutes) fail(c *fiber.Ctx, err error) error {
	status, msg := fiber.StatusInternalServerError, "Internal error"
	var ae *accessError
	var me *access.Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
		status, msg = ae.status, ae.msg
	case errors.As(err, &me):
		msg = me.Msg
		switch {
		case errors.Is(err, access.ErrNotFound):
			status = fiber.StatusNotFound
		case errors.Is(err, access.ErrExists), errors.Is(err, access.ErrBadPath):
			status = fiber.StatusBadRequest
		case errors.Is(err, access.ErrForbidden):
			status = fiber.StatusForbidden
		case errors.Is(err, access.ErrInvalid):
			status = fiber.StatusUnprocessableEntity
		case errors.Is(err, access.ErrUnauthenticated):
			status = fiber.StatusUnauthorized
		}
	case errors.As(err, &fe):
		status, msg = fe.Code, fe.Message
	}
	if status == fiber.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, "Bearer")
	}
	if status >= 500 {
		return err // handleError logs it and answers 500
	}
	c.Response().ResetBody()
	return c.Status(status).JSON(fiber.Map{"message": msg})
}

// Wire shapes.

// wireTime is a time as GNS3 3.x sends it: UTC to the second, no offset;
// the zero time is null.
type wireTime time.Time

func (t wireTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05") + `"`), nil
}

// orNull is s, or nil when s is "".
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type userJSON struct {
	UserID       string   `json:"user_id"`
	Username     string   `json:"username"`
	Email        *string  `json:"email"`
	FullName     *string  `json:"full_name"`
	IsActive     bool     `json:"is_active"`
	IsSuperadmin bool     `json:"is_superadmin"`
	LastLogin    wireTime `json:"last_login"`
	CreatedAt    wireTime `json:"created_at"`
	UpdatedAt    wireTime `json:"updated_at"`
}

func userFrom(u access.User) userJSON {
	return userJSON{u.ID, u.Username, orNull(u.Email), orNull(u.FullName), u.Active, u.Superadmin,
		wireTime(u.LastLogin), wireTime(u.Created), wireTime(u.Updated)}
}

type groupJSON struct {
	UserGroupID string   `json:"user_group_id"`
	Name        string   `json:"name"`
	IsBuiltin   bool     `json:"is_builtin"`
	CreatedAt   wireTime `json:"created_at"`
	UpdatedAt   wireTime `json:"updated_at"`
}

func groupFrom(g access.Group) groupJSON {
	return groupJSON{g.ID, g.Name, g.Builtin, wireTime(g.Created), wireTime(g.Updated)}
}

type privilegeJSON struct {
	PrivilegeID string   `json:"privilege_id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	CreatedAt   wireTime `json:"created_at"`
	UpdatedAt   wireTime `json:"updated_at"`
}

func privilegeFrom(p access.Privilege) privilegeJSON {
	return privilegeJSON{p.ID, p.Name, p.Description, wireTime(p.Created), wireTime(p.Updated)}
}

type roleJSON struct {
	RoleID      string          `json:"role_id"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	IsBuiltin   bool            `json:"is_builtin"`
	Privileges  []privilegeJSON `json:"privileges"`
	CreatedAt   wireTime        `json:"created_at"`
	UpdatedAt   wireTime        `json:"updated_at"`
}

func roleFrom(r access.Role) roleJSON {
	return roleJSON{r.ID, r.Name, orNull(r.Description), r.Builtin, mapSlice(r.Privileges, privilegeFrom),
		wireTime(r.Created), wireTime(r.Updated)}
}

type aceJSON struct {
	ACEID     string   `json:"ace_id"`
	ACEType   string   `json:"ace_type"`
	Path      string   `json:"path"`
	Propagate bool     `json:"propagate"`
	Allowed   bool     `json:"allowed"`
	UserID    *string  `json:"user_id"`
	GroupID   *string  `json:"group_id"`
	RoleID    string   `json:"role_id"`
	CreatedAt wireTime `json:"created_at"`
	UpdatedAt wireTime `json:"updated_at"`
}

func aceFrom(a access.ACE) aceJSON {
	return aceJSON{a.ID, a.Type, a.Path, a.Propagate, a.Allowed, orNull(a.UserID), orNull(a.GroupID), a.RoleID,
		wireTime(a.Created), wireTime(a.Updated)}
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// opt is a JSON member that may be absent (Set false), null (Null) or a
// value.
type opt[T any] struct {
	Set, Null bool
	V         T
}

func (o *opt[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// ptr is the value when set and not null, nil otherwise.
func (o opt[T]) ptr() *T {
	if !o.Set || o.Null {
		return nil
	}
	return &o.V
}

// text is a string member's value: null is "" (cleared), absent nil.
func text(o opt[string]) *string {
	if !o.Set {
		return nil
	}
	return &o.V // V is "" when null
}

// notNull refuses an explicit null for member name.
func (o opt[T]) notNull(name string) error {
	if o.Null {
		return unprocessable("%s: must not be null", name)
	}
	return nil
}

// required refuses an absent or null member.
func (o opt[T]) required(name string) error {
	if !o.Set || o.Null {
		return unprocessable("%s: field required", name)
	}
	return nil
}

// decodeBody decodes a JSON object body into v: 413 over maxAccessBody,
// 422 for anything but an object of the right member types.
func decodeBody(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(body) > maxAccessBody {
		return &accessError{fiber.StatusRequestEntityTooLarge, "Request Entity Too Large"}
	}
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return unprocessable("body: must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return unprocessable("%s: must be %s", te.Field, te.Type)
		}
		return unprocessable("body: invalid JSON")
	}
	return nil
}

// idParam is a path parameter that must be a UUID, in canonical form.
func idParam(c *fiber.Ctx, name string) (string, error) {
	v := c.Params(name)
	id, err := uuid.Parse(v)
	if err != nil {
		return "", unprocessable("%s: %q is not a valid UUID", name, truncateString(v, 64))
	}
	return id.String(), nil
}

// idMember checks an optional UUID member of a body.
func idMember(name string, o opt[string]) (string, error) {
	if !o.Set || o.Null {
		return "", nil
	}
	id, err := uuid.Parse(o.V)
	if err != nil {
		return "", unprocessable("%s: %q is not a valid UUID", name, truncateString(o.V, 64))
	}
	return id.String(), nil
}

func truncateString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Login and tokens.

type tokenJSON struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
}

// login is OAuth2's password grant, as a form.
func (r *accessRoutes) login(c *fiber.Ctx) error {
	if !strings.HasPrefix(c.Get(fiber.HeaderContentType), fiber.MIMEApplicationForm) {
		return unprocessable("body: must be an application/x-www-form-urlencoded form")
	}
	if len(c.Body()) > maxAccessBody {
		return &accessError{fiber.StatusRequestEntityTooLarge, "Request Entity Too Large"}
	}
	form, err := url.ParseQuery(string(c.Body()))
	if err != nil {
		return unprocessable("body: invalid form")
	}
	if gt, ok := form["grant_type"]; ok && (len(gt) != 1 || gt[0] != "password") {
		return unprocessable("grant_type: must be 'password'")
	}
	for _, k := range []string{"username", "password"} {
		if !form.Has(k) {
			return unprocessable("%s: field required", k)
		}
	}
	return r.issue(c, form.Get("username"), form.Get("password"))
}

func (r *accessRoutes) authenticateJSON(c *fiber.Ctx) error {
	var req struct {
		Username opt[string] `json:"username"`
		Password opt[string] `json:"password"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := errors.Join(req.Username.required("username"), req.Password.required("password")); err != nil {
		return firstErr(err)
	}
	return r.issue(c, req.Username.V, req.Password.V)
}

// firstErr is the first of joined errors (each is a whole reply).
func firstErr(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()[0]
	}
	return err
}

func (r *accessRoutes) issue(c *fiber.Ctx, user, pass string) error {
	u, err := r.password(c, user, pass)
	if err != nil {
		return err
	}
	c.Locals(callerKey, u) // the audit trail's who
	tok, err := r.svc.Login(c.UserContext(), user, pass)
	if err != nil {
		return err
	}
	return c.JSON(tokenJSON{tok, "bearer"})
}

func (r *accessRoutes) logout(c *fiber.Ctx, me access.User) error {
	if err := r.svc.Logout(c.UserContext(), me.ID); err != nil {
		return err
	}
	return noContent(c)
}

// Users.

func (r *accessRoutes) me(c *fiber.Ctx, me access.User) error { return c.JSON(userFrom(me)) }

func (r *accessRoutes) updateMe(c *fiber.Ctx, me access.User) error {
	var req struct {
		Password opt[string] `json:"password"`
		Email    opt[string] `json:"email"`
		FullName opt[string] `json:"full_name"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	u, err := r.svc.UpdateUser(c.UserContext(), me.ID, access.UserUpdate{
		Password: req.Password.ptr(), Email: text(req.Email), FullName: text(req.FullName)})
	if err != nil {
		return err
	}
	return c.JSON(userFrom(u))
}

func (r *accessRoutes) listUsers(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.Users(), userFrom))
}

func (r *accessRoutes) createUser(c *fiber.Ctx, _ access.User) error {
	var req struct {
		Username opt[string] `json:"username"`
		Password opt[string] `json:"password"`
		Email    opt[string] `json:"email"`
		FullName opt[string] `json:"full_name"`
		IsActive opt[bool]   `json:"is_active"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := errors.Join(req.Username.required("username"), req.Password.required("password"), req.IsActive.notNull("is_active")); err != nil {
		return firstErr(err)
	}
	u, err := r.svc.CreateUser(c.UserContext(), access.UserCreate{Username: req.Username.V, Password: req.Password.V,
		Email: req.Email.V, FullName: req.FullName.V, Active: req.IsActive.ptr()})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(userFrom(u))
}

func (r *accessRoutes) getUser(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_id")
	if err != nil {
		return err
	}
	u, err := r.svc.User(id)
	if err != nil {
		return err
	}
	return c.JSON(userFrom(u))
}

func (r *accessRoutes) updateUser(c *fiber.Ctx, me access.User) error {
	id, err := idParam(c, "user_id")
	if err != nil {
		return err
	}
	var req struct {
		Username opt[string] `json:"username"`
		Password opt[string] `json:"password"`
		Email    opt[string] `json:"email"`
		FullName opt[string] `json:"full_name"`
		IsActive opt[bool]   `json:"is_active"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := errors.Join(req.Username.notNull("username"), req.Password.notNull("password"), req.IsActive.notNull("is_active")); err != nil {
		return firstErr(err)
	}
	target, err := r.svc.User(id)
	if err != nil {
		return err
	}
	// User.Modify is not a way to take over the super admin.
	if target.Superadmin && !me.Superadmin {
		return &accessError{fiber.StatusForbidden, "Only the super admin can update the super admin"}
	}
	u, err := r.svc.UpdateUser(c.UserContext(), id, access.UserUpdate{Username: req.Username.ptr(), Password: req.Password.ptr(),
		Email: text(req.Email), FullName: text(req.FullName), Active: req.IsActive.ptr()})
	if err != nil {
		return err
	}
	return c.JSON(userFrom(u))
}

func (r *accessRoutes) deleteUser(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeleteUser(c.UserContext(), id); err != nil {
		return err
	}
	return noContent(c)
}

// userGroups needs Group.Audit, on the request's path (GNS3's) or on
// /access/groups (where an ACE about groups would be).
func (r *accessRoutes) userGroups(c *fiber.Ctx, me access.User) error {
	if !r.svc.Allowed(me.ID, "Group.Audit", c.Path()) && !r.svc.Allowed(me.ID, "Group.Audit", "/access/groups") {
		return denied("Group.Audit")
	}
	id, err := idParam(c, "user_id")
	if err != nil {
		return err
	}
	return c.JSON(mapSlice(r.svc.UserGroups(id), groupFrom))
}

// Groups.

func (r *accessRoutes) listGroups(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.Groups(), groupFrom))
}

type groupRequest struct {
	Name opt[string] `json:"name"`
}

func (r *accessRoutes) createGroup(c *fiber.Ctx, _ access.User) error {
	var req groupRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.required("name"); err != nil {
		return err
	}
	g, err := r.svc.CreateGroup(c.UserContext(), req.Name.V)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(groupFrom(g))
}

func (r *accessRoutes) getGroup(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_group_id")
	if err != nil {
		return err
	}
	g, err := r.svc.Group(id)
	if err != nil {
		return err
	}
	return c.JSON(groupFrom(g))
}

func (r *accessRoutes) updateGroup(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_group_id")
	if err != nil {
		return err
	}
	var req groupRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.notNull("name"); err != nil {
		return err
	}
	g, err := r.svc.UpdateGroup(c.UserContext(), id, req.Name.ptr())
	if err != nil {
		return err
	}
	return c.JSON(groupFrom(g))
}

func (r *accessRoutes) deleteGroup(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_group_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeleteGroup(c.UserContext(), id); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) members(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "user_group_id")
	if err != nil {
		return err
	}
	return c.JSON(mapSlice(r.svc.Members(id), userFrom))
}

// membership parses a membership route's group and user ids.
func membership(c *fiber.Ctx) (group, user string, err error) {
	if group, err = idParam(c, "user_group_id"); err != nil {
		return "", "", err
	}
	user, err = idParam(c, "user_id")
	return group, user, err
}

func (r *accessRoutes) addMember(c *fiber.Ctx, me access.User) error {
	g, u, err := membership(c)
	if err != nil {
		return err
	}
	if !r.svc.MayGrantMembership(me.ID, g) {
		return cannotGrant()
	}
	if err := r.svc.AddMember(c.UserContext(), g, u); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) removeMember(c *fiber.Ctx, me access.User) error {
	g, u, err := membership(c)
	if err != nil {
		return err
	}
	if !r.svc.MayLeaveGroup(me.ID, g, u) {
		return cannotLift()
	}
	if err := r.svc.RemoveMember(c.UserContext(), g, u); err != nil {
		return err
	}
	return noContent(c)
}

// Roles and privileges.

func (r *accessRoutes) listRoles(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.Roles(), roleFrom))
}

type roleRequest struct {
	Name        opt[string] `json:"name"`
	Description opt[string] `json:"description"`
}

func (r *accessRoutes) createRole(c *fiber.Ctx, _ access.User) error {
	var req roleRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.required("name"); err != nil {
		return err
	}
	ro, err := r.svc.CreateRole(c.UserContext(), req.Name.V, req.Description.V)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(roleFrom(ro))
}

func (r *accessRoutes) getRole(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "role_id")
	if err != nil {
		return err
	}
	ro, err := r.svc.Role(id)
	if err != nil {
		return err
	}
	return c.JSON(roleFrom(ro))
}

func (r *accessRoutes) updateRole(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "role_id")
	if err != nil {
		return err
	}
	var req roleRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.notNull("name"); err != nil {
		return err
	}
	ro, err := r.svc.UpdateRole(c.UserContext(), id, req.Name.ptr(), text(req.Description))
	if err != nil {
		return err
	}
	return c.JSON(roleFrom(ro))
}

func (r *accessRoutes) deleteRole(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "role_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeleteRole(c.UserContext(), id); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) rolePrivileges(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "role_id")
	if err != nil {
		return err
	}
	return c.JSON(mapSlice(r.svc.RolePrivileges(id), privilegeFrom))
}

func rolePrivilege(c *fiber.Ctx) (role, priv string, err error) {
	if role, err = idParam(c, "role_id"); err != nil {
		return "", "", err
	}
	priv, err = idParam(c, "privilege_id")
	return role, priv, err
}

func (r *accessRoutes) addRolePrivilege(c *fiber.Ctx, me access.User) error {
	role, priv, err := rolePrivilege(c)
	if err != nil {
		return err
	}
	if !r.svc.MayGrantPrivilege(me.ID, role, priv) {
		return cannotGrant()
	}
	if err := r.svc.AddRolePrivilege(c.UserContext(), role, priv); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) removeRolePrivilege(c *fiber.Ctx, _ access.User) error {
	role, priv, err := rolePrivilege(c)
	if err != nil {
		return err
	}
	if err := r.svc.RemoveRolePrivilege(c.UserContext(), role, priv); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) privileges(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.Privileges(), privilegeFrom))
}

// ACL.

type aclEndpointJSON struct {
	Endpoint     string `json:"endpoint"`
	Name         string `json:"name"`
	EndpointType string `json:"endpoint_type"`
}

// endpoints lists paths an ACE may name: the roots, and each user, group
// and role. (GNS3 lists each project, node, link, image and template too;
// this controller's are not listed here yet.) 200, where GNS3 answers 201.
func (r *accessRoutes) endpoints(c *fiber.Ctx, _ access.User) error {
	out := []aclEndpointJSON{{"/", "All endpoints", "root"}, {"/projects", "All projects", "project"}}
	out = append(out, aclEndpointJSON{"/access/users", "All users", "user"})
	for _, u := range r.svc.Users() {
		out = append(out, aclEndpointJSON{"/access/users/" + u.ID, "User: " + u.Username, "user"})
	}
	out = append(out, aclEndpointJSON{"/access/groups", "All groups", "group"})
	for _, g := range r.svc.Groups() {
		out = append(out, aclEndpointJSON{"/access/groups/" + g.ID, "Group: " + g.Name, "group"})
	}
	out = append(out, aclEndpointJSON{"/access/roles", "All roles", "role"})
	for _, ro := range r.svc.Roles() {
		out = append(out, aclEndpointJSON{"/access/roles/" + ro.ID, "Role: " + ro.Name, "role"})
	}
	out = append(out, aclEndpointJSON{"/images", "All images", "image"}, aclEndpointJSON{"/templates", "All templates", "template"},
		aclEndpointJSON{"/pools", "All resource pools", "pool"})
	for _, p := range r.svc.Pools() {
		out = append(out, aclEndpointJSON{"/pools/" + p.ID, "Resource pool: " + p.Name, "pool"})
	}
	return c.JSON(out)
}

func (r *accessRoutes) listACEs(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.ACEs(), aceFrom))
}

type aceRequest struct {
	ACEType   opt[string] `json:"ace_type"`
	Path      opt[string] `json:"path"`
	RoleID    opt[string] `json:"role_id"`
	Propagate opt[bool]   `json:"propagate"`
	Allowed   opt[bool]   `json:"allowed"`
	UserID    opt[string] `json:"user_id"`
	GroupID   opt[string] `json:"group_id"`
}

// spec checks the request and lays it over base (the ACE updated, or a
// new ACE's defaults: propagate and allowed true).
func (req *aceRequest) spec(base access.ACESpec) (access.ACESpec, error) {
	err := errors.Join(req.ACEType.required("ace_type"), req.Path.required("path"), req.RoleID.required("role_id"),
		req.Propagate.notNull("propagate"), req.Allowed.notNull("allowed"))
	if err != nil {
		return base, firstErr(err)
	}
	if len(req.Path.V) > access.MaxPathLen {
		return base, unprocessable("path: at most %d bytes", access.MaxPathLen)
	}
	sp := base
	sp.Type, sp.Path = req.ACEType.V, req.Path.V
	if sp.RoleID, err = idMember("role_id", req.RoleID); err != nil {
		return base, err
	}
	if req.UserID.Set {
		if sp.UserID, err = idMember("user_id", req.UserID); err != nil {
			return base, err
		}
	}
	if req.GroupID.Set {
		if sp.GroupID, err = idMember("group_id", req.GroupID); err != nil {
			return base, err
		}
	}
	if req.Propagate.Set {
		sp.Propagate = req.Propagate.V
	}
	if req.Allowed.Set {
		sp.Allowed = req.Allowed.V
	}
	return sp, nil
}

func (r *accessRoutes) createACE(c *fiber.Ctx, me access.User) error {
	var req aceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	sp, err := req.spec(access.ACESpec{Propagate: true, Allowed: true})
	if err != nil {
		return err
	}
	if !r.svc.MayGrantACE(me.ID, sp) {
		return cannotGrant()
	}
	a, err := r.svc.CreateACE(c.UserContext(), sp)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(aceFrom(a))
}

func (r *accessRoutes) getACE(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "ace_id")
	if err != nil {
		return err
	}
	a, err := r.svc.ACE(id)
	if err != nil {
		return err
	}
	return c.JSON(aceFrom(a))
}

func (r *accessRoutes) updateACE(c *fiber.Ctx, me access.User) error {
	id, err := idParam(c, "ace_id")
	if err != nil {
		return err
	}
	var req aceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	old, err := r.svc.ACE(id)
	if err != nil {
		return err
	}
	if !r.svc.MayLiftACE(me.ID, id) {
		return cannotLift()
	}
	sp, err := req.spec(access.ACESpec{UserID: old.UserID, GroupID: old.GroupID, Propagate: old.Propagate, Allowed: old.Allowed})
	if err != nil {
		return err
	}
	if !r.svc.MayGrantACE(me.ID, sp) {
		return cannotGrant()
	}
	a, err := r.svc.UpdateACE(c.UserContext(), id, sp)
	if err != nil {
		return err
	}
	return c.JSON(aceFrom(a))
}

func (r *accessRoutes) deleteACE(c *fiber.Ctx, me access.User) error {
	id, err := idParam(c, "ace_id")
	if err != nil {
		return err
	}
	if !r.svc.MayLiftACE(me.ID, id) {
		return cannotLift()
	}
	if err := r.svc.DeleteACE(c.UserContext(), id); err != nil {
		return err
	}
	return noContent(c)
}
