package api

import (
	"github.com/gofiber/fiber/v2"
)

// createTemplate answers POST /v2/templates: 201 and the whole template;
// the GUI waits for template.created on the controller stream.
func (a *API) createTemplate(c *fiber.Ctx) error {
	var req map[string]any
	if err := a.decode(c, "template", &req); err != nil {
		return err
	}
	t, err := a.projects.CreateTemplate(req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(templateFrom(t))
}

func (a *API) updateTemplate(c *fiber.Ctx) error {
	var req map[string]any
	if err := a.decode(c, "template_update", &req); err != nil {
		return err
	}
	t, err := a.projects.UpdateTemplate(c.Params("template_id"), req)
	if err != nil {
		return err
	}
	return c.JSON(templateFrom(t))
}

func (a *API) deleteTemplate(c *fiber.Ctx) error {
	if err := a.projects.DeleteTemplate(c.Params("template_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (a *API) duplicateTemplate(c *fiber.Ctx) error {
	t, err := a.projects.DuplicateTemplate(c.Params("template_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(templateFrom(t))
}
