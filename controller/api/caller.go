package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/access"
)

// callerKey is where basicAuth leaves the request's authenticated user.
const callerKey = "labtap.caller"

// caller returns the request's authenticated user; ok is false when the server runs open
// (no credentials configured): then every request may do everything, as today.
func (a *API) caller(c *fiber.Ctx) (u access.User, ok bool) {
	if !a.authOn() {
		return access.User{}, false
	}
	u, ok = c.Locals(callerKey).(access.User)
	return u, ok
}

// allowed reports whether the request's caller holds privilege on the resource path
// (GNS3 3.x's paths: "/projects", "/projects/<id>", "/templates/<id>", "/computes/<id>"...);
// true on an open server and for a superadmin.
func (a *API) allowed(c *fiber.Ctx, privilege, path string) bool {
	u, ok := a.caller(c)
	if !ok {
		// Open server; or a request authentication did not pass, which
		// never reaches a route.
		return !a.authOn()
	}
	if u.Superadmin {
		return true
	}
	if a.cfg.Access == nil {
		return false
	}
	return a.cfg.Access.Allowed(u.ID, privilege, path)
}
