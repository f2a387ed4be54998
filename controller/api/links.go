package api

import (
	"encoding/json"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// linkRoutes serves a project's links: /v2/projects/{project_id}/links/...
type linkRoutes struct{ resource }

func (h linkRoutes) listLinks(c *fiber.Ctx) error {
	p, err := h.projects.Project(c.Params("project_id"))
	if err != nil {
		return err
	}
	list, err := h.projects.Links.List(p.ID)
	if err != nil {
		return err
	}
	if p.Status == project.Closed {
		return c.JSON(mapAll(list, topology.LinkEntry)) // a closed project: the entries of its file
	}
	return c.JSON(mapAll(list, linkFrom))
}

// linkCreateRequest is the body of POST .../links. A link_id in it is
// ignored (the server picks ids), as are the other read-only members.
type linkCreateRequest struct {
	Nodes []struct {
		NodeID        string        `json:"node_id"`
		AdapterNumber int           `json:"adapter_number"`
		PortNumber    int           `json:"port_number"`
		Label         project.Label `json:"label"`
	} `json:"nodes"`
	Filters   map[string][]any `json:"filters"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Suspend   bool             `json:"suspend"`
}

func (h linkRoutes) createLink(c *fiber.Ctx) error {
	var req linkCreateRequest
	if err := h.decode(c, "link_create", &req); err != nil {
		return err
	}
	lc := project.LinkCreate{Filters: req.Filters, Style: req.LinkStyle, Suspend: req.Suspend}
	for _, n := range req.Nodes {
		lc.Endpoints = append(lc.Endpoints, project.Endpoint{NodeID: n.NodeID, Adapter: n.AdapterNumber, Port: n.PortNumber, Label: n.Label})
	}
	l, err := h.projects.Links.Create(c.UserContext(), c.Params("project_id"), lc)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

// getLink answers the link's JSON as c.JSON(linkFrom(l)) writes it, kept
// with the project until it changes: the API's most frequent read (GNS3
// clients poll their links) costs no encoding while nothing changes.
func (h linkRoutes) getLink(c *fiber.Ctx) error {
	body, err := h.projects.Captures.RenderedLink(c.UserContext(), c.Params("project_id"), c.Params("link_id"), renderLink)
	if err != nil {
		return err
	}
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	return c.Send(body) // shared bytes: the reply only reads them
}

func renderLink(l project.Link) ([]byte, error) { return encodeJSON(linkFrom(l)) }

func (h linkRoutes) deleteLink(c *fiber.Ctx) error {
	if err := h.projects.Links.Delete(c.UserContext(), c.Params("project_id"), c.Params("link_id")); err != nil {
		return err
	}
	return noContent(c)
}

// linkUpdateRequest is the body of PUT .../links/{link_id}.
type linkUpdateRequest struct {
	Nodes *[]struct {
		NodeID string        `json:"node_id"`
		Label  project.Label `json:"label"`
	} `json:"nodes"`
	Filters   map[string][]any `json:"filters"`
	LinkStyle json.RawMessage  `json:"link_style"`
	Suspend   *bool            `json:"suspend"`
}

// updateLink answers 201, as GNS3 does for this PUT.
func (h linkRoutes) updateLink(c *fiber.Ctx) error {
	var r linkUpdateRequest
	if err := h.decode(c, "link_update", &r); err != nil {
		return err
	}
	u := project.LinkUpdate{Style: r.LinkStyle, Suspend: r.Suspend}
	if r.Filters != nil {
		u.Filters = r.Filters
	}
	if r.Nodes != nil {
		u.Labels = []project.Endpoint{}
		for _, n := range *r.Nodes {
			u.Labels = append(u.Labels, project.Endpoint{NodeID: n.NodeID, Label: n.Label})
		}
	}
	l, err := h.projects.Links.Update(c.UserContext(), c.Params("project_id"), c.Params("link_id"), u)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

// filterJSON is one entry of available_filters.
type filterJSON struct {
	Description string      `json:"description"`
	Name        string      `json:"name"`
	Parameters  []paramJSON `json:"parameters"`
	Type        string      `json:"type"`
}

type paramJSON struct {
	Maximum *int   `json:"maximum,omitempty"`
	Minimum *int   `json:"minimum,omitempty"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Unit    string `json:"unit,omitempty"`
}

func (h linkRoutes) availableFilters(c *fiber.Ctx) error {
	list, err := h.projects.Links.AvailableFilters(c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		return err
	}
	out := make([]filterJSON, 0, len(list))
	for _, f := range list {
		fj := filterJSON{Description: f.Description, Name: f.Name, Type: f.Type, Parameters: []paramJSON{}}
		for _, p := range f.Params {
			pj := paramJSON{Name: p.Name, Type: p.Type, Unit: p.Unit}
			if p.Type == "int" {
				lo, hi := p.Min, p.Max
				pj.Minimum, pj.Maximum = &lo, &hi
			}
			fj.Parameters = append(fj.Parameters, pj)
		}
		out = append(out, fj)
	}
	return c.JSON(out)
}
