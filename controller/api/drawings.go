package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// drawingJSON is a drawing as GNS3 shows it; SVG is nil in a
// drawing.updated that did not change it.
type drawingJSON struct {
	DrawingID string  `json:"drawing_id"`
	Locked    bool    `json:"locked"`
	ProjectID string  `json:"project_id"`
	Rotation  int     `json:"rotation"`
	SVG       *string `json:"svg,omitempty"`
	X         int     `json:"x"`
	Y         int     `json:"y"`
	Z         int     `json:"z"`
}

// drawingRoutes answer the drawing routes.
type drawingRoutes struct{ resource }

func drawingFrom(d project.Drawing) drawingJSON {
	svg := d.SVG
	return drawingJSON{DrawingID: d.ID, Locked: d.Locked, ProjectID: d.ProjectID, Rotation: d.Rotation, SVG: &svg, X: d.X, Y: d.Y, Z: d.Z}
}

// drawingRequest is the body of POST and PUT .../drawings. A null
// drawing_id asks for a new one (the GUI sends it when it re-creates a
// drawing it believes lost); project_id must be the path's.
type drawingRequest struct {
	DrawingID *string `json:"drawing_id"`
	ProjectID *string `json:"project_id"`
	SVG       *string `json:"svg"`
	X         *int    `json:"x"`
	Y         *int    `json:"y"`
	Z         *int    `json:"z"`
	Locked    *bool   `json:"locked"`
	Rotation  *int    `json:"rotation"`
}

func (h drawingRoutes) decodeDrawing(c *fiber.Ctx) (drawingRequest, project.DrawingUpdate, error) {
	var r drawingRequest
	if err := h.decode(c, "drawing", &r); err != nil {
		return r, project.DrawingUpdate{}, err
	}
	if r.ProjectID != nil && *r.ProjectID != c.Params("project_id") {
		return r, project.DrawingUpdate{}, &badRequest{msg: "project_id " + *r.ProjectID + " is not the project of the path", request: c.Locals(requestKey)}
	}
	return r, project.DrawingUpdate{X: r.X, Y: r.Y, Z: r.Z, Rotation: r.Rotation, Locked: r.Locked, SVG: r.SVG}, nil
}

func (h drawingRoutes) listDrawings(c *fiber.Ctx) error {
	p, err := h.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	list, err := h.projects.Drawings.List(p.ID)
	if err != nil {
		return err
	}
	if p.Status == project.Closed {
		return c.JSON(mapAll(list, topology.DrawingEntry)) // the entries of its file, as GNS3 answers
	}
	return c.JSON(mapAll(list, drawingFrom))
}

func (h drawingRoutes) createDrawing(c *fiber.Ctx) error {
	r, u, err := h.decodeDrawing(c)
	if err != nil {
		return err
	}
	id := ""
	set(&id, r.DrawingID)
	d, err := h.projects.Drawings.Create(c.UserContext(), c.Params("project_id"), id, u)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(drawingFrom(d))
}

func (h drawingRoutes) getDrawing(c *fiber.Ctx) error {
	d, err := h.projects.Drawings.Get(c.Params("project_id"), c.Params("drawing_id"))
	if err != nil {
		return err
	}
	return c.JSON(drawingFrom(d))
}

func (h drawingRoutes) updateDrawing(c *fiber.Ctx) error {
	_, u, err := h.decodeDrawing(c)
	if err != nil {
		return err
	}
	d, err := h.projects.Drawings.Update(c.UserContext(), c.Params("project_id"), c.Params("drawing_id"), u)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(drawingFrom(d))
}

func (h drawingRoutes) deleteDrawing(c *fiber.Ctx) error {
	if err := h.projects.Drawings.Delete(c.UserContext(), c.Params("project_id"), c.Params("drawing_id")); err != nil {
		return err
	}
	return noContent(c)
}
