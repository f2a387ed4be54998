// Package api is the controller's HTTP API: GNS3's /v2 routes on Fiber,
// their request checks, the JSON shapes GNS3 clients expect, and the one
// place where errors become HTTP statuses. Handlers parse, call one
// Service method and encode; the rules live in package project.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/appliances"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/symbols"
	"github.com/labtap/labtap/metrics"
	"github.com/valyala/fasthttp"
)

// Computes is what the API needs of the compute registry: the computes
// themselves. *compute.Registry satisfies it.
type Computes interface {
	List() []compute.Compute
	Get(id string) (compute.Compute, bool)
	Create(ctx context.Context, c compute.Compute, g compute.Grant) (compute.Compute, error)
	Update(ctx context.Context, id string, u compute.ComputeUpdate) (compute.Compute, error)
	Remove(id string) error
	// SetDraining drains a compute (it takes no new nodes) or undrains it.
	SetDraining(id string, on bool) (compute.Compute, error)
}

// Agents is what the API asks of the computes' agents directly, by
// compute id, for the routes that are not a project's: Docker images,
// host figures, the QEMU wizard and node consoles. *compute.Agents (the
// registry's Agents) satisfies it.
type Agents interface {
	// DockerImages lists the image tags of a compute's Docker Engine.
	DockerImages(ctx context.Context, computeID string) ([]string, error)
	// Interfaces lists the network interfaces of a compute's host.
	Interfaces(ctx context.Context, computeID string) ([]compute.HostInterface, error)
	// Statistics asks a compute for its host's figures.
	Statistics(ctx context.Context, computeID string) (compute.Statistics, error)
	ConsoleDialer
	QemuComputes
}

// ProjectCaptures runs whole-project captures. *labcapture.Service
// satisfies it.
type ProjectCaptures interface {
	Start(ctx context.Context, projectID string, spec capspec.Spec) (capspec.ProjectState, error)
	Stop(ctx context.Context, projectID string) (capspec.ProjectState, error)
	Stream(ctx context.Context, projectID string) (io.ReadCloser, error)
}

// Config configures the API.
type Config struct {
	Projects *project.Service
	Computes Computes
	// Agents serves the routes that call a compute's agent outside a
	// project; nil answers them 409 (statistics: an empty list).
	Agents Agents
	// ProjectCaptures serves the project capture routes; nil answers
	// them 409.
	ProjectCaptures ProjectCaptures
	// Enroll, when set, lets agents join (POST /v3/computes/join) with
	// tokens POST /v3/computes/join-tokens makes; nil answers both 409.
	Enroll Enroller
	// Symbols serves the symbol routes; nil serves the built-in symbols
	// only and refuses uploads.
	Symbols *symbols.Library
	// User and Password, when both set, turn on HTTP Basic authentication
	// (GNS3's realm and replies).
	User, Password string
	// AllowedOrigins are the browser origins ("https://host:port"), besides
	// the server's own, whose pages may change state and open WebSockets
	// (ParseOrigins checks them).
	AllowedOrigins []string
	// Access, when set, serves GNS3 3.x's /v3/access routes (users,
	// groups, roles, ACL), which authenticate through it, not through
	// User and Password.
	Access *access.Service
	// ConsolesOpen keeps node consoles open to every client address, as
	// before users: for single-user labs. Otherwise, when the server has
	// users (Access), each agent lets a client address in to a node's
	// console only once a user allowed Node.Console on the node has read
	// it from there (consolegrants.go).
	ConsolesOpen bool
	// ConsoleGrantIdle is how long a console grant lasts after its user's
	// last read of the node; 0 means DefaultConsoleGrantIdle.
	ConsoleGrantIdle time.Duration
	// MaxJSONBody bounds JSON request bodies; 0 means 1 MiB.
	MaxJSONBody int
	// MaxImportSize bounds a project archive upload; 0 means 10 GiB.
	MaxImportSize int64
	// SettingsFile keeps the GNS3 VM and IOU license settings clients
	// edit; "" keeps them in memory.
	SettingsFile string
	// Hub carries the notification streams; nil turns them off.
	Hub *notify.Hub
	// Load reports the host's CPU and memory use (0-100) for stream pings.
	Load func() (cpu, mem float64)
	// Version is the GNS3 version reported by GET /v2/version, e.g.
	// "2.2.59". The GNS3 GUI connects only when its own x.y.z matches.
	Version string
	// PinVersion makes GET /v2/version answer Version to every client.
	// Otherwise a GNS3 GUI of a 2.2 release, which connects only to a
	// server of its own x.y.z, is answered its own version (it names it in
	// its User-Agent; every 2.2 speaks the same API).
	PinVersion bool
	// Context lives as long as the server: long requests (capture
	// streams) end when it does.
	Context context.Context
	// RequestTimeout bounds each request but the streams: its context
	// ends then, and the agent calls made for it with it; 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// View, when set, serves the capture view in a browser: the page at /
	// and at a link's /view, and the decoded packets of its capture.
	View View
	// Metrics, when set, answers GET /metrics.
	Metrics http.Handler
	// Audit receives the audit trail, a JSON line per change and per
	// refusal (see AuditRecord); nil keeps none. Each line is one Write.
	Audit io.Writer
	// Requests counts the requests answered; nil counts nothing.
	Requests *metrics.HTTP
	Logger   *slog.Logger
}

// encodeJSON is the app's JSON encoder (c.JSON), and the encoder of the
// bodies written without it (a link's GET): one encoder, the same bytes.
var encodeJSON = gojson.Marshal

// DefaultRequestTimeout bounds a request: generous, since opening a
// project starts its nodes on their agents one call after another.
const DefaultRequestTimeout = 5 * time.Minute

// API holds the handlers' dependencies.
type API struct {
	cfg      Config
	log      *slog.Logger
	auth     *authLimiter // failed Basic authentications, by client address
	origins  []string     // Config.AllowedOrigins, canonical (canonicalOrigin)
	projects *project.Service
	computes Computes
	hub      *notify.Hub
	*decoder
	routes []Route
	// accessTemplates are the /v3/access routes' templates.
	accessTemplates []string
	// handlers holds each route's Fiber handler, by index in routes, until
	// addRoutes gives them to the app.
	handlers []fiber.Handler
	// templates holds each route's template, by itself: the access log's
	// and the metrics' route strings, found without copying X-Route.
	templates map[string]string
	settings  *settingsStore
	// appliances is GET /v2/appliances' catalogue.
	appliances *appliances.Catalogue
	// grants are the console grants; nil when consoles are open.
	grants *consoleGrants
	// classes serve a teacher's routes (distribute, reset).
	classes *classRoutes
}

// resource is what the handlers of one resource of a project need: the
// request decoder and the projects. Each resource's handler type
// (nodeRoutes, linkRoutes, ...) is one.
type resource struct {
	*decoder
	projects *project.Service
	// allowed is API.allowed: whether the request's caller holds a
	// privilege on a resource path (lists hold what it may audit).
	allowed func(c *fiber.Ctx, privilege, path string) bool
}

func (a *API) resource() resource { return resource{a.decoder, a.projects, a.allowed} }

// Route is one registered route: its method and GNS3 template.
type Route struct {
	Method, Template string
}

// requestKey is where decode leaves the parsed request for error replies.
const requestKey = "labtap.request"

// maxBody bounds the body of every request but a project import.
const maxBody = 10 << 20

// boundBody reads a request's body into memory, at most maxBody bytes
// (413 beyond), for every route but the two that stream theirs to disk: a
// project import and a QEMU image upload. The
// server streams every body (Config.StreamRequestBody), so this is where
// the bound of other routes holds.
func (a *API) boundBody(c *fiber.Ctx) error {
	req := c.Request()
	if !req.IsBodyStream() || c.Method() == fiber.MethodPost && (matchTemplate(rImport, c.Path()) || isImageUpload(c.Path())) {
		return c.Next()
	}
	if req.Header.ContentLength() > maxBody {
		c.Context().SetConnectionClose() // the body stays unread
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, "Request Entity Too Large")
	}
	body, err := io.ReadAll(io.LimitReader(req.BodyStream(), maxBody+1))
	if err != nil {
		c.Context().SetConnectionClose()
		return fiber.NewError(fiber.StatusBadRequest, "Cannot read the request body")
	}
	if len(body) > maxBody {
		// Read on a little, so that closing the connection does not reset
		// it under the reply (a few bytes of a body's end are often left).
		io.CopyN(io.Discard, req.BodyStream(), 64<<10)
		c.Context().SetConnectionClose()
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, "Request Entity Too Large")
	}
	req.SetBodyRaw(body)
	return c.Next()
}

// New builds the Fiber app serving the /v2 API.
func New(cfg Config) (*fiber.App, *API, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxJSONBody <= 0 {
		cfg.MaxJSONBody = 1 << 20
	}
	schemas, err := compileSchemas()
	if err != nil {
		return nil, nil, err
	}
	origins, err := ParseOrigins(cfg.AllowedOrigins)
	if err != nil {
		return nil, nil, err
	}
	a := &API{cfg: cfg, log: cfg.Logger, auth: newAuthLimiter(cfg.Logger), origins: origins, projects: cfg.Projects, computes: cfg.Computes, hub: cfg.Hub, decoder: &decoder{schemas: schemas, maxBody: cfg.MaxJSONBody},
		settings: newSettingsStore(cfg.SettingsFile)}
	catalogue := appliances.Config{Logger: cfg.Logger}
	if cfg.Computes != nil {
		catalogue.Computes = cfg.Computes.List
	}
	if cfg.Agents != nil {
		catalogue.Images = cfg.Agents.Images
	}
	if a.appliances, err = appliances.New(catalogue); err != nil {
		return nil, nil, err
	}
	if a.settings.broken != nil {
		a.log.Error("settings file unreadable: GNS3 VM and IOU license settings cannot be saved", "err", a.settings.broken)
	}
	app := fiber.New(fiber.Config{
		AppName:               "labtap",
		Immutable:             true, // handler strings outlive the request buffers
		DisableStartupMessage: true,
		ErrorHandler:          a.handleError,
		BodyLimit:             maxBody, // symbol uploads; JSON bodies are held to 1 MiB in decode
		// Bodies are streamed so that a project import (up to
		// MaxImportSize) never sits in memory; boundBody reads every other
		// route's body, up to BodyLimit. Multipart bodies are the import's
		// to parse, as a stream.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		// go-json writes the same bytes as encoding/json (a test holds it to
		// that) 5x faster: encoding/json re-validates every raw member (labels,
		// styles) and allocates per map; 1,000 links took 11 ms against 2.3.
		JSONEncoder: encodeJSON,
		ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute,
		// No WriteTimeout: a capture stream lasts as long as the capture.
	})
	app.Use(recover.New())
	app.Use(a.observe)
	// Before authentication and every route: a refused request from a
	// foreign page neither counts as a failed login nor reaches a handler.
	app.Use(a.checkOrigin)
	a.registerAccess(app) // before Basic: /v3/access authenticates by itself
	a.registerJoin(app)   // before Basic: a joining agent shows its token
	a.registerPools(app)  // so does /v3/pools (pools.go)
	if a.authOn() {
		app.Use(a.basicAuth)
	}
	if a.startConsoleGrants(); a.grants != nil {
		app.Use(a.grantReads)
	}
	app.Use(a.boundBody)
	a.register(app)
	a.addRoutes(app)
	a.templates = make(map[string]string, len(a.routes))
	for _, r := range a.routes {
		a.templates[r.Template] = r.Template
	}
	for _, t := range a.accessTemplates {
		a.templates[t] = t
	}
	app.Use(a.unmatched)
	// Fiber answers a method it does not know in plain text before any
	// handler runs: answered here in JSON, as every other error.
	srv := app.Server()
	next := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if !slices.Contains(fiber.DefaultMethods, string(ctx.Method())) {
			ctx.Response.Header.Set("Allow", strings.Join(fiber.DefaultMethods, ", "))
			ctx.SetContentType(fiber.MIMEApplicationJSON)
			ctx.SetStatusCode(fiber.StatusMethodNotAllowed)
			msg, _ := json.Marshal(fmt.Sprintf("Method %.32q is not allowed", ctx.Method()))
			fmt.Fprintf(ctx, `{"message":%s,"status":%d}`, msg, fiber.StatusMethodNotAllowed)
			return
		}
		next(ctx)
	}
	return app, a, nil
}

// handle registers a route by its GNS3 template ("/v2/projects/{project_id}")
// and makes every reply, errors included, carry the template in X-Route.
// The handler's c.UserContext() ends after RequestTimeout, or when the
// server stops.
func (a *API) handle(app *fiber.App, method, template string, h fiber.Handler) {
	a.routes = append(a.routes, Route{method, template})
	value := []byte(template)
	perm := permissionOf(Route{method, template})
	a.handlers = append(a.handlers, func(c *fiber.Ctx) error {
		c.Response().Header.SetCanonical(xRoute, value) // c.Set's bytes, without its key's normalising
		if err := a.authorize(c, perm); err != nil {
			return err
		}
		ctx, cancel := context.WithDeadline(a.cfg.Context, requestStart(c).Add(a.cfg.RequestTimeout))
		defer cancel()
		c.SetUserContext(ctx)
		if err := h(c); err != nil {
			return err
		}
		a.afterwards(c, perm)
		return nil
	})
}

// handleStream registers a route whose reply lasts as long as what it
// follows (a capture, a notification stream): as handle, without the
// deadline; its context ends when the server stops.
func (a *API) handleStream(app *fiber.App, method, template string, h fiber.Handler) {
	a.routes = append(a.routes, Route{method, template})
	value := []byte(template)
	perm := permissionOf(Route{method, template})
	a.handlers = append(a.handlers, func(c *fiber.Ctx) error {
		c.Response().Header.SetCanonical(xRoute, value)
		if err := a.authorize(c, perm); err != nil {
			return err
		}
		c.SetUserContext(a.cfg.Context)
		return h(c)
	})
}

// polled are the routes GNS3 clients ask again and again (the GUI and the
// web UI poll a project's links and nodes): Fiber matches a request
// against the routes of its method one after another, in the order they
// were added, and every /v2 route shares one list (Fiber's buckets go by
// the path's first 3 bytes), so these are added first. That is the
// order's only effect: no other route of their method matches a path one
// of them matches (TestRoutesAnswerAsTheirOrderInTheTableSays).
var polled = []Route{
	{"GET", "/v2/projects/{project_id}/links/{link_id}"},
	{"GET", "/v2/projects/{project_id}/nodes/{node_id}"},
	{"GET", "/v2/projects/{project_id}/links"},
	{"GET", "/v2/projects/{project_id}/nodes"},
	{"GET", "/v2/projects/{project_id}"},
}

// addRoutes gives the routes to the app: the polled ones first, then the
// others in the order they were registered.
func (a *API) addRoutes(app *fiber.App) {
	added := make([]bool, len(a.routes))
	for _, p := range polled {
		if i := slices.Index(a.routes, p); i >= 0 {
			app.Add(p.Method, fiberPath(p.Template), a.handlers[i])
			added[i] = true
		}
	}
	for i, r := range a.routes {
		if !added[i] {
			app.Add(r.Method, fiberPath(r.Template), a.handlers[i])
		}
	}
	a.handlers = nil
}

// xRoute is the header naming the route, as c.Set would write its name.
var xRoute = []byte("X-Route")

// requestStart is when the server began the request (fasthttp notes it
// before calling the app), or now for a request made in memory.
func requestStart(c *fiber.Ctx) time.Time {
	if t := c.Context().Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// fiberPath turns "{name}" placeholders into Fiber's ":name", and a
// greedy "{name:.+}" (several segments, as symbol ids) into Fiber's "*",
// read back with c.Params("*").
func fiberPath(template string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			b.WriteString(template)
			return b.String()
		}
		j := strings.IndexByte(template[i:], '}')
		b.WriteString(template[:i])
		if name := template[i+1 : i+j]; strings.HasSuffix(name, ":.+") {
			b.WriteString("*")
		} else {
			b.WriteString(":" + name)
		}
		template = template[i+j+1:]
	}
}

func (a *API) register(app *fiber.App) {
	const (
		computes  = "/v2/computes"
		compute   = computes + "/{compute_id}"
		projects  = "/v2/projects"
		project   = projects + "/{project_id}"
		nodes     = project + "/nodes"
		node      = nodes + "/{node_id}"
		links     = project + "/links"
		link      = links + "/{link_id}"
		templates = "/v2/templates"
	)
	a.handle(app, "GET", "/v2/version", a.version)
	a.handle(app, "POST", "/v2/version", a.checkVersion)
	cmr := a.computeRoutes()
	a.handle(app, "GET", computes, cmr.listComputes)
	a.handle(app, "POST", computes, cmr.createCompute)
	a.handle(app, "GET", compute, cmr.getCompute)
	a.handle(app, "PUT", compute, cmr.updateCompute)
	a.handle(app, "DELETE", compute, cmr.deleteCompute)
	a.handle(app, "POST", rJoinTokens, a.newJoinToken)
	a.handle(app, "POST", compute+"/drain", cmr.drain(true))
	a.handle(app, "POST", compute+"/undrain", cmr.drain(false))
	a.handle(app, "GET", compute+"/nodes", cmr.nodesOn)
	a.handle(app, "POST", compute+"/recover", cmr.recoverNodes)
	a.handle(app, "GET", compute+"/docker/images", cmr.dockerImages)
	a.handle(app, "GET", compute+"/network/interfaces", cmr.interfaces)
	a.handle(app, "GET", "/v2/compute/network/interfaces", cmr.interfaces)
	ntr := notificationRoutes{a.resource(), a.hub, a.cfg.Load, a.cfg.Context, a}
	a.handleStream(app, "GET", "/v2/notifications", ntr.controllerNotifications)
	a.handleStream(app, "GET", "/v2/notifications/ws", ntr.controllerNotificationsWS())
	pr := projectRoutes{a.resource()}
	a.handle(app, "GET", projects, pr.listProjects)
	a.handle(app, "POST", projects, pr.createProject)
	a.handle(app, "GET", project, pr.getProject)
	a.handle(app, "PUT", project, pr.updateProject)
	a.handle(app, "DELETE", project, pr.deleteProject)
	a.handle(app, "POST", project+"/open", pr.openProject)
	a.handle(app, "POST", project+"/close", pr.closeProject)
	a.handle(app, "GET", project+"/stats", pr.projectStats)
	a.handleStream(app, "GET", project+"/notifications", ntr.projectNotifications)
	a.handleStream(app, "GET", project+"/notifications/ws", ntr.projectNotificationsWS())
	nr := nodeRoutes{a.resource()}
	a.handle(app, "GET", nodes, nr.listNodes)
	a.handle(app, "POST", nodes, nr.createNode)
	a.handle(app, "POST", nodes+"/start", nr.allNodes((*projectNodes).StartAll))
	a.handle(app, "POST", nodes+"/stop", nr.allNodes((*projectNodes).StopAll))
	a.handle(app, "POST", nodes+"/suspend", nr.allNodes((*projectNodes).SuspendAll))
	a.handle(app, "POST", nodes+"/reload", nr.allNodes((*projectNodes).ReloadAll))
	a.handle(app, "GET", node, nr.getNode)
	a.handle(app, "PUT", node, nr.updateNode)
	a.handle(app, "DELETE", node, nr.deleteNode)
	a.handle(app, "POST", node+"/start", nr.nodeStatus((*projectNodes).Start))
	a.handle(app, "POST", node+"/stop", nr.nodeStatus((*projectNodes).Stop))
	a.handle(app, "POST", node+"/suspend", nr.nodeStatus((*projectNodes).Suspend))
	a.handle(app, "POST", node+"/reload", nr.nodeStatus((*projectNodes).Reload))
	a.handle(app, "GET", node+"/links", nr.nodeLinks)
	a.registerQemu(app)
	tr := templateRoutes{a.resource()}
	a.handle(app, "GET", templates, tr.listTemplates)
	a.handle(app, "GET", templates+"/{template_id}", tr.getTemplate)
	a.handle(app, "POST", project+"/templates/{template_id}", tr.createFromTemplate)
	lr := linkRoutes{a.resource()}
	a.handle(app, "GET", links, lr.listLinks)
	a.handle(app, "POST", links, lr.createLink)
	a.handle(app, "GET", link, lr.getLink)
	a.handle(app, "PUT", link, lr.updateLink)
	a.handle(app, "DELETE", link, lr.deleteLink)
	a.handle(app, "GET", link+"/available_filters", lr.availableFilters)
	cr := captureRoutes{a.resource(), a.cfg.Context}
	a.handle(app, "POST", link+"/start_capture", cr.startCapture)
	a.handle(app, "POST", link+"/stop_capture", cr.stopCapture)
	a.handleStream(app, "GET", link+"/pcap", cr.pcap)
	a.handleStream(app, "GET", link+"/capture_file", cr.captureFile)
	a.handle(app, "GET", project+"/captures", cr.listFiles)
	a.handleStream(app, "GET", project+"/captures/{compute_id}/{file_name}", cr.downloadFile)
	a.handle(app, "DELETE", project+"/captures/{compute_id}/{file_name}", cr.deleteFile)
	a.handle(app, "POST", project+"/start_capture", a.startProjectCapture)
	a.handle(app, "POST", project+"/stop_capture", a.stopProjectCapture)
	a.handleStream(app, "GET", project+"/pcap", a.projectPcap)
	a.registerSymbols(app)
	a.registerArchive(app)
	a.registerGUI(app)
	a.registerClasses(app)
	a.registerForward(app) // after every other compute route
	a.handle(app, "GET", "/v2/openapi.json", a.openAPI)
	a.registerObserve(app)
}

// unmatched answers a request no route took: 405 with Allow when the path
// exists with other methods, 404 otherwise, both as JSON errors (GNS3 sends
// plain text, which gns3fy cannot read).
func (a *API) unmatched(c *fiber.Ctx) error {
	var allow []string
	for _, r := range a.routes {
		if matchTemplate(r.Template, c.Path()) && !slices.Contains(allow, r.Method) {
			allow = append(allow, r.Method)
		}
	}
	if len(allow) > 0 {
		c.Set(fiber.HeaderAllow, strings.Join(allow, ","))
		return fiber.NewError(fiber.StatusMethodNotAllowed, "Method "+c.Method()+" not allowed on "+c.Path())
	}
	return fiber.NewError(fiber.StatusNotFound, "No route "+c.Method()+" "+c.Path())
}

// matchTemplate reports whether path fits a route template: each "{...}"
// stands for one non-empty segment, and a greedy "{name:.+}" for one or
// more (symbol ids hold slashes).
func matchTemplate(template, path string) bool {
	return matchSegments(strings.Split(template, "/"), strings.Split(strings.TrimSuffix(path, "/"), "/"))
}

func matchSegments(ts, ps []string) bool {
	for i, t := range ts {
		if i >= len(ps) {
			return false
		}
		switch {
		case strings.HasPrefix(t, "{") && strings.HasSuffix(t, ":.+}"):
			rest := ts[i+1:]
			for n := 1; i+n+len(rest) <= len(ps); n++ { // the greedy part takes n segments
				if matchSegments(rest, ps[i+n:]) {
					return true
				}
			}
			return false
		case strings.HasPrefix(t, "{"):
			if ps[i] == "" {
				return false
			}
		case t != ps[i]:
			return false
		}
	}
	return len(ts) == len(ps)
}

// handleError is the one place errors become replies: {"message", "status"},
// plus "path", "request" and "method" for a 400, as GNS3 sends them.
func (a *API) handleError(c *fiber.Ctx, err error) error {
	status, msg := fiber.StatusInternalServerError, "Internal error"
	var pe *project.Error
	var fe *fiber.Error
	var br *badRequest
	switch {
	case errors.As(err, &br):
		status, msg = fiber.StatusBadRequest, br.msg
	case errors.As(err, &pe):
		status, msg = statusOf(pe), pe.Msg
	case errors.As(err, &fe):
		status, msg = fe.Code, fe.Message
	}
	if status >= 500 {
		a.log.ErrorContext(c.UserContext(), "request failed", "method", c.Method(), "path", c.Path(), "err", err)
	} else {
		a.log.Debug("request refused", "method", c.Method(), "path", c.Path(), "status", status, "err", err)
	}
	if len(c.Response().Header.Peek("X-Route")) == 0 {
		// Refused before any route ran (a body over Fiber's limit): name
		// the route the request was for, when there is one.
		for _, r := range a.routes {
			if r.Method == c.Method() && matchTemplate(r.Template, c.Path()) {
				c.Set("X-Route", r.Template)
				break
			}
		}
	}
	body := fiber.Map{"message": msg, "status": status}
	if status == fiber.StatusBadRequest {
		var req any = fiber.Map{}
		if br != nil && br.request != nil {
			req = br.request
		} else if r := c.Locals(requestKey); r != nil {
			req = r
		}
		body["path"] = string(c.Response().Header.Peek("X-Route"))
		body["request"] = req
		body["method"] = c.Method()
	}
	// A failed stream must not keep its stream body.
	c.Response().ResetBody()
	return c.Status(status).JSON(body)
}

func statusOf(e *project.Error) int {
	switch {
	case errors.Is(e, project.ErrInvalid):
		return fiber.StatusBadRequest
	case errors.Is(e, project.ErrForbidden):
		return fiber.StatusForbidden
	case errors.Is(e, project.ErrNotFound):
		return fiber.StatusNotFound
	case errors.Is(e, project.ErrConflict):
		return fiber.StatusConflict
	case errors.Is(e, project.ErrTooLarge):
		return fiber.StatusRequestEntityTooLarge
	}
	return fiber.StatusInternalServerError
}

// noContent answers 204 with no body and no Content-Type, as GNS3 does.
func noContent(c *fiber.Ctx) error {
	c.Response().Header.SetNoDefaultContentType(true)
	return c.SendStatus(fiber.StatusNoContent)
}
