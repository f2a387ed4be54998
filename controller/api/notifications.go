package api

import (
	"bufio"
	"context"
	"strings"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
)

// pingInterval is how long a stream may stay silent before a ping (GNS3).
const pingInterval = 5 * time.Second

// writeGrace is how long a notification stream may wait for its client to
// take one message before it ends.
var writeGrace = 10 * time.Second

// streamCut, when set (by a test), is called each time a notification
// stream ends because a write to its client failed: the client left, or
// read nothing for writeGrace.
var streamCut func()

// Events turns what happens into notification messages on the hub: project
// lifecycle and compute events on the controller stream, node and link
// events on their project's stream. It satisfies project.Emitter. A message
// is encoded once, whatever the number of listeners.
type Events struct {
	Hub *notify.Hub
	// Version is the GNS3 version computes are reported with.
	Version string
}

// message is one notification: {"action": ..., "event": ...}.
type message struct {
	Action string `json:"action"`
	Event  any    `json:"event"`
}

// notificationRoutes answer the controller's and projects' notification
// streams.
type notificationRoutes struct {
	resource
	hub       *notify.Hub
	load      func() (cpu, mem float64) // Config.Load
	serverCtx context.Context           // Config.Context: streams end with it
	api       *API                      // who the caller is (audience)
}

// audience is whom a stream is for: the user its messages are checked
// against, each one as it is sent, on the access model's current state,
// so an ACE removed, a user disabled or deleted, takes effect on an open
// stream at its next message. The zero audience (an open server, a super
// admin) hears everything and costs nothing per message.
type audience struct {
	svc    *access.Service
	userID string
}

// audienceOf is the request's audience.
func (a *API) audienceOf(c *fiber.Ctx) audience {
	u, ok := a.caller(c)
	if !ok || u.Superadmin || a.cfg.Access == nil {
		return audience{}
	}
	return audience{svc: a.cfg.Access, userID: u.ID}
}

// auditPrivilege is the privilege that lets a user hear of the resource
// at an access path.
func auditPrivilege(about string) string {
	root, _, _ := strings.Cut(strings.TrimPrefix(about, "/"), "/")
	switch root {
	case "projects":
		return "Project.Audit"
	case "computes":
		return "Compute.Audit"
	case "templates":
		return "Template.Audit"
	}
	return "Project.Audit"
}

// hears reports whether the audience may hear a message about about.
func (au audience) hears(about string) bool {
	if au.svc == nil || about == "" {
		return true
	}
	return au.svc.Allowed(au.userID, auditPrivilege(about), about)
}

func encodeMessage(action string, payload any) []byte {
	b, err := gojson.Marshal(message{Action: action, Event: payload})
	if err != nil {
		b, _ = gojson.Marshal(message{Action: "log.error", Event: map[string]string{"message": "cannot encode " + action + ": " + err.Error()}})
	}
	return b
}

// Emit publishes a project event.
func (e *Events) Emit(ev project.Event) {
	var payload any
	switch {
	case ev.Node != nil:
		payload = nodeFrom(*ev.Node)
	case ev.Link != nil:
		payload = linkFrom(*ev.Link)
	case ev.Project != nil:
		payload = projectFrom(*ev.Project)
	case ev.Snapshot != nil:
		payload = ev.Snapshot
	case ev.Drawing != nil:
		d := drawingFrom(*ev.Drawing)
		if ev.OmitSVG {
			d.SVG = nil
		}
		payload = d
	case ev.Template != nil:
		payload = templateFrom(*ev.Template)
	default:
		payload = map[string]string{"message": ev.Message}
	}
	stream := ev.ProjectID
	if strings.HasPrefix(ev.Action, "project.") || strings.HasPrefix(ev.Action, "template.") {
		stream = notify.Controller // project lifecycle and templates are not on a project stream (GNS3)
	}
	e.Hub.PublishAbout(stream, eventAbout(ev), encodeMessage(ev.Action, payload))
}

// eventAbout is the access path of what an event concerns: its project,
// or its template; "" for a message about nothing in particular.
func eventAbout(ev project.Event) string {
	switch {
	case ev.Template != nil:
		return "/templates/" + ev.Template.ID
	case ev.ProjectID != "":
		return "/projects/" + ev.ProjectID
	case ev.Project != nil:
		return "/projects/" + ev.Project.ID
	}
	return ""
}

// ComputeChanged publishes compute.created/updated/deleted on the
// controller stream.
func (e *Events) ComputeChanged(action string, c compute.Compute) {
	j := computeFrom(c)
	if c.Connected {
		j.Capabilities.Version = &e.Version
	}
	e.Hub.PublishAbout(notify.Controller, "/computes/"+c.ID, encodeMessage(action, j))
}

// ping is the message a stream starts with and repeats when it has been
// silent for pingInterval: the controller host's load.
func (h notificationRoutes) ping() []byte {
	var cpu, mem float64
	if h.load != nil {
		cpu, mem = h.load()
	}
	return encodeMessage("ping", map[string]float64{"cpu_usage_percent": cpu, "memory_usage_percent": mem})
}

// controllerNotifications streams the controller's events as JSON lines.
func (h notificationRoutes) controllerNotifications(c *fiber.Ctx) error {
	return h.streamLines(c, notify.Controller, false, h.api.audienceOf(c))
}

// projectNotifications streams a project's events as JSON lines. The
// project need not be opened.
func (h notificationRoutes) projectNotifications(c *fiber.Ctx) error {
	p, err := h.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	return h.streamLines(c, p.ID, c.QueryBool("passive"), h.api.audienceOf(c))
}

// A passive listener (?passive=true: labtap's capture view) of a project
// stream gets the same messages but is not a client of the project: its
// leaving never auto-closes the project, and it does not keep it opened
// once the GNS3 clients have left (notify.Hub.Watch).
func (h notificationRoutes) listen(stream string, passive bool) *notify.Sub {
	if passive {
		return h.hub.Watch(stream)
	}
	return h.hub.Subscribe(stream)
}

// streamLines answers a chunked JSON-lines stream: a ping first, then every
// message of the stream, each flushed at once, and a ping after 5 s of
// silence. It ends when the client goes away, when the listener falls too
// far behind (the client reconnects), or when the server stops; the body
// then ends properly.
func (h notificationRoutes) streamLines(c *fiber.Ctx, stream string, passive bool, au audience) error {
	if h.hub == nil {
		return fiber.NewError(fiber.StatusNotImplemented, "Notifications are not enabled")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "no-store")
	done := h.serverCtx.Done()
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		sub := h.listen(stream, passive)
		defer h.hub.Unsubscribe(sub)
		send := func(msg []byte) bool {
			w.Write(msg)
			w.WriteByte('\n')
			// A client that reads nothing for this long is gone: without a
			// deadline its stream would hold this goroutine for ever, after
			// the hub has dropped it. (The WebSocket stream does the same.)
			conn.SetWriteDeadline(time.Now().Add(writeGrace))
			return w.Flush() == nil // an error: the client is gone
		}
		h.pump(sub, send, done, stream, au)
	})
	return nil
}

// pump sends a ping, then the stream's messages, with pings in silences,
// until send fails, the subscription ends, or done is closed. It sends au
// only the messages it may hear; a project stream (stream not the
// controller's) ends once au may no longer audit the project.
func (h notificationRoutes) pump(sub *notify.Sub, send func([]byte) bool, done <-chan struct{}, stream string, au audience) {
	send = cutOnFailure(send)
	// The project of a project stream, which au must keep auditing.
	own := ""
	if stream != notify.Controller {
		own = "/projects/" + stream
	}
	if !send(h.ping()) {
		return
	}
	t := time.NewTimer(pingInterval)
	defer t.Stop()
	for {
		select {
		case msg, ok := <-sub.C:
			if !ok || !au.hears(own) {
				return
			}
			if !au.hears(msg.About) {
				continue
			}
			if !send(msg.Data) {
				return
			}
			t.Reset(pingInterval)
		case <-t.C:
			if !au.hears(own) || !send(h.ping()) {
				return
			}
			t.Reset(pingInterval)
		case <-done:
			return
		}
	}
}

// cutOnFailure wraps send so that a failed write is reported to the
// streamCut hook.
func cutOnFailure(send func([]byte) bool) func([]byte) bool {
	hook := streamCut
	if hook == nil {
		return send
	}
	return func(msg []byte) bool {
		ok := send(msg)
		if !ok {
			hook()
		}
		return ok
	}
}

// websocketOnly refuses a plain request on a WebSocket route.
func websocketOnly(next fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if !websocket.IsWebSocketUpgrade(c) {
			return fiber.NewError(fiber.StatusUpgradeRequired, "This route speaks WebSocket only")
		}
		return next(c)
	}
}

// controllerNotificationsWS streams the controller's events, one text
// frame per message.
func (h notificationRoutes) controllerNotificationsWS() fiber.Handler {
	ws := websocket.New(func(conn *websocket.Conn) {
		h.streamFrames(conn, notify.Controller, false, conn.Locals(audienceKey).(audience))
	})
	return websocketOnly(func(c *fiber.Ctx) error {
		c.Locals(audienceKey, h.api.audienceOf(c))
		return ws(c)
	})
}

// audienceKey is where a WebSocket stream finds its audience.
const audienceKey = "labtap.audience"

// projectNotificationsWS streams a project's events over WebSocket.
func (h notificationRoutes) projectNotificationsWS() fiber.Handler {
	ws := websocket.New(func(conn *websocket.Conn) {
		h.streamFrames(conn, conn.Params("project_id"), conn.Query("passive") == "true" || conn.Query("passive") == "1",
			conn.Locals(audienceKey).(audience))
	})
	return websocketOnly(func(c *fiber.Ctx) error {
		if _, err := h.projects.Project(c.Params("project_id")); err != nil {
			return err
		}
		c.Locals(audienceKey, h.api.audienceOf(c))
		return ws(c)
	})
}

func (h notificationRoutes) streamFrames(conn *websocket.Conn, stream string, passive bool, au audience) {
	if h.hub == nil {
		return
	}
	sub := h.listen(stream, passive)
	defer h.hub.Unsubscribe(sub)
	var wg sync.WaitGroup // both end once the reader stops, below
	defer wg.Wait()
	gone := make(chan struct{})
	wg.Go(func() { // reads only to notice the client leaving
		defer close(gone)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	})
	stop := make(chan struct{})
	wg.Go(func() {
		select {
		case <-gone:
		case <-h.serverCtx.Done():
		}
		close(stop)
	})
	h.pump(sub, func(msg []byte) bool {
		conn.SetWriteDeadline(time.Now().Add(writeGrace))
		return conn.WriteMessage(websocket.TextMessage, msg) == nil
	}, stop, stream, au)
	// fasthttp closes a hijacked connection only once this handler has
	// returned: a read deadline is what ends the reader now.
	conn.SetReadDeadline(time.Now())
	conn.Close()
}
