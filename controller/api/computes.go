package api

import (
	"fmt"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// computeRoutes answer the compute routes.
type computeRoutes struct {
	resource
	computes Computes
	agents   Agents // nil: no agents reached (Config.Agents)
	version  string // Config.Version, the controller's
}

// computeRoutes returns the handlers of the compute routes, which the
// compute and QEMU route tables both register.
func (a *API) computeRoutes() computeRoutes {
	return computeRoutes{a.resource(), a.computes, a.cfg.Agents, a.cfg.Version}
}

func (h computeRoutes) listComputes(c *fiber.Ctx) error {
	cs := slices.DeleteFunc(h.computes.List(), func(cp compute.Compute) bool {
		return !h.allowed(c, "Compute.Audit", "/computes/"+cp.ID)
	})
	return c.JSON(mapAll(cs, h.computeJSONOf))
}

// computeJSONOf is a compute as GNS3 shows it. Our agents speak proto,
// versioned on its own; to GNS3 clients a connected agent is a compute of
// the version the controller reports.
func (h computeRoutes) computeJSONOf(cp compute.Compute) computeJSON {
	j := computeFrom(cp)
	if cp.Connected {
		j.Capabilities.Version = &h.version
	}
	return j
}

// computeRequest is the body of POST and PUT /v2/computes.
type computeRequest struct {
	ComputeID *string `json:"compute_id"`
	Name      *string `json:"name"`
	Protocol  *string `json:"protocol"`
	Host      *string `json:"host"`
	Port      *int    `json:"port"`
	User      *string `json:"user"`
	Password  *string `json:"password"`
	// UseSecret asks for the controller-wide secret (labtap).
	UseSecret bool `json:"use_controller_secret"`
}

// grantOf is what a compute request offers for the controller's secret.
func grantOf(c *fiber.Ctx, req computeRequest) compute.Grant {
	return compute.Grant{Presented: c.Get(proto.SecretHeader), Ask: req.UseSecret}
}

func (h computeRoutes) createCompute(c *fiber.Ctx) error {
	var req computeRequest
	if err := h.decode(c, "compute_create", &req); err != nil {
		return err
	}
	cp := compute.Compute{Protocol: *req.Protocol, Host: *req.Host, Port: *req.Port}
	set(&cp.ID, req.ComputeID)
	set(&cp.User, req.User)
	set(&cp.Password, req.Password)
	set(&cp.Name, req.Name)
	if cp.ID == "" {
		cp.ID = uuid.NewString()
	}
	if cp.Name == "" {
		cp.Name = defaultComputeName(cp)
	}
	got, err := h.computes.Create(c.UserContext(), cp, grantOf(c, req))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(h.computeJSONOf(got))
}

// defaultComputeName is GNS3's: "<protocol>://[<user>@]<host>:<port>", with
// a user over 14 characters cut to 11 and "...".
func defaultComputeName(c compute.Compute) string {
	user := c.User
	if len(user) > 14 {
		user = user[:11] + "..."
	}
	if user != "" {
		user += "@"
	}
	return fmt.Sprintf("%s://%s%s:%d", c.Protocol, user, c.Host, c.Port)
}

func (h computeRoutes) getCompute(c *fiber.Ctx) error {
	cp, ok := h.computes.Get(c.Params("compute_id"))
	if !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + c.Params("compute_id") + " doesn't exist"}
	}
	return c.JSON(h.computeJSONOf(cp))
}

// interfaces lists a compute's host interfaces for the GUI's cloud node
// dialog (GNS3's shape: id, name, ip_address, netmask, mac_address, type,
// special).
func (h computeRoutes) interfaces(c *fiber.Ctx) error {
	id := computeOf(c)
	if _, ok := h.computes.Get(id); !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	if h.agents == nil {
		return &project.Error{Kind: project.ErrConflict, Msg: "This controller reaches no agents"}
	}
	list, err := h.agents.Interfaces(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(list)
}

// dockerImages lists a compute's Docker images for the GUI's docker
// template wizard.
func (h computeRoutes) dockerImages(c *fiber.Ctx) error {
	id := computeOf(c)
	if _, ok := h.computes.Get(id); !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + id + " doesn't exist"}
	}
	if h.agents == nil {
		return &project.Error{Kind: project.ErrConflict, Msg: "This controller reaches no agents"}
	}
	tags, err := h.agents.DockerImages(c.UserContext(), id)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(tags))
	for _, t := range tags {
		out = append(out, fiber.Map{"image": t})
	}
	return c.JSON(out)
}

func (h computeRoutes) updateCompute(c *fiber.Ctx) error {
	var req computeRequest
	if err := h.decode(c, "compute_update", &req); err != nil {
		return err
	}
	got, err := h.computes.Update(c.UserContext(), c.Params("compute_id"), compute.ComputeUpdate{
		Name: req.Name, Protocol: req.Protocol, Host: req.Host, Port: req.Port, User: req.User, Password: req.Password,
		Grant: grantOf(c, req),
	})
	if err != nil {
		return err
	}
	return c.JSON(h.computeJSONOf(got))
}

// deleteCompute closes the projects that use the compute, then forgets it;
// an unknown id is a 204 too (GNS3).
func (h computeRoutes) deleteCompute(c *fiber.Ctx) error {
	id := c.Params("compute_id")
	if id == compute.LocalID {
		return &project.Error{Kind: project.ErrConflict, Msg: "The local compute cannot be deleted"}
	}
	if _, ok := h.computes.Get(id); ok {
		h.projects.CloseProjectsOn(c.UserContext(), id)
		if err := h.computes.Remove(id); err != nil {
			return err
		}
	}
	return noContent(c)
}

// nodesOn lists the nodes of opened projects on a compute that the
// caller may audit.
func (h computeRoutes) nodesOn(c *fiber.Ctx) error {
	nodes, err := h.projects.Nodes.OnCompute(c.Params("compute_id"))
	if err != nil {
		return err
	}
	nodes = slices.DeleteFunc(nodes, func(n project.PlacedNode) bool {
		return !h.allowed(c, "Node.Audit", "/projects/"+n.ProjectID+"/nodes/"+n.NodeID)
	})
	return c.JSON(nodes)
}

// recoverNodes recreates the nodes of a lost compute elsewhere.
func (h computeRoutes) recoverNodes(c *fiber.Ctx) error {
	var req struct {
		Start bool `json:"start"`
	}
	if err := h.decode(c, "compute_recover", &req); err != nil {
		return err
	}
	rep, err := h.projects.Nodes.Recover(c.UserContext(), c.Params("compute_id"), req.Start)
	if err != nil {
		return err
	}
	return c.JSON(rep)
}

// drainJSON is a drain's answer when it moved nodes: the compute, and
// what moving its nodes off did.
type drainJSON struct {
	computeJSON
	Moved []project.MovedNode `json:"moved"`
	Left  []project.LeftNode  `json:"left"`
}

// drain drains (on) or undrains a compute. A drain with {"move": true}
// also moves every stopped node off it (placement picks where; with
// "restart": true, started nodes too, stopped and started again) and
// answers what moved and what was left, and why.
func (h computeRoutes) drain(on bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var req struct {
			Move    bool `json:"move"`
			Restart bool `json:"restart"`
		}
		if on {
			if err := h.decode(c, "compute_drain", &req); err != nil {
				return err
			}
		}
		cp, err := h.computes.SetDraining(c.Params("compute_id"), on)
		if err != nil {
			return err
		}
		if !req.Move {
			return c.JSON(h.computeJSONOf(cp))
		}
		rep := h.projects.Nodes.MoveOff(c.UserContext(), cp.ID, req.Restart)
		return c.JSON(drainJSON{h.computeJSONOf(cp), rep.Moved, rep.Left})
	}
}
