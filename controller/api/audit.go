package api

import (
	"strings"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
)

// The audit trail: one JSON line for every change made through the API
// (a POST, PUT, PATCH or DELETE, whatever its answer) and for every
// refusal of any request (401, 403, 409, 429), written to Config.Audit
// when a request is answered (observe calls audit). A line says who
// (the caller's username and id; none on an open server or before
// authentication), from where (the client address), when, what (method
// and route template), on which objects (the ids the path names, and
// those a created object's reply names) and the answer (status, and a
// refusal's message). It never holds a query string, a header or a
// request body: passwords, tokens and Basic credentials stay out.

// AuditRecord is one line of the audit trail.
type AuditRecord struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user,omitempty"`
	UserID string    `json:"user_id,omitempty"`
	Client string    `json:"client"`
	Method string    `json:"method"`
	// Route is the route's template ("/v2/projects/{project_id}"), or
	// "unmatched" for a path no route has.
	Route string `json:"route"`
	// Objects are the ids the path names, by the template's names
	// (project_id, node_id...), and the *_id members of a created
	// object's reply.
	Objects map[string]string `json:"objects,omitempty"`
	Status  int               `json:"status"`
	// Message is a refusal's message (which quota, which privilege).
	Message string `json:"message,omitempty"`
}

// Bounds of what a line takes from a request and its reply.
const (
	maxAuditID      = 128      // an id, cut beyond
	maxAuditMessage = 512      // a refusal's message, cut beyond
	maxAuditReply   = 64 << 10 // a reply read for created ids; larger ones are not read
)

// audited reports whether a request with this method and answer goes to
// the audit trail: every change, and every refusal.
func audited(method string, status int) bool {
	switch method {
	case fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete:
		return true
	}
	return isRefusal(status)
}

// isRefusal reports whether status is a refusal: not authenticated, not
// allowed, over a quota or in conflict, throttled.
func isRefusal(status int) bool {
	switch status {
	case fiber.StatusUnauthorized, fiber.StatusForbidden, fiber.StatusConflict, fiber.StatusTooManyRequests:
		return true
	}
	return false
}

// audit writes the request's line, if it has one, once it is answered;
// route is its template ("unmatched" if none).
func (a *API) audit(c *fiber.Ctx, route string, now time.Time) {
	if a.cfg.Audit == nil {
		return
	}
	status := c.Response().StatusCode()
	if !audited(c.Method(), status) {
		return
	}
	r := AuditRecord{Time: now.UTC(), Client: c.Context().RemoteIP().String(), Method: c.Method(), Route: route, Status: status}
	if u, ok := a.caller(c); ok {
		r.User, r.UserID = u.Username, u.ID
	}
	if route == "unmatched" {
		// Refused before any route ran (authentication): name the route
		// the request was for, when there is one.
		for _, rt := range a.routes {
			if rt.Method == r.Method && matchTemplate(rt.Template, c.Path()) {
				r.Route = rt.Template
				break
			}
		}
	}
	if r.Route != "unmatched" {
		r.Objects = pathIDs(r.Route, c.Path())
	}
	if !c.Response().IsBodyStream() {
		body := c.Response().Body()
		if status == fiber.StatusCreated {
			r.Objects = createdIDs(body, r.Objects)
		}
		if isRefusal(status) {
			r.Message = replyMessage(body)
		}
	}
	line, err := gojson.Marshal(r)
	if err != nil {
		return
	}
	if _, err := a.cfg.Audit.Write(append(line, '\n')); err != nil {
		a.log.Error("audit trail: write failed", "err", err)
	}
}

// pathIDs are the values the path gives the template's {name} segments
// (a greedy {name:.+} takes the rest of the path), each cut to
// maxAuditID.
func pathIDs(template, path string) map[string]string {
	ts := strings.Split(template, "/")
	ps := strings.Split(strings.TrimSuffix(path, "/"), "/")
	var out map[string]string
	for i, t := range ts {
		if i >= len(ps) || !strings.HasPrefix(t, "{") {
			continue
		}
		name, greedy := strings.CutSuffix(strings.Trim(t, "{}"), ":.+")
		v := ps[i]
		if greedy {
			v = strings.Join(ps[i:], "/")
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = truncateString(v, maxAuditID)
	}
	return out
}

// createdIDs adds the string members named *_id of a created object's
// JSON reply to ids (a path's own id wins).
func createdIDs(body []byte, ids map[string]string) map[string]string {
	if len(body) == 0 || len(body) > maxAuditReply || body[0] != '{' {
		return ids
	}
	var obj map[string]any
	if gojson.Unmarshal(body, &obj) != nil {
		return ids
	}
	for k, v := range obj {
		s, ok := v.(string)
		if !ok || !strings.HasSuffix(k, "_id") || len(k) > 64 || s == "" {
			continue
		}
		if ids == nil {
			ids = map[string]string{}
		}
		if _, taken := ids[k]; !taken {
			ids[k] = truncateString(s, maxAuditID)
		}
	}
	return ids
}

// replyMessage is the "message" of a JSON error reply, cut to
// maxAuditMessage.
func replyMessage(body []byte) string {
	if len(body) == 0 || len(body) > maxAuditReply || body[0] != '{' {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if gojson.Unmarshal(body, &e) != nil {
		return ""
	}
	return truncateString(e.Message, maxAuditMessage)
}
