package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/labtap/labtap/internal/atomicfile"
)

// Template events, on the controller stream (the GUI lists a new template
// only when it sees template.created).
const (
	TemplateCreated = "template.created"
	TemplateUpdated = "template.updated"
	TemplateDeleted = "template.deleted"
)

// templateTypes are GNS3's template types; those labtap cannot run are
// refused with 409, unknown ones with 400.
var templateTypes = []string{"cloud", "nat", "ethernet_hub", "ethernet_switch", "docker", "dynamips", "vpcs",
	"traceng", "virtualbox", "vmware", "iou", "qemu"}

// templateKind is what labtap knows of a template type: its defaults (the
// members GNS3 2.2 fills in at creation) and the schema of its members.
type templateKind struct {
	defaults func() map[string]any
	schema   string // JSON Schema of the type's own members
}

// templateKinds are the template types of the node types labtap runs
// that it checks member by member; the other types of the kinds table take
// their defaults from it (TemplateDefaults) and have their properties
// checked when a node is made.
var templateKinds = map[string]templateKind{
	"vpcs": {
		defaults: func() map[string]any {
			return map[string]any{"base_script_file": "vpcs_base_config.txt", "category": "guest", "console_auto_start": false,
				"console_type": "telnet", "default_name_format": "PC{0}", "symbol": ":/symbols/vpcs_guest.svg"}
		},
		// GNS3's GUI may send base_script_file "" (its edit page): no script.
		schema: `{"base_script_file": {"type": "string"},
			"console_type": {"enum": ["telnet", "none"]}, "console_auto_start": {"type": "boolean"}}`,
	},
	TypeSwitch: {
		defaults: func() map[string]any {
			ports := make([]any, 8)
			for i := range ports {
				ports[i] = map[string]any{"ethertype": "", "name": fmt.Sprintf("Ethernet%d", i), "port_number": i, "type": "access", "vlan": 1}
			}
			return map[string]any{"category": "switch", "console_type": "none", "default_name_format": "Switch{0}",
				"symbol": ":/symbols/ethernet_switch.svg", "ports_mapping": ports}
		},
		schema: `{"console_type": {"enum": ["telnet", "none"]}, "ports_mapping": {"type": "array", "maxItems": 4096,
			"items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255},
				"port_number": {"type": "integer", "minimum": 0}, "type": {"enum": ["access", "dot1q", "qinq"]},
				"vlan": {"type": "integer", "minimum": 1, "maximum": 4094},
				"ethertype": {"enum": ["", "0x8100", "0x88A8", "0x9100", "0x9200"]}},
				"required": ["name", "port_number", "type"], "additionalProperties": false}}}`,
	},
	TypeHub: {
		defaults: func() map[string]any {
			ports := make([]any, 8)
			for i := range ports {
				ports[i] = map[string]any{"name": fmt.Sprintf("Ethernet%d", i), "port_number": i}
			}
			return map[string]any{"category": "switch", "default_name_format": "Hub{0}", "symbol": ":/symbols/hub.svg", "ports_mapping": ports}
		},
		schema: `{"ports_mapping": {"type": "array", "maxItems": 4096,
			"items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255},
				"port_number": {"type": "integer", "minimum": 0}},
				"required": ["name", "port_number"], "additionalProperties": false}}}`,
	},
	TypeCloud: {
		defaults: func() map[string]any {
			return map[string]any{"category": "guest", "default_name_format": "Cloud{0}", "ports_mapping": []any{},
				"remote_console_host": "127.0.0.1", "remote_console_http_path": "/", "remote_console_port": 23,
				"remote_console_type": "none", "symbol": ":/symbols/cloud.svg"}
		},
		schema: `{"ports_mapping": {"type": "array", "maxItems": 4096, "items": {"type": "object"}},
			"remote_console_host": {"type": "string", "maxLength": 255},
			"remote_console_port": {"type": "integer", "minimum": 1, "maximum": 65535},
			"remote_console_type": {"enum": ["telnet", "vnc", "spice", "http", "https", "none"]},
			"remote_console_http_path": {"type": "string", "maxLength": 1024}}`,
	},
}

// templateBase is the schema of the members every template has (GNS3's
// template schema); a type's members are added to it.
const templateBase = `{
	"template_id": {"type": "string", "minLength": 36, "maxLength": 36,
		"pattern": "^[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$"},
	"template_type": {"type": "string"},
	"name": {"type": "string", "minLength": 1},
	"compute_id": {"type": ["string", "null"], "maxLength": 255},
	"default_name_format": {"type": "string", "maxLength": 255},
	"symbol": {"type": "string", "minLength": 1, "maxLength": 1024},
	"category": {"enum": ["router", "switch", "guest", "firewall"]},
	"builtin": {"type": "boolean"},
	"usage": {"type": "string", "maxLength": 65536}
}`

var (
	templateSchemasOnce sync.Once
	templateSchemas     map[string]*jsonschema.Schema
	templateSchemasErr  error
)

// templateSchema returns the compiled schema of a template type.
func templateSchema(typ string) (*jsonschema.Schema, error) {
	templateSchemasOnce.Do(func() {
		templateSchemas = map[string]*jsonschema.Schema{}
		c := jsonschema.NewCompiler()
		var base map[string]any
		if templateSchemasErr = json.Unmarshal([]byte(templateBase), &base); templateSchemasErr != nil {
			return
		}
		generic := map[string]any{"type": "object", "properties": base, "required": []any{"template_id", "template_type", "name"}}
		if templateSchemasErr = c.AddResource("generic.json", generic); templateSchemasErr != nil {
			return
		}
		if templateSchemas[""], templateSchemasErr = c.Compile("generic.json"); templateSchemasErr != nil {
			return
		}
		for name, k := range templateKinds {
			var base, own map[string]any
			if err := json.Unmarshal([]byte(templateBase), &base); err != nil {
				templateSchemasErr = err
				return
			}
			if err := json.Unmarshal([]byte(k.schema), &own); err != nil {
				templateSchemasErr = fmt.Errorf("template schema %s: %w", name, err)
				return
			}
			maps.Copy(base, own)
			doc := map[string]any{"type": "object", "properties": base, "additionalProperties": false,
				"required": []any{"template_id", "template_type", "name"}}
			if err := c.AddResource(name+".json", doc); err != nil {
				templateSchemasErr = err
				return
			}
			s, err := c.Compile(name + ".json")
			if err != nil {
				templateSchemasErr = fmt.Errorf("template schema %s: %w", name, err)
				return
			}
			templateSchemas[name] = s
		}
	})
	if templateSchemasErr != nil {
		return nil, templateSchemasErr
	}
	if s, ok := templateSchemas[typ]; ok {
		return s, nil
	}
	return templateSchemas[""], nil
}

// checkTemplate validates a whole template against its type.
func checkTemplate(t map[string]any) error {
	typ, _ := t["template_type"].(string)
	if !slices.Contains(templateTypes, typ) {
		return errorf(ErrInvalid, "Template type %q is not a GNS3 template type", typ)
	}
	s, err := templateSchema(typ)
	if err != nil {
		return &Error{Kind: ErrInternal, Msg: err.Error(), Err: err}
	}
	if kindOf(typ) == nil {
		return errorf(ErrConflict, "Template type %s is not supported by this server", typ)
	}
	// The schema library reads JSON values as it decodes them.
	raw, err := json.Marshal(t)
	if err != nil {
		return errorf(ErrInvalid, "Template is not JSON: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return errorf(ErrInvalid, "Template is not JSON: %v", err)
	}
	if err := s.Validate(doc); err != nil {
		// The first line names the schema's location: only the reasons.
		lines := strings.Split(err.Error(), "\n")
		var reasons []string
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")); l != "" {
				reasons = append(reasons, l)
			}
		}
		return errorf(ErrInvalid, "Invalid template: %s", strings.Join(reasons, "; "))
	}
	name, _ := t["name"].(string)
	return CheckName("Template name", name)
}

// normalizeTemplate applies GNS3's conversions of older clients' members:
// integer categories, "server" for compute_id, "node_type" for
// template_type.
func normalizeTemplate(t map[string]any) {
	if c, ok := t["category"].(float64); ok {
		if i := int(c); float64(i) == c && i >= 0 && i < 4 {
			t["category"] = []string{"router", "switch", "guest", "firewall"}[i]
		}
	}
	if v, ok := t["server"]; ok {
		if _, has := t["compute_id"]; !has {
			t["compute_id"] = v
		}
		delete(t, "server")
	}
	if v, ok := t["node_type"]; ok {
		if _, has := t["template_type"]; !has {
			t["template_type"] = v
		}
		delete(t, "node_type")
	}
}

// userTemplate turns a stored template object into a Template.
func userTemplate(m map[string]any) Template {
	str := func(k string) string { s, _ := m[k].(string); return s }
	return Template{
		ID: str("template_id"), Name: str("name"), Type: str("template_type"), DefaultNameFormat: str("default_name_format"),
		Symbol: str("symbol"), Category: str("category"), ConsoleType: str("console_type"), ComputeID: str("compute_id"),
		Properties: nodeSettingsOf(m), Settings: m,
	}
}

// templateOnly are the members of a template that describe the template,
// not the nodes made from it; the others become node properties (as in
// GNS3, where a template's settings are the node's).
var templateOnly = []string{"template_id", "template_type", "name", "compute_id", "default_name_format", "symbol",
	"category", "builtin", "usage", "console_type", "console_auto_start"}

func nodeSettingsOf(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !slices.Contains(templateOnly, k) {
			out[k] = v
		}
	}
	return out
}

// templateStore keeps user templates in one JSON file beside the projects,
// written atomically and durably (atomicfile), in creation order.
type templateStore struct {
	// mu serialises changes and their writes. Readers do not take it: a
	// change writes the file under mu alone and swaps the new list in
	// under listMu, so a listing never waits for a disk.
	mu     sync.Mutex
	listMu sync.RWMutex // guards list; changed only with mu held too
	path   string       // "" keeps them in memory
	list   []map[string]any
	// beforeWrite, when set, runs before each write of the file: tests
	// stall the disk there.
	beforeWrite func()
	// broken is why the file could not be read: nothing is written over
	// it then (it would lose every template in it).
	broken error
}

func (ts *templateStore) load() error {
	if ts.path == "" {
		return nil
	}
	data, err := os.ReadFile(ts.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var list []map[string]any
	if err := json.Unmarshal(data, &list); err != nil {
		ts.broken = fmt.Errorf("%s: %w", ts.path, err)
		return ts.broken
	}
	ts.listMu.Lock()
	ts.list = list
	ts.listMu.Unlock()
	return nil
}

// saveLocked writes list and makes it the templates. ts.mu must be held.
func (ts *templateStore) saveLocked(list []map[string]any) error {
	if ts.broken != nil {
		return &Error{Kind: ErrConflict, Msg: "The templates file cannot be read; fix or remove it first", Err: ts.broken}
	}
	if ts.path != "" {
		data, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		if ts.beforeWrite != nil {
			ts.beforeWrite()
		}
		if err := atomicfile.Write(ts.path, data, 0o644); err != nil {
			return &Error{Kind: ErrConflict, Msg: "Could not save the templates", Err: err}
		}
	}
	ts.listMu.Lock()
	ts.list = list
	ts.listMu.Unlock()
	return nil
}

func (ts *templateStore) all() []map[string]any {
	ts.listMu.RLock()
	defer ts.listMu.RUnlock()
	return slices.Clone(ts.list)
}

// Load reads the user templates from Config.TemplatesFile.
func (s *Templates) Load() error {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.load()
}

// Create adds a user template (POST /v2/templates): the client's
// members over the type's defaults, validated whole. A client may choose
// the id (both GNS3 clients do); one in use is 409.
func (s *Templates) Create(req map[string]any) (Template, error) {
	req = maps.Clone(req)
	normalizeTemplate(req)
	typ, _ := req["template_type"].(string)
	t := map[string]any{}
	if k, ok := templateKinds[typ]; ok {
		t = k.defaults()
	} else if d, ok := TemplateDefaults(typ); ok {
		t = d
	}
	maps.Copy(t, req)
	if id, _ := t["template_id"].(string); id == "" {
		t["template_id"] = uuid.NewString()
	}
	t["builtin"] = false
	if _, ok := t["compute_id"]; !ok {
		t["compute_id"] = nil
	}
	if err := checkTemplate(t); err != nil {
		return Template{}, err
	}
	id := t["template_id"].(string)
	ts := &s.store
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if s.existsLocked(id) {
		return Template{}, errorf(ErrConflict, "Template ID '%s' already exists", id)
	}
	if err := ts.saveLocked(append(slices.Clone(ts.list), t)); err != nil {
		return Template{}, err
	}
	out := userTemplate(t)
	s.core.cfg.Events.Emit(Event{Action: TemplateCreated, Template: &out})
	return out, nil
}

func (s *Templates) existsLocked(id string) bool {
	if slices.ContainsFunc(builtinTemplates(), func(b Template) bool { return b.ID == id }) {
		return true
	}
	return slices.ContainsFunc(s.store.list, func(m map[string]any) bool { return m["template_id"] == id })
}

// Update merges members into a user template (PUT): the id, type,
// compute and builtin flag stay; the result must pass the type's schema,
// or nothing changes. Built-in templates are read-only.
func (s *Templates) Update(id string, req map[string]any) (Template, error) {
	if slices.ContainsFunc(builtinTemplates(), func(b Template) bool { return b.ID == id }) {
		return Template{}, errorf(ErrConflict, "Template ID %s cannot be updated because it is a builtin", id)
	}
	req = maps.Clone(req)
	normalizeTemplate(req)
	ts := &s.store
	ts.mu.Lock()
	defer ts.mu.Unlock()
	i := slices.IndexFunc(ts.list, func(m map[string]any) bool { return m["template_id"] == id })
	if i < 0 {
		return Template{}, errorf(ErrNotFound, "Template ID %s doesn't exist", id)
	}
	t := maps.Clone(ts.list[i])
	for k, v := range req {
		switch k {
		case "template_id", "template_type", "compute_id", "builtin":
		default:
			t[k] = v
		}
	}
	if err := checkTemplate(t); err != nil {
		return Template{}, err
	}
	out := userTemplate(t)
	if equalJSON(t, ts.list[i]) {
		return out, nil
	}
	list := slices.Clone(ts.list)
	list[i] = t
	if err := ts.saveLocked(list); err != nil {
		return Template{}, err
	}
	s.core.cfg.Events.Emit(Event{Action: TemplateUpdated, Template: &out})
	return out, nil
}

// Delete removes a user template.
func (s *Templates) Delete(id string) error {
	if slices.ContainsFunc(builtinTemplates(), func(b Template) bool { return b.ID == id }) {
		return errorf(ErrConflict, "Template ID %s cannot be deleted because it is a builtin", id)
	}
	ts := &s.store
	ts.mu.Lock()
	defer ts.mu.Unlock()
	i := slices.IndexFunc(ts.list, func(m map[string]any) bool { return m["template_id"] == id })
	if i < 0 {
		return errorf(ErrNotFound, "Template ID %s doesn't exist", id)
	}
	gone := userTemplate(ts.list[i])
	if err := ts.saveLocked(slices.Delete(slices.Clone(ts.list), i, i+1)); err != nil {
		return err
	}
	s.core.cfg.Events.Emit(Event{Action: TemplateDeleted, Template: &gone})
	return nil
}

// Duplicate copies a user template under a new id, same name.
func (s *Templates) Duplicate(id string) (Template, error) {
	if slices.ContainsFunc(builtinTemplates(), func(b Template) bool { return b.ID == id }) {
		return Template{}, errorf(ErrConflict, "Template ID %s cannot be duplicated because it is a builtin", id)
	}
	t, err := s.Get(id)
	if err != nil {
		return Template{}, err
	}
	c := maps.Clone(t.Settings)
	delete(c, "template_id")
	return s.Create(c)
}

func equalJSON(a, b any) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}
