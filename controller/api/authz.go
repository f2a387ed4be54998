package api

import (
	"strings"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// Authorisation of the /v2 routes. Each route has one entry in
// permissions: the privilege GNS3 3.x asks for it (its names, its
// built-in roles) and the resource path it is checked on, written as a
// template whose {names} are the route's parameters. handle checks it
// before the handler runs, so no handler is reached by a request that
// may not do what it asks, and nothing refused changes anything. A route
// with no entry is the administrators' alone (TestEveryRouteHasAPermission
// keeps the table whole).
//
// What a caller may not see answers as what does not exist: a request
// on a project (template, compute) the caller may not audit gets the
// very reply of an absent one, so that ids tell nothing; one it may see
// but not change gets 403 with GNS3 3.x's message. Lists (projects,
// templates, computes) hold what the caller may audit.
//
// Where labtap asks more than GNS3 3.x: computes need Compute.Audit and
// templates Template.Audit (GNS3 asks only for a login); an export needs
// Project.Allocate (a whole copy; an Auditor reads but does not take);
// the controller's own switches (shutdown, debug, the IOU licence and
// GNS3 VM settings, /metrics and the profiles) are the administrators':
// the super admin, or a holder of the Administrator role on "/".

// permission is what a route asks of its caller.
type permission struct {
	// privilege is checked on on; "" asks only for an authenticated user
	// (the handler filters what it lists, or nothing is private).
	privilege string
	// on is the resource path template, GNS3 3.x's ("/projects/{project_id}/nodes/{node_id}").
	on string
	// also is a second privilege and path both needed (a duplicate reads
	// one object and makes another).
	also *permission
	// admin: for administrators only.
	admin bool
	// orCollection: when the project does not exist yet, the privilege
	// is checked on /projects (an import makes it).
	orCollection bool
	// owns: a 2xx reply's project_id is a project the caller made, of
	// which it gets the User role; drops: the 2xx deletes the project
	// and its ACEs.
	owns, drops bool
	// path fills on from a request's path, set by permissionOf.
	path func(reqPath string) string
}

func on(privilege, path string) permission { return permission{privilege: privilege, on: path} }

var (
	authOnly  = permission{}
	adminOnly = permission{admin: true}
)

const (
	pProject  = "/projects/{project_id}"
	pNode     = pProject + "/nodes/{node_id}"
	pLink     = pProject + "/links/{link_id}"
	pCompute  = "/computes/{compute_id}"
	pLocal    = "/computes/local"
	pTemplate = "/templates/{template_id}"
)

// permissions maps each /v2 route (and the pages beside it) to what it
// asks.
var permissions = map[Route]permission{
	{"GET", "/v2/version"}:                     authOnly,
	{"POST", "/v2/version"}:                    authOnly,
	{"GET", "/v2/openapi.json"}:                authOnly,
	{"GET", "/"}:                               authOnly, // the capture view's page: links are asked for one by one
	{"GET", "/ui/{asset}"}:                     authOnly,
	{"GET", "/metrics"}:                        adminOnly,
	{"POST", "/v2/debug"}:                      adminOnly,
	{"POST", "/v2/shutdown"}:                   adminOnly,
	{"GET", "/v2/gns3vm"}:                      authOnly,
	{"PUT", "/v2/gns3vm"}:                      adminOnly,
	{"GET", "/v2/gns3vm/engines"}:              authOnly,
	{"GET", "/v2/gns3vm/engines/{engine}/vms"}: authOnly,
	{"GET", "/v2/iou_license"}:                 authOnly,
	{"PUT", "/v2/iou_license"}:                 adminOnly,
	{"GET", "/v2/statistics"}:                  on("Compute.Audit", "/computes"),
	{"GET", "/v2/appliances"}:                  on("Appliance.Audit", "/appliances"),
	{"GET", "/v2/notifications"}:               authOnly, // the stream carries only what the caller may see
	{"GET", "/v2/notifications/ws"}:            authOnly,

	// Computes.
	{"GET", "/v2/computes"}:  authOnly, // filtered
	{"POST", "/v2/computes"}: on("Compute.Allocate", "/computes"),
	// A join token lets an agent become a compute: as adding one.
	{"POST", "/v3/computes/join-tokens"}:                         on("Compute.Allocate", "/computes"),
	{"GET", "/v2/computes/{compute_id}"}:                         on("Compute.Audit", pCompute),
	{"PUT", "/v2/computes/{compute_id}"}:                         on("Compute.Modify", pCompute),
	{"DELETE", "/v2/computes/{compute_id}"}:                      on("Compute.Allocate", pCompute),
	{"POST", "/v2/computes/{compute_id}/drain"}:                  on("Compute.Modify", pCompute), // labtap's: a change of the compute
	{"POST", "/v2/computes/{compute_id}/undrain"}:                on("Compute.Modify", pCompute),
	{"GET", "/v2/computes/{compute_id}/nodes"}:                   on("Compute.Audit", pCompute),  // labtap's: lists only the nodes the caller may audit
	{"POST", "/v2/computes/{compute_id}/recover"}:                on("Compute.Modify", pCompute), // labtap's: like a drain with move
	{"GET", "/v2/computes/{compute_id}/docker/images"}:           on("Image.Audit", "/images"),
	{"GET", "/v2/computes/{compute_id}/network/interfaces"}:      on("Compute.Audit", pCompute),
	{"GET", "/v2/computes/{compute_id}/qemu/images"}:             on("Image.Audit", "/images"),
	{"POST", "/v2/computes/{compute_id}/qemu/images/{filename}"}: on("Image.Allocate", "/images"),
	{"POST", "/v2/computes/{compute_id}/qemu/img"}:               on("Image.Allocate", "/images"),
	{"PUT", "/v2/computes/{compute_id}/qemu/img"}:                on("Image.Allocate", "/images"),
	{"GET", "/v2/computes/{compute_id}/qemu/binaries"}:           on("Compute.Audit", pCompute),
	{"GET", "/v2/computes/{compute_id}/qemu/img-binaries"}:       on("Compute.Audit", pCompute),
	{"GET", "/v2/computes/{compute_id}/qemu/capabilities"}:       on("Compute.Audit", pCompute),
	{"GET", "/v2/computes/{compute_id}/iou/images"}:              on("Image.Audit", "/images"),
	{"GET", "/v2/computes/{compute_id}/dynamips/images"}:         on("Image.Audit", "/images"),
	{"GET", "/v2/computes/{compute_id}/virtualbox/vms"}:          on("Compute.Audit", pCompute),
	{"GET", "/v2/computes/{compute_id}/vmware/vms"}:              on("Compute.Audit", pCompute),
	{"POST", "/v2/computes/{compute_id}/auto_idlepc"}:            on("Compute.Audit", pCompute),
	{"GET", rEndpoint}: on("Compute.Audit", pCompute),
	{"GET", rForward}:  on("Compute.Audit", pCompute),
	{"POST", rForward}: on("Compute.Modify", pCompute),
	{"PUT", rForward}:  on("Compute.Modify", pCompute),
	// The controller's own compute, GNS3's local one.
	{"GET", "/v2/compute/network/interfaces"}:             on("Compute.Audit", pLocal),
	{"GET", "/v2/compute/docker/images"}:                  on("Image.Audit", "/images"),
	{"GET", "/v2/compute/qemu/images"}:                    on("Image.Audit", "/images"),
	{"POST", "/v2/compute/qemu/images/{filename:.+}"}:     on("Image.Allocate", "/images"),
	{"GET", "/v2/compute/qemu/images/{filename:.+}"}:      on("Image.Audit", "/images"),
	{"POST", "/v2/compute/qemu/img"}:                      on("Image.Allocate", "/images"),
	{"PUT", "/v2/compute/qemu/img"}:                       on("Image.Allocate", "/images"),
	{"GET", "/v2/compute/iou/images"}:                     on("Image.Audit", "/images"),
	{"GET", "/v2/compute/dynamips/images"}:                on("Image.Audit", "/images"),
	{"GET", "/v2/compute/virtualbox/vms"}:                 on("Compute.Audit", pLocal),
	{"GET", "/v2/compute/vmware/vms"}:                     on("Compute.Audit", pLocal),
	{"POST", "/v2/compute/iou/images/{filename:.+}"}:      on("Image.Allocate", "/images"),
	{"POST", "/v2/compute/dynamips/images/{filename:.+}"}: on("Image.Allocate", "/images"),

	// Projects.
	{"GET", "/v2/projects"}:                      authOnly, // filtered
	{"POST", "/v2/projects"}:                     {privilege: "Project.Allocate", on: "/projects", owns: true},
	{"POST", "/v2/projects/load"}:                {privilege: "Project.Allocate", on: "/projects", owns: true},
	{"GET", pV2(pProject)}:                       on("Project.Audit", pProject),
	{"PUT", pV2(pProject)}:                       on("Project.Modify", pProject),
	{"DELETE", pV2(pProject)}:                    {privilege: "Project.Allocate", on: pProject, drops: true},
	{"POST", pV2(pProject + "/open")}:            on("Project.Allocate", pProject),
	{"POST", pV2(pProject + "/close")}:           on("Project.Allocate", pProject),
	{"GET", pV2(pProject + "/stats")}:            on("Project.Audit", pProject),
	{"GET", pV2(pProject + "/notifications")}:    on("Project.Audit", pProject),
	{"GET", pV2(pProject + "/notifications/ws")}: on("Project.Audit", pProject),
	{"GET", pV2(pProject + "/export")}:           on("Project.Allocate", pProject),
	{"POST", pV2(pProject + "/import")}:          {privilege: "Project.Allocate", on: pProject, orCollection: true, owns: true},
	{"POST", pV2(pProject + "/duplicate")}:       {privilege: "Project.Audit", on: pProject, also: &permission{privilege: "Project.Allocate", on: "/projects"}, owns: true},
	{"GET", pV2(pProject + "/files/{path:.+}")}:  on("Project.Audit", pProject),
	{"POST", pV2(pProject + "/files/{path:.+}")}: on("Project.Modify", pProject),
	{"POST", pV2(pProject + "/start_capture")}:   on("Link.Capture", pProject+"/links"),
	{"POST", pV2(pProject + "/stop_capture")}:    on("Link.Capture", pProject+"/links"),
	{"GET", pV2(pProject + "/pcap")}:             on("Link.Capture", pProject+"/links"),
	// The project's capture files, running or stopped: their packets are
	// a capture's, so reading or deleting one asks what capturing does.
	{"GET", pV2(pProject + "/captures")}:                                  on("Link.Audit", pProject+"/links"),
	{"GET", pV2(pProject + "/captures/{compute_id}/{file_name}")}:         on("Link.Capture", pProject+"/links"),
	{"DELETE", pV2(pProject + "/captures/{compute_id}/{file_name}")}:      on("Link.Capture", pProject+"/links"),
	{"GET", pV2(pProject + "/captures/{compute_id}/{file_name}/view")}:    on("Link.Capture", pProject+"/links"),
	{"GET", pV2(pProject + "/captures/{compute_id}/{file_name}/packets")}: on("Link.Capture", pProject+"/links"),
	{"POST", pV2(pProject + "/templates/{template_id}")}:                  {privilege: "Node.Allocate", on: pProject + "/nodes", also: &permission{privilege: "Template.Audit", on: pTemplate}},

	// Nodes.
	{"GET", pV2(pProject + "/nodes")}:                on("Node.Audit", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes")}:               on("Node.Allocate", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes/start")}:         on("Node.PowerMgmt", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes/stop")}:          on("Node.PowerMgmt", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes/suspend")}:       on("Node.PowerMgmt", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes/reload")}:        on("Node.PowerMgmt", pProject+"/nodes"),
	{"POST", pV2(pProject + "/nodes/console/reset")}: on("Node.Console", pProject+"/nodes"),
	{"GET", pV2(pNode)}:                              on("Node.Audit", pNode),
	{"PUT", pV2(pNode)}:                              on("Node.Modify", pNode),
	{"DELETE", pV2(pNode)}:                           on("Node.Allocate", pNode),
	{"POST", pV2(pNode + "/start")}:                  on("Node.PowerMgmt", pNode),
	{"POST", pV2(pNode + "/stop")}:                   on("Node.PowerMgmt", pNode),
	{"POST", pV2(pNode + "/suspend")}:                on("Node.PowerMgmt", pNode),
	{"POST", pV2(pNode + "/reload")}:                 on("Node.PowerMgmt", pNode),
	{"GET", pV2(pNode + "/links")}:                   on("Link.Audit", pNode),
	{"POST", pV2(pNode + "/resize_disk")}:            on("Node.Allocate", pNode),
	{"POST", pV2(pNode + "/console/reset")}:          on("Node.Console", pNode),
	{"GET", pV2(pNode + "/console/ws")}:              on("Node.Console", pNode),
	{"POST", pV2(pNode + "/duplicate")}:              on("Node.Allocate", pNode),
	{"POST", pV2(pNode + "/move")}:                   on("Node.Modify", pNode), // labtap's: a change of the node
	{"GET", pV2(pNode + "/files/{path:.+}")}:         on("Node.Audit", pNode),
	{"POST", pV2(pNode + "/files/{path:.+}")}:        on("Node.Modify", pNode),

	// Links and captures.
	{"GET", pV2(pProject + "/links")}:          on("Link.Audit", pProject+"/links"),
	{"POST", pV2(pProject + "/links")}:         on("Link.Allocate", pProject+"/links"),
	{"GET", pV2(pLink)}:                        on("Link.Audit", pLink),
	{"PUT", pV2(pLink)}:                        on("Link.Modify", pLink),
	{"DELETE", pV2(pLink)}:                     on("Link.Allocate", pLink),
	{"GET", pV2(pLink + "/available_filters")}: on("Link.Audit", pLink),
	{"POST", pV2(pLink + "/start_capture")}:    on("Link.Capture", pLink),
	{"POST", pV2(pLink + "/stop_capture")}:     on("Link.Capture", pLink),
	{"GET", pV2(pLink + "/pcap")}:              on("Link.Capture", pLink),
	{"GET", pV2(pLink + "/capture_file")}:      on("Link.Capture", pLink),
	{"GET", pV2(pLink + "/view")}:              on("Link.Capture", pLink),
	{"GET", pV2(pLink + "/packets")}:           on("Link.Capture", pLink),

	// Drawings and snapshots.
	{"GET", pV2(pProject + "/drawings")}:                         on("Drawing.Audit", pProject+"/drawings"),
	{"POST", pV2(pProject + "/drawings")}:                        on("Drawing.Allocate", pProject+"/drawings"),
	{"GET", pV2(pProject + "/drawings/{drawing_id}")}:            on("Drawing.Audit", pProject+"/drawings/{drawing_id}"),
	{"PUT", pV2(pProject + "/drawings/{drawing_id}")}:            on("Drawing.Modify", pProject+"/drawings/{drawing_id}"),
	{"DELETE", pV2(pProject + "/drawings/{drawing_id}")}:         on("Drawing.Allocate", pProject+"/drawings/{drawing_id}"),
	{"GET", pV2(pProject + "/snapshots")}:                        on("Snapshot.Audit", pProject+"/snapshots"),
	{"POST", pV2(pProject + "/snapshots")}:                       on("Snapshot.Allocate", pProject+"/snapshots"),
	{"DELETE", pV2(pProject + "/snapshots/{snapshot_id}")}:       on("Snapshot.Allocate", pProject+"/snapshots/{snapshot_id}"),
	{"POST", pV2(pProject + "/snapshots/{snapshot_id}/restore")}: on("Snapshot.Restore", pProject+"/snapshots/{snapshot_id}"),

	// Templates.
	{"GET", "/v2/templates"}:                authOnly, // filtered
	{"POST", "/v2/templates"}:               on("Template.Allocate", "/templates"),
	{"GET", pV2(pTemplate)}:                 on("Template.Audit", pTemplate),
	{"PUT", pV2(pTemplate)}:                 on("Template.Modify", pTemplate),
	{"DELETE", pV2(pTemplate)}:              on("Template.Allocate", pTemplate),
	{"POST", pV2(pTemplate + "/duplicate")}: {privilege: "Template.Audit", on: pTemplate, also: &permission{privilege: "Template.Allocate", on: "/templates"}},

	// Symbols.
	{"GET", "/v2/symbols"}:                           on("Symbol.Audit", "/symbols"),
	{"GET", "/v2/default_symbols"}:                   on("Symbol.Audit", "/symbols"),
	{"GET", "/v2/symbols/{symbol_id:.+}/raw"}:        on("Symbol.Audit", "/symbols"),
	{"GET", "/v2/symbols/{symbol_id:.+}/dimensions"}: on("Symbol.Audit", "/symbols"),
	{"POST", "/v2/symbols/{symbol_id:.+}/raw"}:       on("Symbol.Allocate", "/symbols"),
}

func pV2(p string) string { return "/v2" + p }

// permissionOf is route r's permission: its entry, or the
// administrators' alone when it has none.
func permissionOf(r Route) permission {
	p, ok := permissions[r]
	if !ok {
		return adminOnly
	}
	p.path = compilePath(p.on, r.Template)
	if p.also != nil {
		also := *p.also
		also.path = compilePath(also.on, r.Template)
		p.also = &also
	}
	return p
}

// compilePath returns the function filling resource path template on
// with the segments of a request path of route template route: each
// {name} of on is the request path's segment where route has {name}
// (every name on uses stands before any greedy one in route).
func compilePath(on, route string) func(string) string {
	if !strings.Contains(on, "{") {
		return func(string) string { return on }
	}
	if "/v2"+on == route {
		// The request path is the resource path (Allowed drops /v2),
		// unless a segment is "." or "..", which Allowed would clean away.
		fill := compileFill(on, route)
		return func(reqPath string) string {
			if strings.Contains(reqPath, "/.") {
				return fill(reqPath)
			}
			return reqPath
		}
	}
	return compileFill(on, route)
}

// compileFill is compilePath's general case: on is built anew from the
// request path's segments.
func compileFill(on, route string) func(string) string {
	at := map[string]int{}
	for i, seg := range strings.Split(route, "/") {
		if strings.HasPrefix(seg, "{") {
			at[strings.Trim(seg, "{}")] = i
		}
	}
	type part struct {
		lit string
		seg int // -1: lit
	}
	var parts []part
	for i, seg := range strings.Split(on, "/") {
		if i > 0 {
			parts = append(parts, part{"/", -1})
		}
		if n, ok := at[strings.Trim(seg, "{}")]; ok && strings.HasPrefix(seg, "{") {
			parts = append(parts, part{"", n})
		} else {
			parts = append(parts, part{seg, -1})
		}
	}
	return func(reqPath string) string {
		var b strings.Builder
		b.Grow(len(on) + 2*36)
		for _, p := range parts {
			if p.seg < 0 {
				b.WriteString(p.lit)
			} else {
				b.WriteString(segment(reqPath, p.seg))
			}
		}
		return b.String()
	}
}

// segment is path's n-th segment ("" before the first "/" is the 0th).
func segment(path string, n int) string {
	for ; n > 0; n-- {
		i := strings.IndexByte(path, '/')
		if i < 0 {
			return ""
		}
		path = path[i+1:]
	}
	if i := strings.IndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return path
}

// authorize checks the request against p before its handler runs: nil
// when it may go on, else the error to answer (absent or 403).
func (a *API) authorize(c *fiber.Ctx, p permission) error {
	u, ok := a.caller(c)
	if !ok || u.Superadmin {
		return nil // an open server, or the super admin
	}
	if p.admin {
		if a.cfg.Access != nil && a.cfg.Access.Administrator(u.ID) {
			return nil
		}
		return &project.Error{Kind: project.ErrForbidden, Msg: "Permission denied (administrators only)"}
	}
	if p.privilege == "" {
		return nil
	}
	if p.orCollection {
		if _, err := a.projects.Project(c.Params("project_id")); err != nil {
			// Nothing there to hide: the project is to be made.
			if a.allowed(c, p.privilege, "/projects") {
				return nil
			}
			return deniedV2(p.privilege)
		}
		// The id is taken: whoever imports it learns that much, however
		// it is answered (an absent one would be made). GNS3's 403.
		if !a.allowed(c, p.privilege, p.path(c.Path())) {
			return deniedV2(p.privilege)
		}
		return nil
	}
	if a.allowed(c, p.privilege, p.path(c.Path())) &&
		(p.also == nil || a.allowed(c, p.also.privilege, p.also.path(c.Path()))) {
		return nil
	}
	if err := a.hidden(c, p); err != nil {
		return err
	}
	if p.also != nil && a.allowed(c, p.privilege, p.path(c.Path())) {
		if err := a.hidden(c, *p.also); err != nil {
			return err
		}
		return deniedV2(p.also.privilege)
	}
	return deniedV2(p.privilege)
}

// hidden is the reply of an absent object when p's object is one the
// caller may not audit; nil when it may.
func (a *API) hidden(c *fiber.Ctx, p permission) error {
	switch {
	case strings.HasPrefix(p.on, pProject):
		id := c.Params("project_id")
		if !a.allowed(c, "Project.Audit", "/projects/"+id) {
			return &project.Error{Kind: project.ErrNotFound, Msg: "Project ID " + id + " doesn't exist"}
		}
	case strings.HasPrefix(p.on, pTemplate):
		id := c.Params("template_id")
		if !a.allowed(c, "Template.Audit", "/templates/"+id) {
			return &project.Error{Kind: project.ErrNotFound, Msg: "Template " + id + " doesn't exist"}
		}
	case strings.HasPrefix(p.on, pCompute):
		id := c.Params("compute_id")
		if !a.allowed(c, "Compute.Audit", "/computes/"+id) {
			return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
		}
	}
	return nil
}

// deniedV2 is GNS3 3.x's refusal of a privilege, as a /v2 error.
func deniedV2(privilege string) error {
	return &project.Error{Kind: project.ErrForbidden, Msg: "Permission denied (privilege " + privilege + " is required)"}
}

// afterwards keeps the ACL in step with what a route made or deleted:
// the maker of a project gets the User role on it; a deleted project's
// ACEs go with it.
func (a *API) afterwards(c *fiber.Ctx, p permission) {
	if !p.owns && !p.drops || a.cfg.Access == nil {
		return
	}
	if st := c.Response().StatusCode(); st < 200 || st > 299 {
		return
	}
	ctx := a.cfg.Context
	if p.drops {
		id := c.Params("project_id")
		if _, err := a.cfg.Access.DeleteACEsUnder(ctx, "/projects/"+id); err != nil {
			a.log.Error("the ACEs of a deleted project were not deleted", "project_id", id, "err", err)
		}
		a.forgetOwner(id) // pools.go
		return
	}
	u, ok := a.caller(c)
	if !ok || u.ID == "" {
		return
	}
	var made struct {
		ProjectID string `json:"project_id"`
	}
	if err := gojson.Unmarshal(c.Response().Body(), &made); err != nil || made.ProjectID == "" {
		a.log.Error("the project a user made is not known: it gets no ACE", "user", u.Username, "err", err)
		return
	}
	a.recordOwner(u, made.ProjectID) // pools.go
	if a.madeOverQuota(c, made.ProjectID) || u.Superadmin {
		return
	}
	if err := a.cfg.Access.GrantOwner(ctx, u.ID, "/projects/"+made.ProjectID); err != nil {
		a.log.Error("the maker of a project was not given it", "user", u.Username, "project_id", made.ProjectID, "err", err)
	}
}
