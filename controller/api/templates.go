package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// templateRoutes answer the template routes.
type templateRoutes struct{ resource }

// createTemplate answers POST /v2/templates: 201 and the whole template;
// the GUI waits for template.created on the controller stream.
func (h templateRoutes) createTemplate(c *fiber.Ctx) error {
	var req map[string]any
	if err := h.decode(c, "template", &req); err != nil {
		return err
	}
	t, err := h.projects.Templates.Create(req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(templateFrom(t))
}

func (h templateRoutes) updateTemplate(c *fiber.Ctx) error {
	var req map[string]any
	if err := h.decode(c, "template_update", &req); err != nil {
		return err
	}
	t, err := h.projects.Templates.Update(c.Params("template_id"), req)
	if err != nil {
		return err
	}
	return c.JSON(templateFrom(t))
}

func (h templateRoutes) deleteTemplate(c *fiber.Ctx) error {
	if err := h.projects.Templates.Delete(c.Params("template_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (h templateRoutes) duplicateTemplate(c *fiber.Ctx) error {
	t, err := h.projects.Templates.Duplicate(c.Params("template_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(templateFrom(t))
}

// templateJSON is a template as GNS3 lists it.
type templateJSON struct {
	Builtin           bool           `json:"builtin"`
	Category          string         `json:"category"`
	ComputeID         *string        `json:"compute_id"`
	ConsoleType       string         `json:"console_type,omitempty"`
	DefaultNameFormat string         `json:"default_name_format"`
	Name              string         `json:"name"`
	Properties        map[string]any `json:"properties,omitempty"`
	Symbol            string         `json:"symbol"`
	TemplateID        string         `json:"template_id"`
	TemplateType      string         `json:"template_type"`
}

// templateFrom is a template as GNS3 shows it: a user template is its
// whole flat object.
func templateFrom(t project.Template) any {
	if t.Settings != nil {
		return t.Settings
	}
	return templateJSON{
		Builtin: t.Builtin, Category: t.Category, ConsoleType: t.ConsoleType, DefaultNameFormat: t.DefaultNameFormat,
		Name: t.Name, Properties: t.Properties, Symbol: t.Symbol, TemplateID: t.ID, TemplateType: t.Type,
	}
}

func (h templateRoutes) listTemplates(c *fiber.Ctx) error {
	ts := slices.DeleteFunc(h.projects.Templates.List(), func(t project.Template) bool {
		return !h.allowed(c, "Template.Audit", "/templates/"+t.ID)
	})
	return c.JSON(mapAll(ts, templateFrom))
}

// getTemplate answers one template, with an ETag; a client that already
// holds it (If-None-Match) gets 304.
func (h templateRoutes) getTemplate(c *fiber.Ctx) error {
	t, err := h.projects.Templates.Get(c.Params("template_id"))
	if err != nil {
		return err
	}
	body, err := json.Marshal(templateFrom(t))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	c.Set(fiber.HeaderETag, etag)
	if c.Get(fiber.HeaderIfNoneMatch) == etag {
		c.Response().Header.SetNoDefaultContentType(true)
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

func (h templateRoutes) createFromTemplate(c *fiber.Ctx) error {
	var r struct {
		X         int     `json:"x"`
		Y         int     `json:"y"`
		Name      *string `json:"name"`
		ComputeID *string `json:"compute_id"`
	}
	if err := h.decode(c, "template_create", &r); err != nil {
		return err
	}
	req := project.FromTemplate{X: r.X, Y: r.Y}
	set(&req.Name, r.Name)
	set(&req.ComputeID, r.ComputeID)
	n, err := h.projects.Templates.CreateNode(c.UserContext(), c.Params("project_id"), c.Params("template_id"), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(nodeFrom(n))
}
