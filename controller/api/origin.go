package api

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
)

// A page a user visits can make the browser send requests to any server,
// with the credentials the browser holds for it: a form or fetch POST in
// text/plain needs no preflight, and a WebSocket none at all. So a state
// change (any method but GET, HEAD and OPTIONS) or a WebSocket handshake
// coming from a page is refused, with or without authentication, unless
// the page is the server's own or an allowed origin. Browsers say where a
// request comes from in Origin, and in Sec-Fetch-Site, which a page
// cannot set. Clients that are not browsers (the GNS3 GUI, whose Qt
// requests and WebSockets carry no Origin; gns3fy; curl) send neither and
// are not affected.
//
// Go's http.CrossOriginProtection does much the same, but lets any
// Origin through that Sec-Fetch-Site calls same-origin, compares hosts
// without their scheme, and never looks at a GET, which a WebSocket
// handshake is.

// maxOrigins and maxOriginLen bound Config.AllowedOrigins.
const (
	maxOrigins   = 64
	maxOriginLen = 256
)

// checkOrigin is the middleware refusing cross-origin state changes and
// WebSockets with 403 before any route runs.
func (a *API) checkOrigin(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		if !websocket.IsWebSocketUpgrade(c) {
			return c.Next()
		}
	}
	if !a.sameOrigin(c) {
		c.Context().SetConnectionClose() // a streamed body stays unread
		return fiber.NewError(fiber.StatusForbidden, "Cross-origin request refused: this server takes state changes and WebSockets from its own pages and the allowed origins only (--allowed-origins)")
	}
	return c.Next()
}

// sameOrigin reports whether a request comes from no page, the server's
// own (its scheme, and the host and port of its Host header or of the
// address it was received on) or an allowed origin.
func (a *API) sameOrigin(c *fiber.Ctx) bool {
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		// A browser that names no origin still says whether the request
		// crosses sites.
		switch c.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return true
		}
		return false
	}
	o, ok := canonicalOrigin(origin)
	if !ok {
		return false // "null" (a sandboxed frame, a file), or nonsense
	}
	if slices.Contains(a.origins, o) {
		return true
	}
	scheme := c.Protocol()
	for _, host := range []string{string(c.Request().Header.Host()), c.Context().LocalAddr().String()} {
		if own, ok := canonicalOrigin(scheme + "://" + host); ok && own == o {
			return true
		}
	}
	return false
}

// canonicalOrigin is an origin as "scheme://host:port", lower case, with
// the scheme's default port written out; ok is false for anything that is
// not an http or https origin.
func canonicalOrigin(s string) (string, bool) {
	if len(s) > maxOriginLen {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case scheme != "http" && scheme != "https":
		return "", false
	case port == "" && scheme == "http":
		port = "80"
	case port == "":
		port = "443"
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(host, port), true
}

// ParseOrigins checks a list of allowed origins ("https://webui.example",
// "http://10.0.0.5:4200") and returns them in the form requests are
// compared in.
func ParseOrigins(list []string) ([]string, error) {
	if len(list) > maxOrigins {
		return nil, fmt.Errorf("%d allowed origins: at most %d", len(list), maxOrigins)
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		o, ok := canonicalOrigin(strings.TrimSpace(s))
		if !ok {
			return nil, fmt.Errorf("allowed origin %.64q: want scheme://host[:port] (http or https, no path)", s)
		}
		out = append(out, o)
	}
	return out, nil
}
