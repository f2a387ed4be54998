package api

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// View is the browser's capture view. *web.View satisfies it.
type View interface {
	// Page is the HTML page, served at / and at a link's .../view.
	Page() []byte
	// Asset returns a file of the page (script, style) and its media type.
	Asset(name string) (data []byte, contentType string, ok bool)
	// CheckFilter reports whether a display filter is valid (tshark takes
	// it, or it compiles within link filters' budget); the error is for
	// the user.
	CheckFilter(ctx context.Context, expr string) error
	// Feed writes the decoded rows of the capture stream pcap that pass the
	// filter as Server-Sent Events, calling flush after each, until the
	// stream ends, ctx is done or a write fails; it closes pcap.
	Feed(ctx context.Context, pcap io.ReadCloser, filter string, w io.Writer, flush func() error) error
}

// observe counts and logs every request once it is answered (the access
// log: method, route template, status, duration, bytes; never the query,
// headers or body, which may hold secrets). Errors are turned into their
// reply here, so what is counted is what the client got. A stream is
// counted when it begins: its duration is the time to its first byte.
func (a *API) observe(c *fiber.Ctx) error {
	start := requestStart(c)
	if err := c.Next(); err != nil {
		if err := a.handleError(c, err); err != nil {
			c.Status(fiber.StatusInternalServerError)
		}
	}
	now := time.Now()
	d := now.Sub(start)
	route, ok := a.templates[string(c.Response().Header.Peek("X-Route"))] // no copy of the header
	if !ok {
		route = "unmatched"
	}
	status := c.Response().StatusCode()
	a.cfg.Requests.Observe(c.Method(), route, status, d)
	a.audit(c, route, now)
	size := int64(-1) // a stream: its size is not known yet
	if !c.Response().IsBodyStream() {
		size = int64(len(c.Response().Body())) // Body would read a stream to its end
	}
	// The line goes to the handler as Logger.LogAttrs would send it, but
	// for the caller's pc, which only AddSource would show (no logger of
	// the controller's has it) and whose runtime.Callers cost a fifth of
	// the line.
	if ctx, h := c.UserContext(), a.log.Handler(); h.Enabled(ctx, slog.LevelInfo) {
		r := slog.NewRecord(now, slog.LevelInfo, "request", 0)
		r.AddAttrs(slog.String("method", c.Method()), slog.String("route", route), slog.Int("status", status),
			slog.Duration("duration", d), slog.Int64("bytes", size))
		h.Handle(ctx, r)
	}
	return nil
}

func (a *API) registerObserve(app *fiber.App) {
	const link = "/v2/projects/{project_id}/links/{link_id}"
	if a.cfg.Metrics != nil {
		metrics := adaptor.HTTPHandler(a.cfg.Metrics)
		a.handle(app, "GET", "/metrics", metrics)
	}
	if a.cfg.View == nil {
		return
	}
	a.handle(app, "GET", "/", a.page)
	a.handle(app, "GET", "/ui/{asset}", a.asset)
	a.handle(app, "GET", link+"/view", a.linkView)
	a.handleStream(app, "GET", link+"/packets", a.packets)
	const file = "/v2/projects/{project_id}/captures/{compute_id}/{file_name}"
	a.handle(app, "GET", file+"/view", a.page)
	a.handleStream(app, "GET", file+"/packets", a.filePackets)
}

// page serves the capture view.
func (a *API) page(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(a.cfg.View.Page())
}

func (a *API) asset(c *fiber.Ctx) error {
	data, ctype, ok := a.cfg.View.Asset(c.Params("asset"))
	if !ok {
		return fiber.NewError(fiber.StatusNotFound, "No such file")
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(data)
}

// linkView serves the page for one link, which must exist.
func (a *API) linkView(c *fiber.Ctx) error {
	if _, err := a.projects.Links.Get(c.Params("project_id"), c.Params("link_id")); err != nil {
		return err
	}
	return a.page(c)
}

// packets streams a capture's decoded rows as Server-Sent Events, from its
// first frame, for as long as it runs; once it stopped, its last file's, to
// the file's end. ?filter= is a display filter; a bad one is a 400 with the
// compiler's message.
func (a *API) packets(c *fiber.Ctx) error {
	return a.feed(c, func() (io.ReadCloser, error) {
		return a.projects.Captures.Replay(a.cfg.Context, c.Params("project_id"), c.Params("link_id"))
	})
}

// filePackets streams the decoded rows of one capture file of a project
// (GET .../captures), running or stopped, to the file's end as it is now.
func (a *API) filePackets(c *fiber.Ctx) error {
	return a.feed(c, func() (io.ReadCloser, error) {
		f, err := a.projects.Captures.OpenFile(a.cfg.Context, c.Params("project_id"), c.Params("compute_id"), c.Params("file_name"))
		return f.Body, err
	})
}

// feed checks the display filter, opens the capture and streams its rows.
func (a *API) feed(c *fiber.Ctx, open func() (io.ReadCloser, error)) error {
	expr := c.Query("filter")
	if err := a.cfg.View.CheckFilter(c.UserContext(), expr); err != nil {
		return &badRequest{msg: "Invalid display filter: " + err.Error(), request: fiber.Map{"filter": expr}}
	}
	body, err := open()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	ctx, conn := a.cfg.Context, c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		flush := func() error {
			// A client that takes nothing for this long is gone.
			conn.SetWriteDeadline(time.Now().Add(writeGrace))
			return w.Flush()
		}
		if err := a.cfg.View.Feed(ctx, body, expr, w, flush); err != nil {
			a.log.Debug("packet feed ended", "err", err)
		}
	})
	return nil
}
