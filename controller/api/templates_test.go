package api_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const rTemplates = "/v2/templates"

// Creating a template with only the required members answers GNS3 2.2's
// observed defaults for each type labtap runs, announces it on the controller stream, and makes nodes.
func TestTemplatesAreCreatedWithGNS3sDefaultsAndAnnounced(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	ctl := l.listenHTTP("/v2/notifications")
	eight := func(f func(i int) map[string]any) []any {
		var out []any
		for i := range 8 {
			out = append(out, f(i))
		}
		return out
	}
	cases := map[string]map[string]any{
		"vpcs": {"base_script_file": "vpcs_base_config.txt", "category": "guest", "console_auto_start": false,
			"console_type": "telnet", "default_name_format": "PC{0}", "symbol": ":/symbols/vpcs_guest.svg"},
		"ethernet_switch": {"category": "switch", "console_type": "none", "default_name_format": "Switch{0}",
			"symbol": ":/symbols/ethernet_switch.svg", "ports_mapping": eight(func(i int) map[string]any {
				return map[string]any{"ethertype": "", "name": "Ethernet" + itoa(i), "port_number": float64(i), "type": "access", "vlan": 1.0}
			})},
		"ethernet_hub": {"category": "switch", "default_name_format": "Hub{0}", "symbol": ":/symbols/hub.svg",
			"ports_mapping": eight(func(i int) map[string]any {
				return map[string]any{"name": "Ethernet" + itoa(i), "port_number": float64(i)}
			})},
		"cloud": {"category": "guest", "default_name_format": "Cloud{0}", "ports_mapping": []any{},
			"remote_console_host": "127.0.0.1", "remote_console_http_path": "/", "remote_console_port": 23.0,
			"remote_console_type": "none", "symbol": ":/symbols/cloud.svg"},
	}
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "tpl"}, 201)["project_id"].(string)
	ctl.expect(t, "project.created")
	for typ, defaults := range cases {
		got := l.call("POST", rTemplates, map[string]any{"name": "my " + typ, "template_type": typ, "compute_id": "local"}, 201)
		want := map[string]any{"name": "my " + typ, "template_type": typ, "compute_id": "local", "builtin": false, "template_id": got["template_id"]}
		for k, v := range defaults {
			want[k] = v
		}
		if d := jsonDiff("", want, got); len(d) > 0 || len(got["template_id"].(string)) != 36 {
			t.Errorf("%s: %v", typ, d)
		}
		if e := ctl.expect(t, "template.created")[0]; e.Event["template_id"] != got["template_id"] || e.Event["template_type"] != typ {
			t.Errorf("%s: template.created %v", typ, e.Event)
		}
		n := l.call("POST", "/v2/projects/"+pid+"/templates/"+got["template_id"].(string), map[string]any{"x": 10, "y": 20}, 201)
		if n["node_type"] != typ || n["template_id"] != got["template_id"] || n["symbol"] != defaults["symbol"] {
			t.Errorf("%s: node from template %v", typ, n)
		}
		if typ == "ethernet_switch" && len(n["ports"].([]any)) != 8 {
			t.Errorf("switch from template has ports %v", n["ports"])
		}
	}
	list := l.list(rTemplates)
	if len(list) != 8 || list[4]["template_type"] == nil {
		t.Fatalf("template list: %v", list)
	}
}

// Edits are merged then checked whole: a bad one changes nothing;
// built-ins are read-only; GNS3's messages for the refusals.
func TestTemplateEditsAreCheckedAndBuiltinsAreReadOnly(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	ctl := l.listenHTTP("/v2/notifications")
	const vpcs = "19021f99-e36f-394d-b4a1-8aaa902ab9cc"
	id := "5e4d3c2b-1a09-4877-8665-544332211000"
	// The GUI sends its whole settings with its own id.
	l.call("POST", rTemplates, map[string]any{"template_id": id, "name": "PC", "template_type": "vpcs", "compute_id": "local",
		"builtin": false, "base_script_file": "", "console_type": "telnet", "console_auto_start": false,
		"default_name_format": "PC{0}", "symbol": ":/symbols/vpcs_guest.svg", "category": 2}, 201)
	if e := ctl.expect(t, "template.created")[0]; e.Event["category"] != "guest" || e.Event["base_script_file"] != "" {
		t.Fatalf("created %v", e.Event)
	}
	if r := l.call("POST", rTemplates, map[string]any{"template_id": id, "name": "again", "template_type": "vpcs"}, 409); r["message"] != "Template ID '"+id+"' already exists" {
		t.Fatalf("id clash %v", r)
	}
	l.call("POST", rTemplates, map[string]any{"name": "x", "template_type": "vpcs", "foo": "bar"}, 400)
	l.call("POST", rTemplates, map[string]any{"name": "x", "template_type": "nope"}, 400)
	l.call("POST", rTemplates, map[string]any{"name": "bad\x07name", "template_type": "vpcs"}, 400)
	if r := l.call("POST", rTemplates, map[string]any{"name": "n", "template_type": "nat", "compute_id": "local"}, 409); r["message"] != "Template type nat is not supported by this server" {
		t.Fatalf("nat %v", r)
	}
	// PUT: merged and checked; a refused edit stores nothing.
	l.call("PUT", rTemplates+"/"+id, map[string]any{"foo": "bar"}, 400)
	l.call("PUT", rTemplates+"/"+id, map[string]any{"console_type": "vnc"}, 400)
	u := l.call("PUT", rTemplates+"/"+id, map[string]any{"name": "PC2", "template_type": "ethernet_hub", "base_script_file": "x.txt"}, 200)
	if u["name"] != "PC2" || u["template_type"] != "vpcs" || u["base_script_file"] != "x.txt" {
		t.Fatalf("updated %v", u)
	}
	if e := ctl.expect(t, "template.updated")[0]; e.Event["name"] != "PC2" {
		t.Fatalf("template.updated %v", e.Event)
	}
	if got := l.call("GET", rTemplates+"/"+id, nil, 200); got["name"] != "PC2" || got["foo"] != nil {
		t.Fatalf("stored %v", got)
	}
	// Built-ins: read-only, GNS3's messages.
	if r := l.call("DELETE", rTemplates+"/"+vpcs, nil, 409); r["message"] != "Template ID "+vpcs+" cannot be deleted because it is a builtin" {
		t.Fatalf("delete builtin %v", r)
	}
	l.call("PUT", rTemplates+"/"+vpcs, map[string]any{"name": "mine"}, 409)
	if r := l.call("POST", rTemplates+"/"+vpcs+"/duplicate", nil, 409); r["message"] != "Template ID "+vpcs+" cannot be duplicated because it is a builtin" {
		t.Fatalf("duplicate builtin %v", r)
	}
	// Duplicate: same settings, new id.
	dup := l.call("POST", rTemplates+"/"+id+"/duplicate", nil, 201)
	if dup["template_id"] == id || dup["name"] != "PC2" || dup["base_script_file"] != "x.txt" {
		t.Fatalf("duplicate %v", dup)
	}
	ctl.expect(t, "template.created")
	ghost := "5e4d3c2b-1a09-4877-8665-5443322110ff"
	if r := l.call("DELETE", rTemplates+"/"+ghost, nil, 404); r["message"] != "Template ID "+ghost+" doesn't exist" {
		t.Fatalf("unknown %v", r)
	}
	l.call("DELETE", rTemplates+"/"+id, nil, 204)
	if e := ctl.expect(t, "template.deleted")[0]; e.Event["template_id"] != id {
		t.Fatalf("template.deleted %v", e.Event)
	}
	ids := []string{}
	for _, tpl := range l.list(rTemplates) {
		ids = append(ids, tpl["template_id"].(string))
	}
	if slices.Contains(ids, id) || !slices.Contains(ids, dup["template_id"].(string)) {
		t.Fatalf("templates after delete: %v", ids)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// Template names are held to the project's name check (project.CheckName):
// a refused name gets the same 400 and the same reason a project name gets.
func TestTemplateNamesUseTheProjectsNameCheck(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	id := l.call("POST", rTemplates, map[string]any{"name": "ok", "template_type": "vpcs", "compute_id": "local"}, 201)["template_id"].(string)
	for _, name := range []string{"bad\nname", "bad\x7fname", strings.Repeat("é", 128)} {
		p := l.call("POST", "/v2/projects", map[string]any{"name": name}, 400)["message"].(string)
		want := strings.Replace(p, "Project name", "Template name", 1)
		if !strings.HasPrefix(p, "Project name") {
			t.Fatalf("project name %q: %q", name, p)
		}
		if got := l.call("POST", rTemplates, map[string]any{"name": name, "template_type": "vpcs", "compute_id": "local"}, 400)["message"]; got != want {
			t.Errorf("POST template %q: %q, want %q", name, got, want)
		}
		if got := l.call("PUT", rTemplates+"/"+id, map[string]any{"name": name}, 400)["message"]; got != want {
			t.Errorf("PUT template %q: %q, want %q", name, got, want)
		}
	}
}
