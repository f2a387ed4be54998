package api

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// fileRoutes answer the routes of project and node files.
type fileRoutes struct{ resource }

// filePath is the greedy {path:.+} of a files route, unescaped.
func filePath(c *fiber.Ctx) string {
	p := c.Params("*")
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}

// sendFile answers a file: text/plain for .txt (GNS3's README.txt), raw
// bytes otherwise.
func sendFile(c *fiber.Ctx, name string, data []byte) error {
	ct := fiber.MIMEOctetStream
	if strings.EqualFold(path.Ext(name), ".txt") {
		ct = fiber.MIMETextPlainCharsetUTF8
	}
	c.Set(fiber.HeaderContentType, ct)
	return c.Send(data)
}

// created answers 201 with no body, as GNS3 does for file uploads.
func created(c *fiber.Ctx) error {
	c.Response().Header.SetNoDefaultContentType(true)
	c.Status(fiber.StatusCreated) // SendStatus would add a text body
	return nil
}

// rawBody is a request's raw body, refused when compressed or over max.
func rawBody(c *fiber.Ctx, max int) ([]byte, error) {
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, fiber.NewError(fiber.StatusUnsupportedMediaType, "Compressed request bodies are not accepted (Content-Encoding: "+enc+")")
	}
	body := c.Request().Body()
	if len(body) > max {
		return nil, fiber.NewError(fiber.StatusRequestEntityTooLarge, fmt.Sprintf("File over %d bytes", max))
	}
	return body, nil
}

func (h fileRoutes) getProjectFile(c *fiber.Ctx) error {
	data, err := h.projects.Files.ReadProject(c.UserContext(), c.Params("project_id"), filePath(c))
	if err != nil {
		return err
	}
	return sendFile(c, filePath(c), data)
}

func (h fileRoutes) postProjectFile(c *fiber.Ctx) error {
	body, err := rawBody(c, project.MaxProjectFile)
	if err != nil {
		return err
	}
	if err := h.projects.Files.WriteProject(c.Params("project_id"), filePath(c), body); err != nil {
		return err
	}
	return created(c)
}

func (h fileRoutes) getNodeFile(c *fiber.Ctx) error {
	data, err := h.projects.Files.ReadNode(c.UserContext(), c.Params("project_id"), c.Params("node_id"), filePath(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	return c.Send(data)
}

func (h fileRoutes) postNodeFile(c *fiber.Ctx) error {
	body, err := rawBody(c, project.MaxNodeFile)
	if err != nil {
		return err
	}
	if err := h.projects.Files.WriteNode(c.UserContext(), c.Params("project_id"), c.Params("node_id"), filePath(c), body); err != nil {
		return err
	}
	return created(c)
}
