package api

import (
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/project"
)

// The /v3/pools routes, GNS3 3.x's resource pools (paths, shapes,
// statuses and messages as its), and the quota routes of users, groups
// and pools, labtap's own: GET and PUT .../quota on
// /v3/access/users/{id}, /v3/access/groups/{id} and /v3/pools/{id}. They
// answer errors as /v3/access does ({"message": ...}).

type poolJSON struct {
	ResourcePoolID string   `json:"resource_pool_id"`
	Name           string   `json:"name"`
	CreatedAt      wireTime `json:"created_at"`
	UpdatedAt      wireTime `json:"updated_at"`
}

func poolFrom(p access.Pool) poolJSON {
	return poolJSON{p.ID, p.Name, wireTime(p.Created), wireTime(p.Updated)}
}

type resourceJSON struct {
	ResourceID   string   `json:"resource_id"`
	ResourceType string   `json:"resource_type"`
	Name         *string  `json:"name"`
	CreatedAt    wireTime `json:"created_at"`
	UpdatedAt    wireTime `json:"updated_at"`
}

func resourceFrom(r access.Resource) resourceJSON {
	return resourceJSON{r.ID, r.Type, orNull(r.Name), wireTime(r.Created), wireTime(r.Updated)}
}

// registerPools adds /v3/pools when Config.Access is set.
func (a *API) registerPools(app *fiber.App) {
	if a.cfg.Access == nil {
		return
	}
	r := &accessRoutes{svc: a.cfg.Access, auth: a.auth}
	g := app.Group("/v3/pools", a.boundBody)
	add := func(method, path, privilege string, h func(*fiber.Ctx, access.User) error) {
		template := "/v3/pools" + path
		a.accessTemplates = append(a.accessTemplates, template)
		value := []byte(template)
		g.Add(method, fiberPath(path), func(c *fiber.Ctx) error {
			c.Response().Header.SetCanonical(xRoute, value)
			return r.serve(c, privilege, h)
		})
	}
	const pool = "/{resource_pool_id}"
	add("GET", "", "Pool.Audit", r.listPools)
	add("POST", "", "Pool.Allocate", r.createPool)
	add("GET", pool, "Pool.Audit", r.getPool)
	add("PUT", pool, "Pool.Modify", r.updatePool)
	add("DELETE", pool, "Pool.Allocate", r.deletePool)
	add("GET", pool+"/resources", "Pool.Audit", r.poolResources)
	add("PUT", pool+"/resources/{resource_id}", "Pool.Modify", a.addPoolResource(r))
	add("DELETE", pool+"/resources/{resource_id}", "Pool.Modify", r.removePoolResource)
	add("GET", pool+"/quota", "Pool.Audit", a.getQuota(access.QuotaPool, "resource_pool_id"))
	add("PUT", pool+"/quota", "", a.putQuota(access.QuotaPool, "resource_pool_id"))
}

func (r *accessRoutes) listPools(c *fiber.Ctx, _ access.User) error {
	return c.JSON(mapSlice(r.svc.Pools(), poolFrom))
}

type poolRequest struct {
	Name opt[string] `json:"name"`
}

func (r *accessRoutes) createPool(c *fiber.Ctx, _ access.User) error {
	var req poolRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.required("name"); err != nil {
		return err
	}
	p, err := r.svc.CreatePool(c.UserContext(), req.Name.V)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(poolFrom(p))
}

func (r *accessRoutes) getPool(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "resource_pool_id")
	if err != nil {
		return err
	}
	p, err := r.svc.Pool(id)
	if err != nil {
		return err
	}
	return c.JSON(poolFrom(p))
}

func (r *accessRoutes) updatePool(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "resource_pool_id")
	if err != nil {
		return err
	}
	var req poolRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Name.required("name"); err != nil {
		return err
	}
	p, err := r.svc.UpdatePool(c.UserContext(), id, req.Name.V)
	if err != nil {
		return err
	}
	return c.JSON(poolFrom(p))
}

func (r *accessRoutes) deletePool(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "resource_pool_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeletePool(c.UserContext(), id); err != nil {
		return err
	}
	return noContent(c)
}

func (r *accessRoutes) poolResources(c *fiber.Ctx, _ access.User) error {
	id, err := idParam(c, "resource_pool_id")
	if err != nil {
		return err
	}
	return c.JSON(mapSlice(r.svc.PoolResources(id), resourceFrom))
}

func poolResource(c *fiber.Ctx) (pool, res string, err error) {
	if pool, err = idParam(c, "resource_pool_id"); err != nil {
		return "", "", err
	}
	res, err = idParam(c, "resource_id")
	return pool, res, err
}

// addPoolResource puts a project in a pool: the pool is checked first,
// then the project, as GNS3 3.x does. Putting a project in a pool gives
// the pool's ACEs on it, so the caller must be able to change it.
func (a *API) addPoolResource(r *accessRoutes) func(*fiber.Ctx, access.User) error {
	return func(c *fiber.Ctx, me access.User) error {
		poolID, projectID, err := poolResource(c)
		if err != nil {
			return err
		}
		if _, err := r.svc.Pool(poolID); err != nil {
			return err
		}
		p, err := a.projects.Project(projectID)
		if err != nil || !me.Superadmin && !r.svc.Allowed(me.ID, "Project.Audit", "/projects/"+projectID) {
			return &accessError{fiber.StatusNotFound, "Project ID " + projectID + " doesn't exist"}
		}
		if !me.Superadmin && !r.svc.Allowed(me.ID, "Project.Modify", "/projects/"+projectID) {
			return denied("Project.Modify")
		}
		if err := r.svc.AddPoolResource(c.UserContext(), poolID, projectID, p.Name); err != nil {
			return err
		}
		return noContent(c)
	}
}

func (r *accessRoutes) removePoolResource(c *fiber.Ctx, _ access.User) error {
	poolID, projectID, err := poolResource(c)
	if err != nil {
		return err
	}
	if err := r.svc.RemovePoolResource(c.UserContext(), poolID, projectID); err != nil {
		return err
	}
	return noContent(c)
}

// Quotas.

// quotaJSON is a quota: its limits (null: no limit) and, in a reply,
// what its projects use now.
type quotaJSON struct {
	MaxNodes        *int64     `json:"max_nodes"`
	MaxRunningNodes *int64     `json:"max_running_nodes"`
	MaxRAMMB        *int64     `json:"max_ram_mb"`
	MaxCaptureBytes *int64     `json:"max_capture_bytes"`
	Usage           *usageJSON `json:"usage,omitempty"`
}

type usageJSON struct {
	Projects     int   `json:"projects"`
	Nodes        int64 `json:"nodes"`
	RunningNodes int64 `json:"running_nodes"`
	RAMMB        int64 `json:"ram_mb"`
	CaptureBytes int64 `json:"capture_bytes"`
}

func limitOrNull(v int64) *int64 {
	if v == access.NoLimit {
		return nil
	}
	return &v
}

// quotaSubject is the quota route's subject, which must exist.
func (a *API) quotaSubject(c *fiber.Ctx, kind, param string) (string, error) {
	id, err := idParam(c, param)
	if err != nil {
		return "", err
	}
	if _, err := a.cfg.Access.Quota(kind, id); err != nil {
		return "", err
	}
	return id, nil
}

func (a *API) getQuota(kind, param string) func(*fiber.Ctx, access.User) error {
	return func(c *fiber.Ctx, me access.User) error {
		id, err := a.quotaSubject(c, kind, param)
		if err != nil {
			return err
		}
		own := kind == access.QuotaUser && id == me.ID
		if kind == access.QuotaGroup {
			for _, g := range a.cfg.Access.UserGroups(me.ID) {
				own = own || g.ID == id
			}
		}
		if kind != access.QuotaPool && !own && !a.cfg.Access.Administrator(me.ID) {
			return &accessError{fiber.StatusForbidden, "Permission denied (a quota is its user's, its group's members' and the administrators' to read)"}
		}
		l, _ := a.cfg.Access.Quota(kind, id)
		ids := a.cfg.Access.QuotaProjects(kind, id)
		u := a.projects.Usage(ids)
		return c.JSON(quotaJSON{limitOrNull(l.Nodes), limitOrNull(l.RunningNodes), limitOrNull(l.RAMMB), limitOrNull(l.CaptureBytes),
			&usageJSON{len(ids), u.Nodes, u.Running, u.RAMMB, u.CaptureBytes}})
	}
}

func (a *API) putQuota(kind, param string) func(*fiber.Ctx, access.User) error {
	return func(c *fiber.Ctx, me access.User) error {
		if !a.cfg.Access.Administrator(me.ID) {
			return &accessError{fiber.StatusForbidden, "Permission denied (only an administrator sets quotas)"}
		}
		id, err := a.quotaSubject(c, kind, param)
		if err != nil {
			return err
		}
		var req struct {
			MaxNodes        opt[int64] `json:"max_nodes"`
			MaxRunningNodes opt[int64] `json:"max_running_nodes"`
			MaxRAMMB        opt[int64] `json:"max_ram_mb"`
			MaxCaptureBytes opt[int64] `json:"max_capture_bytes"`
		}
		if err := decodeBody(c, &req); err != nil {
			return err
		}
		limit := func(o opt[int64]) int64 {
			if p := o.ptr(); p != nil {
				return *p
			}
			return access.NoLimit
		}
		for _, o := range []opt[int64]{req.MaxNodes, req.MaxRunningNodes, req.MaxRAMMB, req.MaxCaptureBytes} {
			if p := o.ptr(); p != nil && *p < 0 {
				return unprocessable("quota limits must be null (no limit) or at least 0")
			}
		}
		l := access.Limits{Nodes: limit(req.MaxNodes), RunningNodes: limit(req.MaxRunningNodes), RAMMB: limit(req.MaxRAMMB),
			CaptureBytes: limit(req.MaxCaptureBytes)}
		if err := a.cfg.Access.SetQuota(c.UserContext(), kind, id, l); err != nil {
			return err
		}
		return a.getQuota(kind, param)(c, me)
	}
}

// quotas is the adapter controller/project asks which quotas a change
// keeps (project.Config.Quotas): the access database's.
type quotas struct{ svc *access.Service }

// Quotas returns what project.Config.Quotas takes from the access
// database svc.
func Quotas(svc *access.Service) project.Quotas { return quotas{svc} }

func (q quotas) For(projectID string) []project.Quota {
	qs := q.svc.QuotasFor(projectID)
	out := make([]project.Quota, 0, len(qs))
	for _, s := range qs {
		out = append(out, project.Quota{Scope: s.Scope, Projects: s.Projects,
			Max: project.Usage{Nodes: s.Max.Nodes, Running: s.Max.RunningNodes, RAMMB: s.Max.RAMMB, CaptureBytes: s.Max.CaptureBytes}})
	}
	return out
}

// recordOwner records the maker of a project as its owner: the project
// counts against its quotas.
func (a *API) recordOwner(u access.User, projectID string) {
	if err := a.cfg.Access.SetOwner(a.cfg.Context, projectID, u.ID); err != nil {
		a.log.Error("the maker of a project was not recorded as its owner", "user", u.Username, "project_id", projectID, "err", err)
	}
}

// forgetOwner drops the owner and pool memberships of a deleted project.
func (a *API) forgetOwner(projectID string) {
	if err := a.cfg.Access.ForgetProject(a.cfg.Context, projectID); err != nil {
		a.log.Error("a deleted project's owner and pools were not dropped", "project_id", projectID, "err", err)
	}
}

// madeOverQuota undoes a project just made whose nodes take one of its
// quotas past its limit (a duplicate, an import: their nodes come in
// together, not through the checked node creation) and answers 409 as a
// refused node creation does. It reports whether it did.
func (a *API) madeOverQuota(c *fiber.Ctx, projectID string) bool {
	own := a.projects.Usage([]string{projectID})
	for _, q := range a.cfg.Access.QuotasFor(projectID) {
		used := a.projects.Usage(q.Projects)
		for _, d := range []struct {
			name           string
			own, used, max int64
			unit           string
		}{
			{"nodes", own.Nodes, used.Nodes, q.Max.Nodes, ""},
			{"running nodes", own.Running, used.Running, q.Max.RunningNodes, ""},
			{"RAM", own.RAMMB, used.RAMMB, q.Max.RAMMB, " MB"},
		} {
			if d.own == 0 || d.max < 0 || d.used <= d.max {
				continue
			}
			if err := a.projects.DeleteProject(a.cfg.Context, projectID); err != nil {
				a.log.Error("a project made over its quota was not undone", "project_id", projectID, "quota", q.Scope, "err", err)
				return false
			}
			a.forgetOwner(projectID)
			c.Response().ResetBody()
			c.Status(fiber.StatusConflict).JSON(fiber.Map{"message": fmt.Sprintf("quota exceeded: %s %d/%d%s for %s (this needs %d more)",
				d.name, d.used-d.own, d.max, d.unit, q.Scope, d.own), "status": fiber.StatusConflict})
			return true
		}
	}
	return false
}
