package api

import (
	"context"
	"encoding/json"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// nodeRoutes serves a project's nodes: /v2/projects/{project_id}/nodes/...
type nodeRoutes struct{ resource }

func (h nodeRoutes) listNodes(c *fiber.Ctx) error {
	p, err := h.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	list, err := h.projects.Nodes.List(p.ID)
	if err != nil {
		return err
	}
	if p.Status == project.Closed {
		return c.JSON(mapAll(list, topology.NodeEntry)) // a closed project: the entries of its file, as GNS3 answers
	}
	return c.JSON(mapAll(list, nodeFrom))
}

// nodeCreateRequest is the body of POST .../nodes. Read-only members
// (status, ports, width, height, console_host, node_directory,
// command_line, project_id) are accepted and ignored: GNS3 crashes on some
// of them, and clients send whole node objects back.
type nodeCreateRequest struct {
	ComputeID        string            `json:"compute_id"`
	Name             string            `json:"name"`
	NodeType         string            `json:"node_type"`
	NodeID           *string           `json:"node_id"`
	TemplateID       *string           `json:"template_id"`
	ConsoleAutoStart *bool             `json:"console_auto_start"`
	Properties       map[string]any    `json:"properties"`
	Label            project.Label     `json:"label"`
	Symbol           *string           `json:"symbol"`
	X                *int              `json:"x"`
	Y                *int              `json:"y"`
	Z                *int              `json:"z"`
	Locked           *bool             `json:"locked"`
	PortNameFormat   *string           `json:"port_name_format"`
	PortSegmentSize  *int              `json:"port_segment_size"`
	FirstPortName    *string           `json:"first_port_name"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	ConsoleType      *string           `json:"console_type"`
}

func (r *nodeCreateRequest) toCreate() project.NodeCreate {
	n := project.NewNodeCreate()
	n.ComputeID, n.Name, n.Type = r.ComputeID, r.Name, r.NodeType
	set(&n.ID, r.NodeID)
	set(&n.TemplateID, r.TemplateID)
	set(&n.ConsoleAutoStart, r.ConsoleAutoStart)
	set(&n.Symbol, r.Symbol)
	set(&n.X, r.X)
	set(&n.Y, r.Y)
	set(&n.Z, r.Z)
	set(&n.Locked, r.Locked)
	set(&n.PortNameFormat, r.PortNameFormat)
	set(&n.PortSegmentSize, r.PortSegmentSize)
	set(&n.ConsoleType, r.ConsoleType)
	if r.Properties != nil {
		n.Properties = r.Properties
	}
	if r.CustomAdapters != nil {
		n.CustomAdapters = r.CustomAdapters
	}
	n.Label = r.Label
	n.FirstPortName = r.FirstPortName
	return n
}

func (h nodeRoutes) createNode(c *fiber.Ctx) error {
	var req nodeCreateRequest
	if err := h.decode(c, "node_create", &req); err != nil {
		return err
	}
	n, err := h.projects.Nodes.Create(c.UserContext(), c.Params("project_id"), req.toCreate())
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(nodeFrom(n))
}

func (h nodeRoutes) getNode(c *fiber.Ctx) error {
	n, err := h.projects.Nodes.Get(c.Params("project_id"), c.Params("node_id"))
	if err != nil {
		return err
	}
	return c.JSON(nodeFrom(n))
}

func (h nodeRoutes) deleteNode(c *fiber.Ctx) error {
	if err := h.projects.Nodes.Delete(c.UserContext(), c.Params("project_id"), c.Params("node_id")); err != nil {
		return err
	}
	return noContent(c)
}

// projectNodes names project.Nodes where routes shadow the package name,
// for method expressions ((*projectNodes).Start).
type projectNodes = project.Nodes

// allNodes is a bulk operation on every node of a project: 204.
func (h nodeRoutes) allNodes(do func(n *project.Nodes, ctx context.Context, projectID string) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := do(h.projects.Nodes, c.UserContext(), c.Params("project_id")); err != nil {
			return err
		}
		return noContent(c)
	}
}

// nodeStatus answers a node start/stop/suspend/reload with the node.
func (h nodeRoutes) nodeStatus(do func(n *project.Nodes, ctx context.Context, projectID, nodeID string) (project.Node, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		n, err := do(h.projects.Nodes, c.UserContext(), c.Params("project_id"), c.Params("node_id"))
		if err != nil {
			return err
		}
		return c.JSON(nodeFrom(n))
	}
}

// nodeUpdateRequest is the body of PUT .../nodes/{node_id}. The GUI always
// sends node_id, node_type, compute_id and properties; read-only members
// (status, ports, width, height, project_id, template_id, node_directory,
// command_line, console_host) are accepted and ignored, so a node sent
// back as it was read is fine (GNS3 crashes on them).
type nodeUpdateRequest struct {
	Name             *string           `json:"name"`
	X                *int              `json:"x"`
	Y                *int              `json:"y"`
	Z                *int              `json:"z"`
	Locked           *bool             `json:"locked"`
	Symbol           *string           `json:"symbol"`
	Label            project.Label     `json:"label"`
	PortNameFormat   *string           `json:"port_name_format"`
	PortSegmentSize  *int              `json:"port_segment_size"`
	FirstPortName    *string           `json:"first_port_name"`
	ConsoleAutoStart *bool             `json:"console_auto_start"`
	Properties       map[string]any    `json:"properties"`
	CustomAdapters   []json.RawMessage `json:"custom_adapters"`
	Console          *int              `json:"console"`
	ConsoleType      *string           `json:"console_type"`
}

func (h nodeRoutes) updateNode(c *fiber.Ctx) error {
	var r nodeUpdateRequest
	if err := h.decode(c, "node_update", &r); err != nil {
		return err
	}
	n, err := h.projects.Nodes.Update(c.UserContext(), c.Params("project_id"), c.Params("node_id"), project.NodeUpdate{
		Name: r.Name, X: r.X, Y: r.Y, Z: r.Z, Locked: r.Locked, Symbol: r.Symbol, Label: r.Label,
		PortNameFormat: r.PortNameFormat, PortSegmentSize: r.PortSegmentSize, FirstPortName: r.FirstPortName,
		ConsoleAutoStart: r.ConsoleAutoStart, Properties: r.Properties, CustomAdapters: r.CustomAdapters,
		Console: r.Console, ConsoleType: r.ConsoleType,
	})
	if err != nil {
		return err
	}
	return c.JSON(nodeFrom(n))
}

func (h nodeRoutes) nodeLinks(c *fiber.Ctx) error {
	list, err := h.projects.Links.OfNode(c.Params("project_id"), c.Params("node_id"))
	if err != nil {
		return err
	}
	return c.JSON(mapAll(list, linkFrom))
}

func (h nodeRoutes) resetConsoles(c *fiber.Ctx) error {
	if err := h.projects.Nodes.ResetConsoles(c.UserContext(), c.Params("project_id")); err != nil {
		return err
	}
	return noContent(c)
}

func (h nodeRoutes) resetConsole(c *fiber.Ctx) error {
	if err := h.projects.Nodes.ResetConsole(c.UserContext(), c.Params("project_id"), c.Params("node_id")); err != nil {
		return err
	}
	return noContent(c)
}

// moveNode moves a node to another compute (or "auto").
func (h nodeRoutes) moveNode(c *fiber.Ctx) error {
	var r struct {
		ComputeID string `json:"compute_id"`
	}
	if err := h.decode(c, "node_move", &r); err != nil {
		return err
	}
	res, err := h.projects.Nodes.Move(c.UserContext(), c.Params("project_id"), c.Params("node_id"), r.ComputeID)
	if err != nil {
		return err
	}
	return c.JSON(nodeFrom(res.Node))
}

func (h nodeRoutes) duplicateNode(c *fiber.Ctx) error {
	var r struct {
		X, Y, Z int
	}
	if err := h.decode(c, "node_duplicate", &r); err != nil {
		return err
	}
	n, err := h.projects.Nodes.Duplicate(c.UserContext(), c.Params("project_id"), c.Params("node_id"), r.X, r.Y, r.Z)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(nodeFrom(n))
}
