package api

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// GNS3's forwarded compute calls: the GUI
// reaches a compute's own API through the controller with
// /v2/computes/{compute_id}/{emulator}/{action}, and asks where to upload
// an image directly with /v2/computes/endpoint/.... labtap's agents speak
// their own API, so the controller answers these itself: the calls of the
// emulators labtap runs have routes of their own (QEMU images, binaries
// and capabilities, Docker images), registered before these; any other
// action of those emulators is 404 naming it, and every call of an
// emulator labtap does not run is 409 saying so (never 503, which
// disconnects the GUI).

const (
	rForward  = "/v2/computes/{compute_id}/{emulator}/{action:.+}"
	rEndpoint = "/v2/computes/endpoint/{compute_id}/{emulator}/{action:.+}"
)

// forwardedActions are the compute calls labtap answers, per emulator it
// runs (each has its own route).
var forwardedActions = map[string][]string{
	"qemu":            {"GET images", "POST images/{filename}", "GET binaries", "GET img-binaries", "GET capabilities", "POST img", "PUT img"},
	"docker":          {"GET images"},
	"vpcs":            nil,
	"ethernet_switch": nil,
	"ethernet_hub":    nil,
	"cloud":           nil,
}

// maxAction bounds the action path of a forwarded call.
const maxAction = 1024

func (a *API) registerForward(app *fiber.App) {
	// The endpoint first: its path also fits the forward's template.
	a.handle(app, "GET", rEndpoint, a.computeEndpoint)
	for _, m := range []string{"GET", "POST", "PUT"} {
		a.handle(app, m, rForward, a.forwardCompute)
	}
}

// forwardedCall checks a forwarded call's compute, emulator and action,
// and says whether labtap answers the call at all.
func (a *API) forwardedCall(c *fiber.Ctx) (emulator, action string, err error) {
	id := c.Params("compute_id")
	if _, ok := a.computes.Get(id); !ok {
		return "", "", &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	emulator = c.Params("emulator")
	action, uerr := url.PathUnescape(c.Params("*"))
	if len(emulator) > 64 || len(action) > maxAction || uerr != nil || action == "" || strings.ContainsAny(emulator+action, "\x00\\") {
		return "", "", &project.Error{Kind: project.ErrInvalid, Msg: "Invalid compute call"}
	}
	if _, runs := forwardedActions[emulator]; !runs {
		return "", "", &project.Error{Kind: project.ErrConflict, Msg: fmt.Sprintf("%s is not supported by this server", emulator)}
	}
	return emulator, action, nil
}

// forwardCompute answers a compute call no route of its own took.
func (a *API) forwardCompute(c *fiber.Ctx) error {
	emulator, action, err := a.forwardedCall(c)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%s /%s/%s not found", c.Method(), emulator, action)
	if list := forwardedActions[emulator]; len(list) > 0 {
		msg += fmt.Sprintf(" (this server answers %s)", strings.Join(slices.Clone(list), ", "))
	}
	return &project.Error{Kind: project.ErrNotFound, Msg: msg}
}

// computeEndpoint tells a client where to send a compute call: the
// controller's own forwarded route (an agent's address and secret are the
// controller's only).
func (a *API) computeEndpoint(c *fiber.Ctx) error {
	emulator, action, err := a.forwardedCall(c)
	if err != nil {
		return err
	}
	parts := strings.Split(action, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.JSON(fiber.Map{"endpoint": c.BaseURL() + "/v2/computes/" + url.PathEscape(c.Params("compute_id")) + "/" +
		url.PathEscape(emulator) + "/" + strings.Join(parts, "/")})
}

// forwardRouteDocs document registerForward's routes.
var forwardRouteDocs = map[string]routeDoc{
	"GET " + rEndpoint: {"Where to send a compute call: the controller's own route for it (emulators labtap does not run: 409)", "", 200, "settings", []int{400, 404, 409}},
	"GET " + rForward:  {"A compute call labtap has no route for: 404 naming it; emulators labtap does not run: 409", "", 404, "", []int{400, 404, 409}},
	"POST " + rForward: {"A compute call labtap has no route for: 404 naming it; emulators labtap does not run: 409", "", 404, "", []int{400, 404, 409}},
	"PUT " + rForward:  {"A compute call labtap has no route for: 404 naming it; emulators labtap does not run: 409", "", 404, "", []int{400, 404, 409}},
}

func init() { maps.Copy(guiRouteDocs, forwardRouteDocs) }
