package api

import (
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
)

// Authentication, when Config.User and Password are set, covers every
// request the API answers: each route, the WebSockets and streams among
// them, the capture view, /metrics, and paths no route has. It runs before
// any route, so a request without the right credentials learns nothing of
// what exists (an unknown node and a known one both answer 401). GNS3
// exempts the console WebSocket; labtap does not.
//
// Credentials come as HTTP Basic, which the GNS3 GUI sends on every
// request and WebSocket, and a browser sends by itself once its user has
// answered the 401's prompt for the origin. A page cannot set a header on
// a WebSocket, so a WebSocket handshake may carry them instead as
// ?token=, the text that follows "Basic " in the header. The token is
// taken off the request before any handler runs, and the access log never
// writes query strings. Plain routes do not take it: a URL with a secret
// in it ends up in histories, logs and Referer headers.

// tokenParam is the query parameter of a WebSocket handshake's
// credentials.
const tokenParam = "token"

// maxAuthorization bounds the credentials looked at; longer ones fail.
const maxAuthorization = 1024

// basicAuth is the middleware requiring credentials. A failure is 401
// with an empty body, GNS3's realm, and the connection closed; an address
// with too many recent failures gets 429 for a while, right credentials
// or not.
func (a *API) basicAuth(c *fiber.Ctx) error {
	credentials := c.Get(fiber.HeaderAuthorization)
	if websocket.IsWebSocketUpgrade(c) {
		args := c.Request().URI().QueryArgs()
		if token := args.Peek(tokenParam); credentials == "" && len(token) > 0 {
			// A "+" of the base64 text left unescaped reads as a space.
			credentials = "Basic " + strings.ReplaceAll(string(token), " ", "+")
		}
		args.Del(tokenParam) // handlers never see it
	}
	ip := c.Context().RemoteIP().String()
	switch ok, wait := a.authenticate(ip, credentials); {
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
	return c.Next()
}

// authenticate is the one check of a request's credentials, for every
// route of the API and for the profiles (Guard): ip is the client's
// address and credentials the Authorization header's value. It reports
// whether they are right, or how long ip must wait after too many
// failures (then ok is false whatever the credentials). A wrong attempt
// counts towards the wait; none at all does not.
func (a *API) authenticate(ip, credentials string) (ok bool, wait time.Duration) {
	if wait := a.auth.blocked(ip); wait > 0 {
		return false, wait
	}
	user, pass, parsed := parseBasic(credentials)
	// Compare both, always, in constant time: no early exit tells which
	// one was wrong.
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(a.cfg.User)) == 1
	okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(a.cfg.Password)) == 1
	if parsed && okUser && okPass {
		return true, 0
	}
	if credentials != "" {
		a.auth.failed(ip, user)
	}
	return false, 0
}

// Guard puts h (a net/http handler served beside the API, such as the
// profiles) behind the API's authentication: the same credentials, the
// same throttle of failures. With authentication off it returns h.
func (a *API) Guard(h http.Handler) http.Handler {
	if !a.authOn() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		switch ok, wait := a.authenticate(ip, r.Header.Get("Authorization")); {
		case wait > 0:
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter(wait)))
			http.Error(w, "too many failed authentication attempts: try again later", http.StatusTooManyRequests)
		case !ok:
			w.Header().Set("WWW-Authenticate", `Basic realm="GNS3 server"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// authOn reports whether authentication is required.
func (a *API) authOn() bool { return a.cfg.User != "" && a.cfg.Password != "" }

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
