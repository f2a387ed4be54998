package api

import (
	"encoding/json"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// projectRoutes serves /v2/projects and a project's own routes (open, close, stats).
type projectRoutes struct{ resource }

func (h projectRoutes) listProjects(c *fiber.Ctx) error {
	ps := slices.DeleteFunc(h.projects.Projects(), func(p project.Project) bool {
		return !h.allowed(c, "Project.Audit", "/projects/"+p.ID)
	})
	return c.JSON(mapAll(ps, projectFrom))
}

// projectCreateRequest is the body of POST /v2/projects.
type projectCreateRequest struct {
	Name      string  `json:"name"`
	ProjectID *string `json:"project_id"`
	Path      string  `json:"path"`
	projectSettings
}

// projectSettings are the settings members of a project's POST and PUT
// bodies, all optional: project.SettingsUpdate's members, in its order, so
// that one converts to the other.
type projectSettings struct {
	AutoClose           *bool           `json:"auto_close"`
	AutoOpen            *bool           `json:"auto_open"`
	AutoStart           *bool           `json:"auto_start"`
	SceneHeight         *int            `json:"scene_height"`
	SceneWidth          *int            `json:"scene_width"`
	Zoom                *int            `json:"zoom"`
	GridSize            *int            `json:"grid_size"`
	DrawingGridSize     *int            `json:"drawing_grid_size"`
	ShowLayers          *bool           `json:"show_layers"`
	SnapToGrid          *bool           `json:"snap_to_grid"`
	ShowGrid            *bool           `json:"show_grid"`
	ShowInterfaceLabels *bool           `json:"show_interface_labels"`
	Supplier            json.RawMessage `json:"supplier"`
	Variables           json.RawMessage `json:"variables"`
	CaptureDiskBudget   *int64          `json:"capture_disk_budget"`
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (r *projectCreateRequest) toCreate() project.ProjectCreate {
	s := project.DefaultSettings()
	project.SettingsUpdate(r.projectSettings).Apply(&s)
	req := project.ProjectCreate{Name: r.Name, Path: r.Path, Settings: s}
	set(&req.ID, r.ProjectID)
	return req
}

func (h projectRoutes) createProject(c *fiber.Ctx) error {
	var req projectCreateRequest
	if err := h.decode(c, "project_create", &req); err != nil {
		return err
	}
	p, err := h.projects.CreateProject(c.UserContext(), req.toCreate())
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}

func (h projectRoutes) getProject(c *fiber.Ctx) error {
	p, err := h.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(projectFrom(p))
}

func (h projectRoutes) deleteProject(c *fiber.Ctx) error {
	if err := h.projects.DeleteProject(c.UserContext(), c.Params("project_id")); err != nil {
		return err
	}
	return noContent(c)
}

// projectUpdateRequest is the body of PUT /v2/projects/{project_id}.
type projectUpdateRequest struct {
	Name *string `json:"name"`
	Path *string `json:"path"`
	projectSettings
}

func (h projectRoutes) updateProject(c *fiber.Ctx) error {
	var r projectUpdateRequest
	if err := h.decode(c, "project_update", &r); err != nil {
		return err
	}
	p, err := h.projects.UpdateProject(c.UserContext(), c.Params("project_id"), project.ProjectUpdate{
		Name: r.Name, Path: r.Path, SettingsUpdate: project.SettingsUpdate(r.projectSettings),
	})
	if err != nil {
		return err
	}
	return c.JSON(projectFrom(p))
}

func (h projectRoutes) openProject(c *fiber.Ctx) error {
	p, err := h.projects.OpenProject(c.UserContext(), c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}

func (h projectRoutes) closeProject(c *fiber.Ctx) error {
	if err := h.projects.CloseProject(c.UserContext(), c.Params("project_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (h projectRoutes) projectStats(c *fiber.Ctx) error {
	st, err := h.projects.ProjectStats(c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"drawings": st.Drawings, "links": st.Links, "nodes": st.Nodes, "snapshots": st.Snapshots})
}
