package project

import (
	"context"
	"maps"
	"strings"

	"github.com/google/uuid"
)

// Template is a recipe for nodes, as GNS3's GET /v2/templates lists them.
type Template struct {
	ID                string
	Name              string
	Type              string // node type it creates
	DefaultNameFormat string // e.g. "PC{0}"
	Symbol            string
	Category          string // "guest", "switch", ...
	ConsoleType       string // "" when the template does not set one
	Properties        map[string]any
	Builtin           bool
}

// builtinTemplate makes GNS3's built-in template of a node type. Its id is
// the name-based UUID (version 3, DNS namespace) of the type, the same on
// every GNS3 server, so clients that remember ids keep working.
func builtinTemplate(typ, name, nameFormat, symbol, category string) Template {
	return Template{
		ID: uuid.NewMD5(uuid.NameSpaceDNS, []byte(typ)).String(), Name: name, Type: typ,
		DefaultNameFormat: nameFormat, Symbol: symbol, Category: category, Properties: map[string]any{}, Builtin: true,
	}
}

// builtinTemplates are the built-in templates of the node types labtap
// runs, in GNS3's order.
func builtinTemplates() []Template {
	var all []Template
	for _, k := range kinds {
		if k.template != nil {
			t := *k.template
			t.Properties = maps.Clone(t.Properties)
			all = append(all, t)
		}
	}
	return all
}

// Templates lists the templates.
func (s *Service) Templates() []Template { return builtinTemplates() }

// Template returns one template.
func (s *Service) Template(id string) (Template, error) {
	for _, t := range builtinTemplates() {
		if t.ID == id {
			return t, nil
		}
	}
	return Template{}, errorf(ErrNotFound, "Template %s doesn't exist", id)
}

// FromTemplate is a request to create a node from a template.
type FromTemplate struct {
	X, Y      int
	Name      string // "" uses the template's default name format
	ComputeID string // required for built-in templates
}

// CreateFromTemplate creates a node from a template (api-v2.md 2.4.1),
// checking in GNS3's order: project, opened, template, compute.
func (s *Service) CreateFromTemplate(ctx context.Context, projectID, templateID string, req FromTemplate) (Node, error) {
	if _, err := s.opened(projectID); err != nil {
		return Node{}, err
	}
	t, err := s.Template(templateID)
	if err != nil {
		return Node{}, err
	}
	if req.ComputeID == "" {
		return Node{}, errorf(ErrNotFound, "Compute ID None doesn't exist")
	}
	name := req.Name
	if name == "" {
		name = strings.ReplaceAll(t.DefaultNameFormat, "{name}", t.Name)
	}
	nc := NewNodeCreate()
	nc.ComputeID, nc.Type, nc.Name = req.ComputeID, t.Type, name
	nc.TemplateID, nc.Symbol, nc.X, nc.Y = t.ID, t.Symbol, req.X, req.Y
	for k, v := range t.Properties {
		nc.Properties[k] = v
	}
	return s.CreateNode(ctx, projectID, nc)
}
