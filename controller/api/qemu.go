package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
)

// QemuComputes is what the QEMU wizard's routes need of the compute
// registry. *compute.Registry satisfies it.
type QemuComputes interface {
	Images(ctx context.Context, computeID, nodeType string) ([]compute.Image, error)
	UploadImage(ctx context.Context, computeID, nodeType, path string, body io.Reader, size int64) error
	QemuBinaries(ctx context.Context, computeID string, archs []string) ([]compute.QemuBinary, error)
	QemuImgBinaries(ctx context.Context, computeID string) ([]compute.QemuBinary, error)
	QemuCapabilities(ctx context.Context, computeID string) (compute.QemuCapabilities, error)
}

// imageUploadPrefix starts the one route whose body is streamed (GNS3
// image uploads can be gigabytes); every other body is held to BodyLimit.
const imageUploadPrefix = "/v2/computes/"

// registerQemu adds the routes the GNS3 QEMU wizard and configuration
// pages call (nodes-docker-qemu.md 4.8 and 5).
func (a *API) registerQemu(app *fiber.App) {
	const c = "/v2/computes/{compute_id}/qemu"
	a.handle(app, "GET", c+"/images", a.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		list, err := q.Images(ctx.UserContext(), ctx.Params("compute_id"), "qemu")
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	}))
	a.handle(app, "POST", c+"/images/{filename}", a.qemu(a.uploadImage))
	a.handle(app, "GET", c+"/binaries", a.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		var archs []string
		if s := ctx.Query("archs"); s != "" {
			archs = strings.Split(s, ",")
		}
		var body struct {
			Archs []string `json:"archs"`
		}
		if raw := ctx.Request().Body(); len(raw) > 0 && len(raw) < 4096 && ctx.App().Config().JSONDecoder(raw, &body) == nil {
			archs = append(archs, body.Archs...) // the GUI sends a body on a GET
		}
		list, err := q.QemuBinaries(ctx.UserContext(), ctx.Params("compute_id"), archs)
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	}))
	a.handle(app, "GET", c+"/img-binaries", a.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		list, err := q.QemuImgBinaries(ctx.UserContext(), ctx.Params("compute_id"))
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	}))
	a.handle(app, "GET", c+"/capabilities", a.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		caps, err := q.QemuCapabilities(ctx.UserContext(), ctx.Params("compute_id"))
		if err != nil {
			return err
		}
		return ctx.JSON(caps)
	}))
}

// qemu hands a handler the registry's QEMU side.
func (a *API) qemu(h func(QemuComputes, *fiber.Ctx) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		q, ok := a.computes.(QemuComputes)
		if !ok {
			return &project.Error{Kind: project.ErrConflict, Msg: "This controller has no QEMU support"}
		}
		if id := c.Params("compute_id"); id != "" {
			if _, ok := a.computes.Get(id); !ok {
				return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
			}
		}
		return h(q, c)
	}
}

// uploadImage streams the raw body to the compute's images folder: GNS3
// answers 200 with {}. A name that would leave the folder is 403.
func (a *API) uploadImage(q QemuComputes, c *fiber.Ctx) error {
	name, err := url.PathUnescape(c.Params("filename"))
	if err != nil {
		return fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("Could not write image: %s is forbidden", c.Params("filename")))
	}
	clean := path.Clean("/" + name)[1:]
	if name == "" || clean != name || strings.HasPrefix(path.Base(name), ".") || strings.ContainsRune(name, 0) {
		return fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("Could not write image: %s, %s is forbidden", path.Base(name), name))
	}
	var body io.Reader = c.Context().RequestBodyStream()
	size := int64(c.Request().Header.ContentLength())
	if body == nil || !c.Request().IsBodyStream() {
		raw := c.Request().Body()
		body, size = bytes.NewReader(raw), int64(len(raw))
	}
	if size < 0 {
		size = -1
	}
	if err := q.UploadImage(c.UserContext(), c.Params("compute_id"), "qemu", name, body, size); err != nil {
		return err
	}
	return c.JSON(fiber.Map{})
}

// isImageUpload reports a QEMU image upload's path, whose body is streamed
// to disk under its own cap (boundBody lets it through).
func isImageUpload(path string) bool {
	return strings.HasPrefix(path, imageUploadPrefix) && strings.Contains(path, "/qemu/images/")
}
