package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// snapshotRoutes serves a project's snapshots: /v2/projects/{project_id}/snapshots/...
type snapshotRoutes struct{ resource }

func (h snapshotRoutes) listSnapshots(c *fiber.Ctx) error {
	list, err := h.projects.Archives.Snapshots(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(list)
}

type snapshotCreateRequest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (h snapshotRoutes) createSnapshot(c *fiber.Ctx) error {
	var req snapshotCreateRequest
	if err := h.decode(c, "snapshot_create", &req); err != nil {
		return err
	}
	s, err := h.projects.Archives.CreateSnapshot(c.UserContext(), c.Params("project_id"), project.SnapshotCreate{Name: req.Name, Description: req.Description})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(s)
}

func (h snapshotRoutes) deleteSnapshot(c *fiber.Ctx) error {
	if err := h.projects.Archives.DeleteSnapshot(c.UserContext(), c.Params("project_id"), c.Params("snapshot_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (h snapshotRoutes) restoreSnapshot(c *fiber.Ctx) error {
	p, err := h.projects.Archives.RestoreSnapshot(c.UserContext(), c.Params("project_id"), c.Params("snapshot_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}
