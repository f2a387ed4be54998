package api

import (
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
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
