package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/project"
)

// A teacher's workflow, one call each (GNS3 has neither: gns3-server#1250):
//
//   - POST /v3/projects/{project_id}/distribute {"user_group_id": ...}
//     gives each member of a group a copy of the project (the template),
//     named "<template>-<username>", with an ACE giving the member the
//     User role on that copy only, and one giving the caller (the
//     teacher) the same on every copy. A member who already has a copy of
//     that name is left as they are, so the call may be made again when
//     the group grows.
//   - POST /v3/projects/{project_id}/copies/{copy_id}/reset puts a copy
//     back as the template is now: its nodes stopped, its nodes, links,
//     drawings and files replaced by the template's, keeping its id, name,
//     ACEs, snapshots and captures.
//
// They are routes of the template, under /v3 beside the access routes
// whose objects (groups, ACEs) they make, not under /v2, whose clients
// know nothing of users. Both ids are in the path, so the audit trail
// names them. Each is all or nothing: a distribution that fails part-way
// deletes the copies and ACEs it made; a reset that fails puts the copy
// back as it was.

// classCopy is one member's copy in a distribution's reply.
type classCopy struct {
	UserID    string `json:"user_id"`
	Username  string `json:"username"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	// Created is false for a copy an earlier call made.
	Created bool `json:"created"`
}

type distribution struct {
	ProjectID   string      `json:"project_id"`
	UserGroupID string      `json:"user_group_id"`
	Copies      []classCopy `json:"copies"`
}

// classRoutes serve the class workflow.
type classRoutes struct {
	*API
	// mu serialises distributions: two at once would both find a
	// member's copy missing and make two.
	mu sync.Mutex
	// fault, when set (tests), is called before each member's copy; an
	// error fails the distribution there.
	fault func(member string) error
}

// The class routes' entries in the table of permissions, added before New
// reads it: the template must be the caller's to see (else it is absent);
// the handlers check the rest (the group, the copy, the ACEs to grant).
func init() {
	permissions[Route{"POST", "/v3/projects/{project_id}/distribute"}] = permission{privilege: "Project.Audit", on: pProject,
		also: &permission{privilege: "Project.Allocate", on: "/projects"}}
	permissions[Route{"POST", "/v3/projects/{project_id}/copies/{copy_id}/reset"}] = on("Project.Audit", pProject)
}

func (a *API) registerClasses(app *fiber.App) {
	r := &classRoutes{API: a}
	a.classes = r
	a.handle(app, "POST", "/v3/projects/{project_id}/distribute", r.distribute)
	a.handle(app, "POST", "/v3/projects/{project_id}/copies/{copy_id}/reset", r.reset)
}

const (
	// maxClassBody bounds a distribution's body.
	maxClassBody = 4 << 10
	// maxClassSize bounds the members a distribution copies for.
	maxClassSize = 1000
)

// notFoundProject is the reply for a project that does not exist, or that
// the caller may not audit (the same: no existence leak).
func notFoundProject(id string) error {
	return &project.Error{Kind: project.ErrNotFound, Msg: fmt.Sprintf("Project ID %s doesn't exist", truncateString(id, 64))}
}

// visibleProject is the project the path names, if the caller may audit
// it.
func (r *classRoutes) visibleProject(c *fiber.Ctx, param string) (project.Project, error) {
	id := c.Params(param)
	if _, err := uuid.Parse(id); err != nil || !r.allowed(c, "Project.Audit", "/projects/"+id) {
		return project.Project{}, notFoundProject(id)
	}
	p, err := r.projects.Project(id)
	if err != nil {
		return project.Project{}, notFoundProject(id)
	}
	return p, nil
}

// needAccess refuses the class routes on a server without users.
func (r *classRoutes) needAccess() error {
	if r.cfg.Access == nil {
		return fiber.NewError(fiber.StatusConflict, "There are no users on this server: start the controller with --user and --password")
	}
	return nil
}

func (r *classRoutes) distribute(c *fiber.Ctx) error {
	if err := r.needAccess(); err != nil {
		return err
	}
	svc := r.cfg.Access
	var req struct {
		UserGroupID       *string `json:"user_group_id"`
		ResetMACAddresses bool    `json:"reset_mac_addresses"`
	}
	body := c.Body()
	if len(body) > maxClassBody {
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, "Request Entity Too Large")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.UserGroupID == nil {
		return &badRequest{msg: "The body must be {\"user_group_id\": \"<uuid>\"} and may hold \"reset_mac_addresses\": true"}
	}
	gid, err := uuid.Parse(*req.UserGroupID)
	if err != nil {
		return &badRequest{msg: fmt.Sprintf("user_group_id: %q is not a UUID", truncateString(*req.UserGroupID, 64))}
	}
	tmpl, err := r.visibleProject(c, "project_id")
	if err != nil {
		return err
	}
	if !r.allowed(c, "Project.Allocate", "/projects") {
		return deniedV2("Project.Allocate")
	}
	group := gid.String()
	if !r.allowed(c, "Group.Audit", "/access/groups/"+group) {
		return deniedV2("Group.Audit")
	}
	if _, err := svc.Group(group); err != nil {
		return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("User group %s doesn't exist", group))
	}
	role, ok := builtinRole(svc, "User")
	if !ok {
		return fiber.NewError(fiber.StatusConflict, "The built-in role User is missing")
	}
	me, _ := r.caller(c)
	// Every ACE this call will make must be the caller's to grant, checked
	// before anything is made: the role on a copy is what the caller holds
	// on its template (a teacher allowed to make projects, on /projects
	// without propagate, holds it there and on its own projects only).
	if !svc.MayGrantACE(me.ID, access.ACESpec{Type: "user", Path: "/projects/" + tmpl.ID, RoleID: role, Propagate: true, Allowed: true}) {
		return fiber.NewError(fiber.StatusForbidden, "Permission denied (cannot grant privileges the caller does not hold)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	members := svc.Members(group)
	if len(members) > maxClassSize {
		return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("The group has %d members: a distribution copies for at most %d", len(members), maxClassSize))
	}
	slices.SortFunc(members, func(x, y access.User) int { return strings.Compare(x.Username, y.Username) })

	out := distribution{ProjectID: tmpl.ID, UserGroupID: group, Copies: []classCopy{}}
	var madeProjects, madeACEs []string
	undo := func() {
		ctx := context.WithoutCancel(c.UserContext())
		for _, id := range slices.Backward(madeACEs) {
			if err := svc.DeleteACE(ctx, id); err != nil {
				r.log.Error("distribute: take back an ACE", "ace", id, "err", err)
			}
		}
		for _, id := range slices.Backward(madeProjects) {
			if err := r.projects.DeleteProject(ctx, id); err != nil {
				r.log.Error("distribute: take back a copy", "project", id, "err", err)
			}
		}
	}
	for _, m := range members {
		name := copyName(tmpl.Name, m.Username)
		if existing, ok := r.projectNamed(name); ok {
			out.Copies = append(out.Copies, classCopy{m.ID, m.Username, existing, name, false})
			continue
		}
		if r.fault != nil {
			if err := r.fault(m.Username); err != nil {
				undo()
				return err
			}
		}
		p, err := r.projects.Archives.Duplicate(c.UserContext(), tmpl.ID, project.DuplicateRequest{Name: name, ResetMACs: req.ResetMACAddresses})
		if err != nil {
			undo()
			return fmt.Errorf("copy for %s: %w", m.Username, err)
		}
		madeProjects = append(madeProjects, p.ID)
		grantees := []string{m.ID}
		if !me.Superadmin && me.ID != "" && me.ID != m.ID {
			grantees = append(grantees, me.ID)
		}
		for _, u := range grantees {
			ace, err := svc.CreateACE(c.UserContext(), access.ACESpec{Type: "user", Path: "/projects/" + p.ID, RoleID: role, UserID: u, Propagate: true, Allowed: true})
			if err != nil {
				undo()
				return fmt.Errorf("ACE on the copy for %s: %w", m.Username, err)
			}
			madeACEs = append(madeACEs, ace.ID)
		}
		out.Copies = append(out.Copies, classCopy{m.ID, m.Username, p.ID, p.Name, true})
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

// builtinRole is the id of the built-in role named name.
func builtinRole(svc *access.Service, name string) (string, bool) {
	for _, ro := range svc.Roles() {
		if ro.Builtin && ro.Name == name {
			return ro.ID, true
		}
	}
	return "", false
}

// copyName is a member's copy's name, "<template>-<username>", the
// template's part cut (at a character) to keep it within a name's bound.
func copyName(template, username string) string {
	suffix := "-" + username
	for len(template)+len(suffix) > project.MaxNameBytes {
		_, size := utf8.DecodeLastRuneInString(template)
		template = template[:len(template)-size]
	}
	return template + suffix
}

// projectNamed is the id of the project named name, if there is one.
func (r *classRoutes) projectNamed(name string) (string, bool) {
	for _, p := range r.projects.Projects() {
		if p.Name == name {
			return p.ID, true
		}
	}
	return "", false
}

func (r *classRoutes) reset(c *fiber.Ctx) error {
	if err := r.needAccess(); err != nil {
		return err
	}
	tmpl, err := r.visibleProject(c, "project_id")
	if err != nil {
		return err
	}
	cp, err := r.visibleProject(c, "copy_id")
	if err != nil {
		return err
	}
	if !r.allowed(c, "Project.Modify", "/projects/"+cp.ID) {
		return deniedV2("Project.Modify")
	}
	ctx := c.UserContext()
	closed := cp.Status != project.Opened
	if closed {
		if _, err := r.projects.OpenProject(ctx, cp.ID); err != nil {
			return err
		}
	}
	p, err := r.projects.Archives.Reset(ctx, cp.ID, tmpl.ID)
	if closed {
		// Left as it was found: closed.
		if cerr := r.projects.CloseProject(context.WithoutCancel(ctx), cp.ID); cerr != nil {
			err = errors.Join(err, cerr)
		} else if err == nil {
			p, err = r.projects.Project(cp.ID)
		}
	}
	if err != nil {
		return err
	}
	return c.JSON(projectFrom(p))
}
