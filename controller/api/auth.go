package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/access"
)

// Authentication, when the server has credentials (Config.Access, the
// access database's users; or, without it, the one Config.User and
// Password), covers every request the API answers: each route, the
// WebSockets and streams among them, the capture view, /metrics, and
// paths no route has. It runs before any route, so a request without
// right credentials learns nothing of what exists (an unknown node and a
// known one both answer 401). GNS3 exempts the console WebSocket; labtap
// does not. Each request is authenticated as one user, whom the routes
// then authorise (caller, allowed).
//
// Credentials come as HTTP Basic, a user's name and password, which the
// GNS3 GUI sends on every request and WebSocket and a browser sends by
// itself once its user has answered the 401's prompt for the origin; or
// as "Bearer <token>", a token of /v3/access/users/login. Verified Basic
// credentials are cached by the access model, so a request does not cost
// a password hash. A page cannot set a header on a WebSocket, so a
// WebSocket handshake may carry them instead as ?token=: a token, or the
// text that follows "Basic " in the header. It is taken off the request
// before any handler runs, and the access log never writes query
// strings. Plain routes do not take it: a URL with a secret in it ends up
// in histories, logs and Referer headers.

// tokenParam is the query parameter of a WebSocket handshake's
// credentials.
const tokenParam = "token"

// maxAuthorization bounds the credentials looked at; longer ones fail.
const maxAuthorization = 4096

// basicAuth is the middleware requiring credentials. A failure is 401
// with an empty body, GNS3's realm, and the connection closed; an address
// with too many recent failures gets 429 for a while, right credentials
// or not. The user authenticated is left in the request for caller.
func (a *API) basicAuth(c *fiber.Ctx) error {
	// Read without the copy c.Get makes (the app is Immutable): it lives
	// no longer than the request.
	credentials := string(c.Request().Header.Peek(fiber.HeaderAuthorization))
	if websocket.IsWebSocketUpgrade(c) {
		args := c.Request().URI().QueryArgs()
		if token := args.Peek(tokenParam); credentials == "" && len(token) > 0 {
			if bytes.Count(token, []byte(".")) == 2 { // a JWT; base64 has no dots
				credentials = "Bearer " + string(token)
			} else {
				// A "+" of the base64 text left unescaped reads as a space.
				credentials = "Basic " + strings.ReplaceAll(string(token), " ", "+")
			}
		}
		args.Del(tokenParam) // handlers never see it
	}
	ip := c.Context().RemoteIP().String()
	u, ok, wait := a.authenticate(c.UserContext(), ip, credentials)
	switch {
	case wait > 0:
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfter(wait)))
		c.Context().SetConnectionClose() // a streamed body stays unread
		return fiber.NewError(fiber.StatusTooManyRequests, "Too many failed authentication attempts from "+ip+": try again later")
	case !ok:
		c.Set(fiber.HeaderWWWAuthenticate, `Basic realm="GNS3 server"`)
		c.Set(fiber.HeaderConnection, "close")
		c.Response().Header.SetNoDefaultContentType(true)
		c.Status(fiber.StatusUnauthorized) // SendStatus would add a text body
		return nil
	}
	c.Locals(callerKey, u)
	return c.Next()
}

// authenticate is the one check of a request's credentials, for every
// route of the API and for the profiles (Guard): ip is the client's
// address and credentials the Authorization header's value. It returns
// the user they are, or how long ip must wait after too many failures
// (then ok is false whatever the credentials). A wrong attempt counts
// towards the wait; none at all does not.
//
// With the access database, it is the truth: --user and --password made
// its first super admin, and once that user's password is changed there,
// the flag's password no longer opens /v2 either. Without it (the flags
// could not make a user), the flags' credential is the one user, a super
// admin.
func (a *API) authenticate(ctx context.Context, ip, credentials string) (u access.User, ok bool, wait time.Duration) {
	if wait := a.auth.blocked(ip); wait > 0 {
		return access.User{}, false, wait
	}
	if len(credentials) > maxAuthorization {
		credentials = credentials[:maxAuthorization] // fails, and is counted
	}
	scheme, value, _ := strings.Cut(credentials, " ")
	user := ""
	switch {
	case a.cfg.Access != nil && strings.EqualFold(scheme, "Bearer"):
		var err error
		if u, err = a.cfg.Access.AuthenticateToken(ctx, strings.TrimSpace(value)); err == nil {
			return u, true, 0
		}
	case a.cfg.Access != nil:
		var pass string
		var parsed bool
		if user, pass, parsed = parseBasic(credentials); parsed {
			var err error
			if u, err = a.cfg.Access.Authenticate(ctx, user, pass); err == nil {
				return u, true, 0
			}
		}
	default:
		var pass string
		var parsed bool
		user, pass, parsed = parseBasic(credentials)
		// Compare both, always, in constant time: no early exit tells
		// which one was wrong.
		okUser := subtle.ConstantTimeCompare([]byte(user), []byte(a.cfg.User)) == 1
		okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(a.cfg.Password)) == 1
		if parsed && okUser && okPass {
			return access.User{Username: user, Active: true, Superadmin: true}, true, 0
		}
	}
	if credentials != "" {
		a.auth.failed(ip, user)
	}
	return access.User{}, false, 0
}

// Guard puts h (a net/http handler served beside the API, such as the
// profiles) behind the API's authentication: the same credentials, the
// same throttle of failures, and for administrators only (the super
// admin, or the Administrator role on "/"). With authentication off it
// returns h.
func (a *API) Guard(h http.Handler) http.Handler {
	if !a.authOn() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		switch u, ok, wait := a.authenticate(r.Context(), ip, r.Header.Get("Authorization")); {
		case wait > 0:
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter(wait)))
			http.Error(w, "too many failed authentication attempts: try again later", http.StatusTooManyRequests)
		case !ok:
			w.Header().Set("WWW-Authenticate", `Basic realm="GNS3 server"`)
			w.WriteHeader(http.StatusUnauthorized)
		case !u.Superadmin && (a.cfg.Access == nil || !a.cfg.Access.Administrator(u.ID)):
			http.Error(w, "Permission denied (administrators only)", http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// authOn reports whether authentication is required.
func (a *API) authOn() bool {
	return a.cfg.Access != nil || a.cfg.User != "" && a.cfg.Password != ""
}

func parseBasic(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) > maxAuthorization || len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}
