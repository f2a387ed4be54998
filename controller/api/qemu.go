package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// QemuComputes is what the QEMU wizard's routes need of the computes'
// agents (part of Agents).
type QemuComputes interface {
	Images(ctx context.Context, computeID, nodeType string) ([]compute.Image, error)
	UploadImage(ctx context.Context, computeID, nodeType, path string, body io.Reader, size int64) error
	QemuBinaries(ctx context.Context, computeID string, archs []string) ([]compute.QemuBinary, error)
	QemuImgBinaries(ctx context.Context, computeID string) ([]compute.QemuBinary, error)
	QemuCapabilities(ctx context.Context, computeID string) (compute.QemuCapabilities, error)
	OpenImage(ctx context.Context, computeID, nodeType, path string) (io.ReadCloser, int64, error)
	CreateQemuImg(ctx context.Context, computeID string, c proto.QemuImgCreate) error
	ResizeQemuImg(ctx context.Context, computeID string, c proto.QemuImgResize) error
}

// imageUploadPrefix starts the image upload routes, whose bodies are
// streamed (GNS3 image uploads can be gigabytes): /v2/computes/{id}/...
// and the web UI's /v2/compute/...; every other body is held to
// BodyLimit.
const imageUploadPrefix = "/v2/compute"

// The route docs and request schemas of this file, added to the shared
// maps before New reads them.
func init() {
	maps.Copy(routeDocs, qemuRouteDocs)
	maps.Copy(schemaSources, qemuSchemas)
	maps.Copy(responseSchemas, qemuResponseSchemas)
}

var qemuRouteDocs = map[string]routeDoc{
	"POST /v2/computes/{compute_id}/qemu/img":                    {"Create a disk image with qemu-img create in the compute's images folder (relative path) or as a QEMU node's disk (hd?_disk.<format> in its folder); preallocated disks must fit the free space", "qemu_img_create", 200, "empty", []int{400, 403, 404, 409, 413}},
	"PUT /v2/computes/{compute_id}/qemu/img":                     {"Grow a disk image with qemu-img resize (images folder or a QEMU node's disk)", "qemu_img_resize", 200, "empty", []int{400, 403, 404, 409, 413}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/resize_disk": {"Grow a disk of a stopped QEMU node by extend MB (its own overlay or copy, never the base image)", "resize_disk", 201, "", bodyErrs},
	"GET /v2/compute/qemu/images":                                {"The web UI's QEMU image list: the local compute's", "", 200, "images", []int{409}},
	"POST /v2/compute/qemu/images/{filename:.+}":                 {"The web UI's QEMU image upload to the local compute (raw body, streamed)", "raw", 204, "", []int{400, 403, 409}},
	"GET /v2/compute/qemu/images/{filename:.+}":                  {"Read a QEMU image of the local compute back", "", 200, "file", []int{403, 404, 409}},
	"POST /v2/compute/qemu/img":                                  {"The web UI's disk creation on the local compute (qemu-img create; same places as the computes route): 201, no body", "qemu_img_create", 201, "", []int{400, 403, 409, 413}},
	"PUT /v2/compute/qemu/img":                                   {"Grow a disk image of the local compute (qemu-img resize): 201, no body", "qemu_img_resize", 201, "", []int{400, 403, 404, 409, 413}},
	"GET /v2/compute/docker/images":                              {"The web UI's Docker image list: the local compute's Engine tags", "", 200, "docker_images", []int{404, 409}},
}

// qemuSchemas are GNS3's bodies of the disk routes, bounded.
var qemuSchemas = map[string]string{
	"qemu_img_create": `{"type": "object", "properties": {
		"qemu_img": {"type": "string", "maxLength": 4096, "description": "ignored: the compute runs its own qemu-img"},
		"path": {"type": "string", "minLength": 1, "maxLength": 4096},
		"format": {"enum": ["qcow2", "qcow", "vpc", "vdi", "vmdk", "raw"]},
		"size": {"type": "integer", "minimum": 1, "maximum": 2097152, "description": "MB"},
		"preallocation": {"enum": ["off", "metadata", "falloc", "full"]},
		"cluster_size": {"type": "integer", "minimum": 512, "maximum": 2097152},
		"refcount_bits": {"type": "integer", "minimum": 1, "maximum": 64},
		"lazy_refcounts": {"enum": ["on", "off"]},
		"subformat": {"enum": ["dynamic", "fixed", "monolithicSparse", "monolithicFlat", "twoGbMaxExtentSparse", "twoGbMaxExtentFlat", "streamOptimized"]},
		"static": {"enum": ["on", "off"]}, "zeroed_grain": {"enum": ["on", "off"]},
		"adapter_type": {"enum": ["ide", "lsilogic", "buslogic", "legacyESX"]}},
		"required": ["path", "format", "size"], "additionalProperties": false}`,
	"qemu_img_resize": `{"type": "object", "properties": {
		"qemu_img": {"type": "string", "maxLength": 4096, "description": "ignored: the compute runs its own qemu-img"},
		"path": {"type": "string", "minLength": 1, "maxLength": 4096},
		"extend": {"type": "integer", "minimum": 1, "maximum": 2097152, "description": "MB"}},
		"required": ["path", "extend"], "additionalProperties": false}`,
	"resize_disk": `{"type": "object", "properties": {
		"drive_name": {"enum": ["hda", "hdb", "hdc", "hdd"]},
		"extend": {"type": "integer", "minimum": 1, "maximum": 2097152, "description": "MB"}},
		"required": ["drive_name", "extend"], "additionalProperties": false}`,
}

var qemuResponseSchemas = map[string]string{
	"endpoint": `{"type": "object", "properties": {"endpoint": {"type": "string"}}}`,
}

// localCompute is the compute the web UI's /v2/compute/... routes reach
// (in GNS3 the controller process serves its local compute there).
const localCompute = "local"

// computeOf is the route's compute: its compute_id, or the local one for
// the /v2/compute/... aliases.
func computeOf(c *fiber.Ctx) string {
	if id := c.Params("compute_id"); id != "" {
		return id
	}
	return localCompute
}

// qemuRoutes answer the QEMU image and disk routes.
type qemuRoutes struct {
	resource
	computes Computes
	agents   Agents // nil: no QEMU support (Config.Agents)
}

// registerQemu adds the routes the GNS3 QEMU wizard and configuration
// pages call.
func (a *API) registerQemu(app *fiber.App) {
	const c = "/v2/computes/{compute_id}/qemu"
	qr := qemuRoutes{a.resource(), a.computes, a.cfg.Agents}
	listImages := qr.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		list, err := q.Images(ctx.UserContext(), computeOf(ctx), "qemu")
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	})
	a.handle(app, "GET", c+"/images", listImages)
	a.handle(app, "POST", c+"/images/{filename}", qr.qemu(qr.uploadImage(fiber.StatusOK)))
	a.handle(app, "POST", c+"/img", qr.qemu(qr.createQemuImg(fiber.StatusOK)))
	a.handle(app, "PUT", c+"/img", qr.qemu(qr.resizeQemuImg(fiber.StatusOK)))
	a.handle(app, "POST", "/v2/projects/{project_id}/nodes/{node_id}/resize_disk", qr.resizeDisk)
	// The compute routes the web UI calls on the controller itself.
	const local = "/v2/compute/qemu"
	a.handle(app, "GET", local+"/images", listImages)
	a.handle(app, "POST", local+"/images/{filename:.+}", qr.qemu(qr.uploadImage(fiber.StatusNoContent)))
	// Streamed after the handler returns: its context must outlive it.
	a.handleStream(app, "GET", local+"/images/{filename:.+}", qr.qemu(qr.downloadImage))
	a.handle(app, "POST", local+"/img", qr.qemu(qr.createQemuImg(fiber.StatusCreated)))
	a.handle(app, "PUT", local+"/img", qr.qemu(qr.resizeQemuImg(fiber.StatusCreated)))
	cmr := a.computeRoutes()
	a.handle(app, "GET", "/v2/compute/docker/images", cmr.dockerImages)
	a.handle(app, "GET", c+"/binaries", qr.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
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
		list, err := q.QemuBinaries(ctx.UserContext(), computeOf(ctx), archs)
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	}))
	a.handle(app, "GET", c+"/img-binaries", qr.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		list, err := q.QemuImgBinaries(ctx.UserContext(), ctx.Params("compute_id"))
		if err != nil {
			return err
		}
		return ctx.JSON(list)
	}))
	a.handle(app, "GET", c+"/capabilities", qr.qemu(func(q QemuComputes, ctx *fiber.Ctx) error {
		caps, err := q.QemuCapabilities(ctx.UserContext(), ctx.Params("compute_id"))
		if err != nil {
			return err
		}
		return ctx.JSON(caps)
	}))
}

// qemu hands a handler the agents' QEMU side.
func (h qemuRoutes) qemu(handler func(QemuComputes, *fiber.Ctx) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		q := h.agents
		if q == nil {
			return &project.Error{Kind: project.ErrConflict, Msg: "This controller has no QEMU support"}
		}
		if id := c.Params("compute_id"); id != "" {
			if _, ok := h.computes.Get(id); !ok {
				return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
			}
		}
		return handler(q, c)
	}
}

// imageName is the image path of a route: {filename} or a greedy
// {filename:.+}, unescaped, relative, not hidden. Anything else is 403
// (GNS3's word for a path that leaves the images folder).
func imageName(c *fiber.Ctx) (string, error) {
	raw := c.Params("filename")
	if raw == "" {
		raw = c.Params("*")
	}
	name, err := url.PathUnescape(raw)
	if err != nil {
		return "", fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("Could not write image: %s is forbidden", raw))
	}
	clean := path.Clean("/" + name)[1:]
	if name == "" || clean != name || strings.HasPrefix(path.Base(name), ".") || strings.ContainsRune(name, 0) || len(name) > 1024 {
		return "", fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("Could not write image: %s, %s is forbidden", path.Base(name), name))
	}
	return name, nil
}

// uploadImage streams the raw body to the compute's images folder,
// answering status: GNS3's controller answers 200 with {}, its compute
// (the web UI's /v2/compute route) 204. A name that would leave the
// folder is 403.
func (h qemuRoutes) uploadImage(status int) func(QemuComputes, *fiber.Ctx) error {
	return func(q QemuComputes, c *fiber.Ctx) error {
		name, err := imageName(c)
		if err != nil {
			return err
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
		if err := q.UploadImage(c.UserContext(), computeOf(c), "qemu", name, body, size); err != nil {
			return err
		}
		if status == fiber.StatusNoContent {
			return c.SendStatus(status)
		}
		return c.Status(status).JSON(fiber.Map{})
	}
}

// downloadImage streams an image back (the web UI reads an appliance
// file it uploaded).
func (h qemuRoutes) downloadImage(q QemuComputes, c *fiber.Ctx) error {
	name, err := imageName(c)
	if err != nil {
		return err
	}
	r, size, err := q.OpenImage(c.UserContext(), computeOf(c), "qemu", name)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	if size < 0 {
		size = -1
	}
	return c.SendStream(r, int(size))
}

// imgReply answers a qemu/img route as GNS3 does: the controller's
// forward (/v2/computes/…) 200 {}, the compute's own route (/v2/compute/…)
// 201 with no body.
func imgReply(c *fiber.Ctx, status int) error {
	if status == fiber.StatusCreated {
		return created(c)
	}
	return c.Status(status).JSON(fiber.Map{})
}

// createQemuImg has the compute run qemu-img create (GNS3's image
// wizard), answering with status (see imgReply).
func (h qemuRoutes) createQemuImg(status int) func(QemuComputes, *fiber.Ctx) error {
	return func(q QemuComputes, c *fiber.Ctx) error {
		var r proto.QemuImgCreate
		if err := h.decode(c, "qemu_img_create", &r); err != nil {
			return err
		}
		if err := q.CreateQemuImg(c.UserContext(), computeOf(c), r); err != nil {
			return err
		}
		return imgReply(c, status)
	}
}

// resizeQemuImg has the compute run qemu-img resize, answering with
// status (see imgReply).
func (h qemuRoutes) resizeQemuImg(status int) func(QemuComputes, *fiber.Ctx) error {
	return func(q QemuComputes, c *fiber.Ctx) error {
		var r proto.QemuImgResize
		if err := h.decode(c, "qemu_img_resize", &r); err != nil {
			return err
		}
		if err := q.ResizeQemuImg(c.UserContext(), computeOf(c), r); err != nil {
			return err
		}
		return imgReply(c, status)
	}
}

// resizeDisk grows a disk of a stopped QEMU node: 201, no body (GNS3).
func (h qemuRoutes) resizeDisk(c *fiber.Ctx) error {
	var r proto.ResizeDisk
	if err := h.decode(c, "resize_disk", &r); err != nil {
		return err
	}
	if err := h.projects.Nodes.ResizeDisk(c.UserContext(), c.Params("project_id"), c.Params("node_id"), r.DriveName, r.Extend); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusCreated)
}

// isImageUpload reports an image upload's path, whose body boundBody
// leaves unread: a QEMU image's is streamed to disk under its own cap; an
// IOU or Dynamips image's (tens of MiB) is refused unread (notRunHere).
func isImageUpload(path string) bool {
	return strings.HasPrefix(path, imageUploadPrefix) && strings.Contains(path, "/qemu/images/") ||
		strings.HasPrefix(path, "/v2/compute/iou/images/") || strings.HasPrefix(path, "/v2/compute/dynamips/images/")
}
