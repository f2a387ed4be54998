package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

func (a *API) listSnapshots(c *fiber.Ctx) error {
	list, err := a.projects.Snapshots(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(list)
}

type snapshotCreateRequest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (a *API) createSnapshot(c *fiber.Ctx) error {
	var req snapshotCreateRequest
	if err := a.decode(c, "snapshot_create", &req); err != nil {
		return err
	}
	s, err := a.projects.CreateSnapshot(c.UserContext(), c.Params("project_id"), project.SnapshotCreate{Name: req.Name, Description: req.Description})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(s)
}

func (a *API) deleteSnapshot(c *fiber.Ctx) error {
	if err := a.projects.DeleteSnapshot(c.UserContext(), c.Params("project_id"), c.Params("snapshot_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (a *API) restoreSnapshot(c *fiber.Ctx) error {
	p, err := a.projects.RestoreSnapshot(c.UserContext(), c.Params("project_id"), c.Params("snapshot_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}
