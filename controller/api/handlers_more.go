package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// basicAuth checks HTTP Basic credentials as GNS3 does: a failure is 401
// with an empty body, GNS3's realm, and the connection closed. Console
// WebSocket paths are exempt (GNS3 exempts them too).
func (a *API) basicAuth(c *fiber.Ctx) error {
	if strings.HasSuffix(c.Path(), "console/ws") {
		return c.Next()
	}
	ip := c.Context().RemoteIP().String()
	if wait := a.auth.blocked(ip); wait > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfter(wait)))
		return fiber.NewError(fiber.StatusTooManyRequests, "Too many failed authentication attempts from "+ip+": try again later")
	}
	header := c.Get(fiber.HeaderAuthorization)
	user, pass, ok := parseBasic(header)
	// Compare both, always, in constant time: no early exit tells which
	// one was wrong.
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(a.cfg.User)) == 1
	okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(a.cfg.Password)) == 1
	if ok && okUser && okPass {
		return c.Next()
	}
	if header != "" {
		a.auth.failed(ip, user)
	}
	c.Set(fiber.HeaderWWWAuthenticate, `Basic realm="GNS3 server"`)
	c.Set(fiber.HeaderConnection, "close")
	c.Response().Header.SetNoDefaultContentType(true)
	c.Status(fiber.StatusUnauthorized) // SendStatus would add a text body
	return nil
}

func parseBasic(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}

func (a *API) checkVersion(c *fiber.Ctx) error {
	var req struct {
		Version string `json:"version"`
	}
	if err := a.decode(c, "version_check", &req); err != nil {
		return err
	}
	if req.Version != a.cfg.Version {
		return &project.Error{Kind: project.ErrConflict,
			Msg: fmt.Sprintf("Client version %s is not the same as server version %s", req.Version, a.cfg.Version)}
	}
	return c.JSON(fiber.Map{"version": a.cfg.Version})
}

// computeJSONOf is a compute as GNS3 shows it. Our agents speak proto,
// versioned on its own; to GNS3 clients a connected agent is a compute of
// the version the controller reports.
func (a *API) computeJSONOf(cp compute.Compute) computeJSON {
	j := computeFrom(cp)
	if cp.Connected {
		j.Capabilities.Version = &a.cfg.Version
	}
	return j
}

// computeRequest is the body of POST and PUT /v2/computes.
type computeRequest struct {
	ComputeID *string `json:"compute_id"`
	Name      *string `json:"name"`
	Protocol  *string `json:"protocol"`
	Host      *string `json:"host"`
	Port      *int    `json:"port"`
	User      *string `json:"user"`
	Password  *string `json:"password"`
	// UseSecret asks for the controller-wide secret (labtap).
	UseSecret bool `json:"use_controller_secret"`
}

// grantOf is what a compute request offers for the controller's secret.
func grantOf(c *fiber.Ctx, req computeRequest) compute.Grant {
	return compute.Grant{Presented: c.Get(proto.SecretHeader), Ask: req.UseSecret}
}

func (a *API) createCompute(c *fiber.Ctx) error {
	var req computeRequest
	if err := a.decode(c, "compute_create", &req); err != nil {
		return err
	}
	cp := compute.Compute{Protocol: *req.Protocol, Host: *req.Host, Port: *req.Port}
	set(&cp.ID, req.ComputeID)
	set(&cp.User, req.User)
	set(&cp.Password, req.Password)
	set(&cp.Name, req.Name)
	if cp.ID == "" {
		cp.ID = uuid.NewString()
	}
	if cp.Name == "" {
		cp.Name = defaultComputeName(cp)
	}
	got, err := a.computes.Create(c.UserContext(), cp, grantOf(c, req))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(a.computeJSONOf(got))
}

// defaultComputeName is GNS3's: "<protocol>://[<user>@]<host>:<port>", with
// a user over 14 characters cut to 11 and "...".
func defaultComputeName(c compute.Compute) string {
	user := c.User
	if len(user) > 14 {
		user = user[:11] + "..."
	}
	if user != "" {
		user += "@"
	}
	return fmt.Sprintf("%s://%s%s:%d", c.Protocol, user, c.Host, c.Port)
}

func (a *API) getCompute(c *fiber.Ctx) error {
	cp, ok := a.computes.Get(c.Params("compute_id"))
	if !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + c.Params("compute_id") + " doesn't exist"}
	}
	return c.JSON(a.computeJSONOf(cp))
}

// dockerImages lists a compute's Docker images for the GUI's docker
// template wizard (nodes-docker-qemu.md 3.10).
func (a *API) dockerImages(c *fiber.Ctx) error {
	id := computeOf(c)
	if _, ok := a.computes.Get(id); !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	tags, err := a.computes.DockerImages(c.UserContext(), id)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(tags))
	for _, t := range tags {
		out = append(out, fiber.Map{"image": t})
	}
	return c.JSON(out)
}

func (a *API) updateCompute(c *fiber.Ctx) error {
	var req computeRequest
	if err := a.decode(c, "compute_update", &req); err != nil {
		return err
	}
	got, err := a.computes.Update(c.UserContext(), c.Params("compute_id"), compute.ComputeUpdate{
		Name: req.Name, Protocol: req.Protocol, Host: req.Host, Port: req.Port, User: req.User, Password: req.Password,
		Grant: grantOf(c, req),
	})
	if err != nil {
		return err
	}
	return c.JSON(a.computeJSONOf(got))
}

// deleteCompute closes the projects that use the compute, then forgets it;
// an unknown id is a 204 too (GNS3).
func (a *API) deleteCompute(c *fiber.Ctx) error {
	id := c.Params("compute_id")
	if id == compute.LocalID {
		return &project.Error{Kind: project.ErrConflict, Msg: "The local compute cannot be deleted"}
	}
	if _, ok := a.computes.Get(id); ok {
		a.projects.CloseProjectsOn(c.UserContext(), id)
		if err := a.computes.Remove(id); err != nil {
			return err
		}
	}
	return noContent(c)
}

// projectUpdateRequest is the body of PUT /v2/projects/{project_id}.
type projectUpdateRequest struct {
	Name *string `json:"name"`
	Path *string `json:"path"`
	projectSettings
}

func (a *API) updateProject(c *fiber.Ctx) error {
	var r projectUpdateRequest
	if err := a.decode(c, "project_update", &r); err != nil {
		return err
	}
	p, err := a.projects.UpdateProject(c.UserContext(), c.Params("project_id"), project.ProjectUpdate{
		Name: r.Name, Path: r.Path, SettingsUpdate: project.SettingsUpdate(r.projectSettings),
	})
	if err != nil {
		return err
	}
	return c.JSON(projectFrom(p))
}

func (a *API) openProject(c *fiber.Ctx) error {
	p, err := a.projects.OpenProject(c.UserContext(), c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}

func (a *API) closeProject(c *fiber.Ctx) error {
	if err := a.projects.CloseProject(c.UserContext(), c.Params("project_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (a *API) projectStats(c *fiber.Ctx) error {
	st, err := a.projects.ProjectStats(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"drawings": st.Drawings, "links": st.Links, "nodes": st.Nodes, "snapshots": st.Snapshots})
}

// allNodes is a bulk operation on every node of a project: 204.
func (a *API) allNodes(do func(ctx context.Context, projectID string) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := do(c.UserContext(), c.Params("project_id")); err != nil {
			return err
		}
		return noContent(c)
	}
}

// nodeStatus answers a node start/stop/suspend/reload with the node.
func (a *API) nodeStatus(do func(ctx context.Context, projectID, nodeID string) (project.Node, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		n, err := do(c.UserContext(), c.Params("project_id"), c.Params("node_id"))
		if err != nil {
			return err
		}
		return c.JSON(nodeFrom(n))
	}
}

// nodeUpdateRequest is the body of PUT .../nodes/{node_id}. The GUI always
// sends node_id, node_type, compute_id and properties; read-only members
// (status, ports, width, height, project_id, template_id, node_directory,
// command_line, console_host) are accepted and ignored, so a node sent
// back as it was read is fine (GNS3 crashes on them).
type nodeUpdateRequest struct {
	Name             *string           `json:"name"`
	X                *int              `json:"x"`
	Y                *int              `json:"y"`
	Z                *int              `json:"z"`
	Locked           *bool             `json:"locked"`
	Symbol           *string           `json:"symbol"`
	Label            project.Label     `json:"label"`
	PortNameFormat   *string           `json:"port_name_format"`
	PortSegmentSize  *int              `json:"port_segment_size"`
	FirstPortName    *string           `json:"first_port_name"`
	ConsoleAutoStart *bool             `json:"console_auto_start"`
	Properties       map[string]any    `json:"properties"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	Console          *int              `json:"console"`
	ConsoleType      *string           `json:"console_type"`
}

func (a *API) updateNode(c *fiber.Ctx) error {
	var r nodeUpdateRequest
	if err := a.decode(c, "node_update", &r); err != nil {
		return err
	}
	n, err := a.projects.UpdateNode(c.UserContext(), c.Params("project_id"), c.Params("node_id"), project.NodeUpdate{
		Name: r.Name, X: r.X, Y: r.Y, Z: r.Z, Locked: r.Locked, Symbol: r.Symbol, Label: r.Label,
		PortNameFormat: r.PortNameFormat, PortSegmentSize: r.PortSegmentSize, FirstPortName: r.FirstPortName,
		ConsoleAutoStart: r.ConsoleAutoStart, Properties: r.Properties, CustomAdapters: r.CustomAdapters,
		Console: r.Console, ConsoleType: r.ConsoleType,
	})
	if err != nil {
		return err
	}
	return c.JSON(nodeFrom(n))
}

func (a *API) nodeLinks(c *fiber.Ctx) error {
	list, err := a.projects.NodeLinks(c.Params("project_id"), c.Params("node_id"))
	if err != nil {
		return err
	}
	return c.JSON(mapAll(list, linkFrom))
}

// templateJSON is a template as GNS3 lists it.
type templateJSON struct {
	Builtin           bool           `json:"builtin"`
	Category          string         `json:"category"`
	ComputeID         *string        `json:"compute_id"`
	ConsoleType       string         `json:"console_type,omitempty"`
	DefaultNameFormat string         `json:"default_name_format"`
	Name              string         `json:"name"`
	Properties        map[string]any `json:"properties,omitempty"`
	Symbol            string         `json:"symbol"`
	TemplateID        string         `json:"template_id"`
	TemplateType      string         `json:"template_type"`
}

// templateFrom is a template as GNS3 shows it: a user template is its
// whole flat object.
func templateFrom(t project.Template) any {
	if t.Settings != nil {
		return t.Settings
	}
	return templateJSON{
		Builtin: t.Builtin, Category: t.Category, ConsoleType: t.ConsoleType, DefaultNameFormat: t.DefaultNameFormat,
		Name: t.Name, Properties: t.Properties, Symbol: t.Symbol, TemplateID: t.ID, TemplateType: t.Type,
	}
}

func (a *API) listTemplates(c *fiber.Ctx) error {
	return c.JSON(mapAll(a.projects.Templates(), templateFrom))
}

// getTemplate answers one template, with an ETag; a client that already
// holds it (If-None-Match) gets 304.
func (a *API) getTemplate(c *fiber.Ctx) error {
	t, err := a.projects.Template(c.Params("template_id"))
	if err != nil {
		return err
	}
	body, err := json.Marshal(templateFrom(t))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	c.Set(fiber.HeaderETag, etag)
	if c.Get(fiber.HeaderIfNoneMatch) == etag {
		c.Response().Header.SetNoDefaultContentType(true)
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

func (a *API) createFromTemplate(c *fiber.Ctx) error {
	var r struct {
		X         int     `json:"x"`
		Y         int     `json:"y"`
		Name      *string `json:"name"`
		ComputeID *string `json:"compute_id"`
	}
	if err := a.decode(c, "template_create", &r); err != nil {
		return err
	}
	req := project.FromTemplate{X: r.X, Y: r.Y}
	set(&req.Name, r.Name)
	set(&req.ComputeID, r.ComputeID)
	n, err := a.projects.CreateFromTemplate(c.UserContext(), c.Params("project_id"), c.Params("template_id"), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(nodeFrom(n))
}

// linkUpdateRequest is the body of PUT .../links/{link_id}.
type linkUpdateRequest struct {
	Nodes *[]struct {
		NodeID string        `json:"node_id"`
		Label  project.Label `json:"label"`
	} `json:"nodes"`
	Filters   map[string][]any `json:"filters"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Suspend   *bool            `json:"suspend"`
}

// updateLink answers 201, as GNS3 does for this PUT.
func (a *API) updateLink(c *fiber.Ctx) error {
	var r linkUpdateRequest
	if err := a.decode(c, "link_update", &r); err != nil {
		return err
	}
	u := project.LinkUpdate{Style: r.LinkStyle, Suspend: r.Suspend}
	if r.Filters != nil {
		u.Filters = r.Filters
	}
	if r.Nodes != nil {
		u.Labels = []project.Endpoint{}
		for _, n := range *r.Nodes {
			u.Labels = append(u.Labels, project.Endpoint{NodeID: n.NodeID, Label: n.Label})
		}
	}
	l, err := a.projects.UpdateLink(c.UserContext(), c.Params("project_id"), c.Params("link_id"), u)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

// filterJSON is one entry of available_filters.
type filterJSON struct {
	Description string      `json:"description"`
	Name        string      `json:"name"`
	Parameters  []paramJSON `json:"parameters"`
	Type        string      `json:"type"`
}

type paramJSON struct {
	Maximum *int   `json:"maximum,omitempty"`
	Minimum *int   `json:"minimum,omitempty"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Unit    string `json:"unit,omitempty"`
}

func (a *API) availableFilters(c *fiber.Ctx) error {
	list, err := a.projects.AvailableFilters(c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		return err
	}
	out := make([]filterJSON, 0, len(list))
	for _, f := range list {
		fj := filterJSON{Description: f.Description, Name: f.Name, Type: f.Type, Parameters: []paramJSON{}}
		for _, p := range f.Params {
			pj := paramJSON{Name: p.Name, Type: p.Type, Unit: p.Unit}
			if p.Type == "int" {
				lo, hi := p.Min, p.Max
				pj.Minimum, pj.Maximum = &lo, &hi
			}
			fj.Parameters = append(fj.Parameters, pj)
		}
		out = append(out, fj)
	}
	return c.JSON(out)
}

func (a *API) openAPI(c *fiber.Ctx) error {
	return c.JSON(a.OpenAPI())
}
