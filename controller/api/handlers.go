package api

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
	"github.com/labtap/labtap/internal/netguard"
)

// guiAgent is the User-Agent of a GNS3 GUI of a 2.2 release (a 2.1 GUI
// keeps templates itself and a 3.x GUI speaks /v3: those get the
// configured version, which they refuse).
var guiAgent = regexp.MustCompile(`^GNS3 QT Client v(2\.2\.\d+[.+a-z0-9-]*)$`)

func (a *API) version(c *fiber.Ctx) error {
	// "local" stays false: it is GNS3's --local mode, which labtap has not.
	v := a.cfg.Version
	ua := c.Get(fiber.HeaderUserAgent)
	if m := guiAgent.FindStringSubmatch(ua); m != nil && !a.cfg.PinVersion {
		v = m[1] // its own version, exactly: no mismatch warning either
	}
	if strings.HasPrefix(ua, "GNS3 QT Client") {
		a.log.Info("GNS3 GUI connecting", "client", ua, "answered", v, "remote", c.IP())
	}
	return c.JSON(versionJSON{Version: v})
}

func (a *API) listComputes(c *fiber.Ctx) error {
	return c.JSON(mapAll(a.computes.List(), a.computeJSONOf))
}

func (a *API) listProjects(c *fiber.Ctx) error {
	return c.JSON(mapAll(a.projects.Projects(), projectFrom))
}

// projectCreateRequest is the body of POST /v2/projects.
type projectCreateRequest struct {
	Name      string  `json:"name"`
	ProjectID *string `json:"project_id"`
	Path      string  `json:"path"`
	projectSettings
}

// projectSettings are the settings members of a project's POST and PUT
// bodies, all optional: project.SettingsUpdate's members, in its order, so
// that one converts to the other.
type projectSettings struct {
	AutoClose           *bool           `json:"auto_close"`
	AutoOpen            *bool           `json:"auto_open"`
	AutoStart           *bool           `json:"auto_start"`
	SceneHeight         *int            `json:"scene_height"`
	SceneWidth          *int            `json:"scene_width"`
	Zoom                *int            `json:"zoom"`
	GridSize            *int            `json:"grid_size"`
	DrawingGridSize     *int            `json:"drawing_grid_size"`
	ShowLayers          *bool           `json:"show_layers"`
	SnapToGrid          *bool           `json:"snap_to_grid"`
	ShowGrid            *bool           `json:"show_grid"`
	ShowInterfaceLabels *bool           `json:"show_interface_labels"`
	Supplier            json.RawMessage `json:"supplier"`
	Variables           json.RawMessage `json:"variables"`
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (r *projectCreateRequest) toCreate() project.ProjectCreate {
	s := project.DefaultSettings()
	project.SettingsUpdate(r.projectSettings).Apply(&s)
	req := project.ProjectCreate{Name: r.Name, Path: r.Path, Settings: s}
	set(&req.ID, r.ProjectID)
	return req
}

func (a *API) createProject(c *fiber.Ctx) error {
	var req projectCreateRequest
	if err := a.decode(c, "project_create", &req); err != nil {
		return err
	}
	p, err := a.projects.CreateProject(c.UserContext(), req.toCreate())
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}

func (a *API) getProject(c *fiber.Ctx) error {
	p, err := a.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(projectFrom(p))
}

func (a *API) deleteProject(c *fiber.Ctx) error {
	if err := a.projects.DeleteProject(c.UserContext(), c.Params("project_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (a *API) listNodes(c *fiber.Ctx) error {
	p, err := a.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	list, err := a.projects.Nodes(p.ID)
	if err != nil {
		return err
	}
	if p.Status == project.Closed {
		return c.JSON(mapAll(list, topology.NodeEntry)) // a closed project: the entries of its file, as GNS3 answers
	}
	return c.JSON(mapAll(list, nodeFrom))
}

// nodeCreateRequest is the body of POST .../nodes. Read-only members
// (status, ports, width, height, console_host, node_directory,
// command_line, project_id) are accepted and ignored: GNS3 crashes on some
// of them, and clients send whole node objects back.
type nodeCreateRequest struct {
	ComputeID        string            `json:"compute_id"`
	Name             string            `json:"name"`
	NodeType         string            `json:"node_type"`
	NodeID           *string           `json:"node_id"`
	TemplateID       *string           `json:"template_id"`
	ConsoleAutoStart *bool             `json:"console_auto_start"`
	Properties       map[string]any    `json:"properties"`
	Label            project.Label     `json:"label"`
	Symbol           *string           `json:"symbol"`
	X                *int              `json:"x"`
	Y                *int              `json:"y"`
	Z                *int              `json:"z"`
	Locked           *bool             `json:"locked"`
	PortNameFormat   *string           `json:"port_name_format"`
	PortSegmentSize  *int              `json:"port_segment_size"`
	FirstPortName    *string           `json:"first_port_name"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	ConsoleType      *string           `json:"console_type"`
}

func (r *nodeCreateRequest) toCreate() project.NodeCreate {
	n := project.NewNodeCreate()
	n.ComputeID, n.Name, n.Type = r.ComputeID, r.Name, r.NodeType
	set(&n.ID, r.NodeID)
	set(&n.TemplateID, r.TemplateID)
	set(&n.ConsoleAutoStart, r.ConsoleAutoStart)
	set(&n.Symbol, r.Symbol)
	set(&n.X, r.X)
	set(&n.Y, r.Y)
	set(&n.Z, r.Z)
	set(&n.Locked, r.Locked)
	set(&n.PortNameFormat, r.PortNameFormat)
	set(&n.PortSegmentSize, r.PortSegmentSize)
	set(&n.ConsoleType, r.ConsoleType)
	if r.Properties != nil {
		n.Properties = r.Properties
	}
	if r.CustomAdapters != nil {
		n.CustomAdapters = r.CustomAdapters
	}
	n.Label = r.Label
	n.FirstPortName = r.FirstPortName
	return n
}

func (a *API) createNode(c *fiber.Ctx) error {
	var req nodeCreateRequest
	if err := a.decode(c, "node_create", &req); err != nil {
		return err
	}
	n, err := a.projects.CreateNode(c.UserContext(), c.Params("project_id"), req.toCreate())
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(nodeFrom(n))
}

func (a *API) getNode(c *fiber.Ctx) error {
	n, err := a.projects.Node(c.Params("project_id"), c.Params("node_id"))
	if err != nil {
		return err
	}
	return c.JSON(nodeFrom(n))
}

func (a *API) deleteNode(c *fiber.Ctx) error {
	if err := a.projects.DeleteNode(c.UserContext(), c.Params("project_id"), c.Params("node_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (a *API) listLinks(c *fiber.Ctx) error {
	p, err := a.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	list, err := a.projects.Links(p.ID)
	if err != nil {
		return err
	}
	if p.Status == project.Closed {
		return c.JSON(mapAll(list, topology.LinkEntry)) // a closed project: the entries of its file
	}
	return c.JSON(mapAll(list, linkFrom))
}

// linkCreateRequest is the body of POST .../links. A link_id in it is
// ignored (the server picks ids), as are the other read-only members.
type linkCreateRequest struct {
	Nodes []struct {
		NodeID        string        `json:"node_id"`
		AdapterNumber int           `json:"adapter_number"`
		PortNumber    int           `json:"port_number"`
		Label         project.Label `json:"label"`
	} `json:"nodes"`
	Filters   map[string][]any `json:"filters"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Suspend   bool             `json:"suspend"`
}

func (a *API) createLink(c *fiber.Ctx) error {
	var req linkCreateRequest
	if err := a.decode(c, "link_create", &req); err != nil {
		return err
	}
	lc := project.LinkCreate{Filters: req.Filters, Style: req.LinkStyle, Suspend: req.Suspend}
	for _, n := range req.Nodes {
		lc.Endpoints = append(lc.Endpoints, project.Endpoint{NodeID: n.NodeID, Adapter: n.AdapterNumber, Port: n.PortNumber, Label: n.Label})
	}
	l, err := a.projects.CreateLink(c.UserContext(), c.Params("project_id"), lc)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

func (a *API) getLink(c *fiber.Ctx) error {
	l, err := a.projects.LinkWithCounts(c.UserContext(), c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		return err
	}
	return c.JSON(linkFrom(l))
}

func (a *API) deleteLink(c *fiber.Ctx) error {
	if err := a.projects.DeleteLink(c.UserContext(), c.Params("project_id"), c.Params("link_id")); err != nil {
		return err
	}
	return noContent(c)
}

// startCapture takes the capture vocabulary's Spec as its body (it may be
// empty, or {}): the schema, made from the vocabulary, and Spec.Check are
// the API edge's checks.
func (a *API) startCapture(c *fiber.Ctx) error {
	var req capspec.Spec
	if err := a.decode(c, "capture_start", &req); err != nil {
		return err
	}
	if err := req.Check(false); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	}
	l, err := a.projects.StartCapture(c.UserContext(), c.Params("project_id"), c.Params("link_id"), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

func (a *API) stopCapture(c *fiber.Ctx) error {
	l, err := a.projects.StopCapture(c.UserContext(), c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

// pcapContentType is the media type of a capture stream.
const pcapContentType = "application/vnd.tcpdump.pcap"

// pcapngContentType is the media type of a pcapng capture.
const pcapngContentType = "application/x-pcapng"

// pcap relays the capture from the agent that writes it: the file from
// its first byte, then every record as it is written, in chunks flushed at
// once, and a proper end of the body when the capture stops (GNS3 drops the
// connection instead). `curl -sN URL | wireshark -k -i -` shows it live.
func (a *API) pcap(c *fiber.Ctx) error {
	// The stream lives as long as the server, not as long as a request
	// deadline: Fiber reads it after this handler returns.
	ctx, cancel := context.WithCancel(a.cfg.Context)
	body, err := a.projects.CaptureStream(ctx, c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		cancel()
		return err
	}
	// A client that goes away is noticed at once, not at the next frame
	// (which may never come): its relay from the agent and the agent's
	// file handle are released. The watch reads the connection, so it
	// closes after the stream.
	c.Context().SetConnectionClose()
	netguard.WatchGone(c.Context().Conn(), cancel)
	body = &cancelOnClose{ReadCloser: body, cancel: cancel}
	c.Set(fiber.HeaderContentType, pcapContentType)
	c.Set(fiber.HeaderCacheControl, "no-store")
	// Size -1: chunked, each read flushed; fasthttp closes body when done.
	c.Context().SetBodyStream(body, -1)
	return nil
}

// captureFile sends the file a link's running capture writes, as it is now
// (for a ring, the file being written): up to its last whole record, so a
// valid capture on its own, with its length and its name as the download's
// file name. The capture goes on; /pcap is the live stream.
func (a *API) captureFile(c *fiber.Ctx) error {
	ctx, cancel := context.WithCancel(a.cfg.Context)
	f, err := a.projects.CaptureFile(ctx, c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		cancel()
		return err
	}
	ctype := pcapContentType
	if strings.HasSuffix(f.Name, ".pcapng") {
		ctype = pcapngContentType
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": f.Name}))
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Context().SetBodyStream(&cancelOnClose{ReadCloser: f.Body, cancel: cancel}, int(f.Size))
	return nil
}

// cancelOnClose ends a stream's context when fasthttp closes its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}
