// Package api is the controller's HTTP API: GNS3's /v2 routes on Fiber,
// their request checks, the JSON shapes GNS3 clients expect, and the one
// place where errors become HTTP statuses. Handlers parse, call one
// Service method and encode; the rules live in package project.
package api

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Config configures the API.
type Config struct {
	Projects *project.Service
	Computes *compute.Registry
	// Version is the GNS3 version reported by GET /v2/version, e.g.
	// "2.2.59". The GNS3 GUI connects only when its own x.y.z matches.
	Version string
	// Local is the "local" member of GET /v2/version.
	Local bool
	// Context lives as long as the server: long requests (capture
	// streams) end when it does.
	Context context.Context
	Logger  *slog.Logger
}

// API holds the handlers' dependencies.
type API struct {
	cfg      Config
	log      *slog.Logger
	projects *project.Service
	computes *compute.Registry
	schemas  map[string]*jsonschema.Schema
	routes   []Route
}

// Route is one registered route: its method and GNS3 template.
type Route struct {
	Method, Template string
}

// requestKey is where decode leaves the parsed request for error replies.
const requestKey = "labtap.request"

// New builds the Fiber app serving the /v2 API.
func New(cfg Config) (*fiber.App, *API, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	schemas, err := compileSchemas()
	if err != nil {
		return nil, nil, err
	}
	a := &API{cfg: cfg, log: cfg.Logger, projects: cfg.Projects, computes: cfg.Computes, schemas: schemas}
	app := fiber.New(fiber.Config{
		AppName:               "labtap",
		Immutable:             true, // handler strings outlive the request buffers
		DisableStartupMessage: true,
		ErrorHandler:          a.handleError,
		BodyLimit:             10 << 20, // symbol uploads; JSON bodies are held to 1 MiB in decode
		ReadTimeout:           time.Minute,
		IdleTimeout:           2 * time.Minute,
		// No WriteTimeout: a capture stream lasts as long as the capture.
	})
	app.Use(recover.New())
	a.register(app)
	app.Use(a.unmatched)
	return app, a, nil
}

// Routes lists the registered routes, for the OpenAPI document and its test.
func (a *API) Routes() []Route { return a.routes }

// handle registers a route by its GNS3 template ("/v2/projects/{project_id}")
// and makes every reply, errors included, carry the template in X-Route.
func (a *API) handle(app *fiber.App, method, template string, h fiber.Handler) {
	a.routes = append(a.routes, Route{method, template})
	app.Add(method, fiberPath(template), func(c *fiber.Ctx) error {
		c.Set("X-Route", template)
		c.SetUserContext(a.cfg.Context)
		return h(c)
	})
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
		project = "/v2/projects/{project_id}"
		node    = project + "/nodes/{node_id}"
		link    = project + "/links/{link_id}"
	)
	a.handle(app, "GET", "/v2/version", a.version)
	a.handle(app, "GET", "/v2/computes", a.listComputes)
	a.handle(app, "GET", "/v2/projects", a.listProjects)
	a.handle(app, "POST", "/v2/projects", a.createProject)
	a.handle(app, "GET", project, a.getProject)
	a.handle(app, "DELETE", project, a.deleteProject)
	a.handle(app, "GET", project+"/nodes", a.listNodes)
	a.handle(app, "POST", project+"/nodes", a.createNode)
	a.handle(app, "GET", node, a.getNode)
	a.handle(app, "DELETE", node, a.deleteNode)
	a.handle(app, "POST", node+"/start", a.startNode)
	a.handle(app, "POST", node+"/stop", a.stopNode)
	a.handle(app, "GET", project+"/links", a.listLinks)
	a.handle(app, "POST", project+"/links", a.createLink)
	a.handle(app, "GET", link, a.getLink)
	a.handle(app, "DELETE", link, a.deleteLink)
	a.handle(app, "POST", link+"/start_capture", a.startCapture)
	a.handle(app, "POST", link+"/stop_capture", a.stopCapture)
	a.handle(app, "GET", link+"/pcap", a.pcap)
	a.registerSymbols(app)
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

// matchTemplate reports whether path fits a route template, each "{...}"
// standing for one non-empty segment.
func matchTemplate(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(strings.TrimSuffix(path, "/"), "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") {
			if ps[i] == "" {
				return false
			}
		} else if t != ps[i] {
			return false
		}
	}
	return true
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
