package project

import (
	"context"
	"encoding/json"
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
	Category          string         // "guest", "switch", ...
	ConsoleType       string         // "" when the template does not set one
	Properties        map[string]any // what nodes made from it get
	Builtin           bool
	ComputeID         string // "" is null: the client picks
	// Settings is a user template's whole object as GNS3 shows it (flat:
	// the type's members beside the common ones); nil for a built-in one.
	Settings map[string]any
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

// Templates are the node templates: built-in ones, and the users' kept in
// Config.TemplatesFile.
type Templates struct {
	core  *core
	nodes *Nodes
	store templateStore
}

// List lists the templates: built-in ones, then the users', in
// creation order.
func (s *Templates) List() []Template {
	out := builtinTemplates()
	for _, m := range s.store.all() {
		out = append(out, userTemplate(m))
	}
	return out
}

// Get returns one template.
func (s *Templates) Get(id string) (Template, error) {
	for _, t := range s.List() {
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

// CreateNode creates a node from a template,
// checking in GNS3's order: project, opened, template, compute.
func (s *Templates) CreateNode(ctx context.Context, projectID, templateID string, req FromTemplate) (Node, error) {
	if _, err := s.core.opened(projectID); err != nil {
		return Node{}, err
	}
	t, err := s.Get(templateID)
	if err != nil {
		return Node{}, err
	}
	if t.ComputeID != "" {
		req.ComputeID = t.ComputeID // a user template names its compute
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
	nc.TemplateID, nc.X, nc.Y = t.ID, req.X, req.Y
	if t.Symbol != "" {
		nc.Symbol = t.Symbol
	}
	if b, ok := t.Settings["console_auto_start"].(bool); ok {
		nc.ConsoleAutoStart = b
	}
	props := maps.Clone(t.Properties)
	if err := liftNodeMembers(&nc, props); err != nil {
		return Node{}, err
	}
	for k, v := range props {
		nc.Properties[k] = v
	}
	if hasAdapters(t.Type) {
		nc.ConsoleType = t.ConsoleType // a docker template's http console, ...
	}
	return s.nodes.Create(ctx, projectID, nc)
}

// liftNodeMembers moves the members of a template that are the node's own,
// not its properties, out of props into nc (GNS3's Node takes them apart
// from its properties): the port names' format, segment size and first
// name, and custom adapters. A QEMU template has all four, and a QEMU
// node's properties refuse them.
func liftNodeMembers(nc *NodeCreate, props map[string]any) error {
	if v, ok := props["port_name_format"]; ok {
		delete(props, "port_name_format")
		if s, _ := v.(string); s != "" {
			nc.PortNameFormat = s
		}
	}
	if _, ok := props["port_segment_size"]; ok {
		n, err := integer(props, "port_segment_size", 0, 1000000, false)
		if err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
		delete(props, "port_segment_size")
		nc.PortSegmentSize = n
	}
	if v, ok := props["first_port_name"]; ok {
		delete(props, "first_port_name")
		if s, _ := v.(string); s != "" {
			nc.FirstPortName = &s
		}
	}
	if v, ok := props["custom_adapters"]; ok {
		delete(props, "custom_adapters")
		list, _ := v.([]any)
		for _, e := range list {
			raw, err := json.Marshal(e)
			if err != nil {
				return errorf(ErrInvalid, "custom_adapters: %v", err)
			}
			nc.CustomAdapters = append(nc.CustomAdapters, raw)
		}
	}
	return nil
}
