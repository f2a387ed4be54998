package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
)

// The whole-project capture routes (labtap's extension): every link of a
// project, across computes, in one pcapng with one interface per link and
// direction.

var errNoProjectCaptures = &project.Error{Kind: project.ErrConflict, Msg: "Project captures are not available on this controller"}

func (a *API) startProjectCapture(c *fiber.Ctx) error {
	var req capspec.Spec
	if err := a.decode(c, "project_capture_start", &req); err != nil {
		return err
	}
	if err := req.Check(false); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	}
	if a.cfg.ProjectCaptures == nil {
		return errNoProjectCaptures
	}
	if _, err := a.projects.Project(c.Params("project_id")); err != nil {
		return err
	}
	st, err := a.cfg.ProjectCaptures.Start(c.UserContext(), c.Params("project_id"), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(st)
}

func (a *API) stopProjectCapture(c *fiber.Ctx) error {
	if a.cfg.ProjectCaptures == nil {
		return errNoProjectCaptures
	}
	if _, err := a.projects.Project(c.Params("project_id")); err != nil {
		return err
	}
	st, err := a.cfg.ProjectCaptures.Stop(c.UserContext(), c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(st)
}

// projectPcap streams the project's capture: the pcapng file from its
// first byte, then every block as it is written, until the capture stops.
// `curl -sN URL | wireshark -k -i -` shows every link live.
func (a *API) projectPcap(c *fiber.Ctx) error {
	if a.cfg.ProjectCaptures == nil {
		return errNoProjectCaptures
	}
	if _, err := a.projects.Project(c.Params("project_id")); err != nil {
		return err
	}
	body, err := a.cfg.ProjectCaptures.Stream(a.cfg.Context, c.Params("project_id"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, pcapngContentType)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Context().SetBodyStream(body, -1)
	return nil
}
