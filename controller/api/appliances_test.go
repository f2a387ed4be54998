package api_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/internal/gns3wizard"
)

// The catalogue's files, by appliance name, and the images each names.
var catalogueImages = map[string]string{
	"labtap FRR":         "labtap/frr:bookworm",
	"labtap Debian host": "labtap/host:bookworm",
	"labtap tiny guest":  "vmlinuz initrd.img",
}

// withNodeTypes is the computes, each reporting more node types than its
// agent: docker, say, which the test agent cannot run without an Engine.
type withNodeTypes struct {
	api.Computes
	more []string
}

func (w withNodeTypes) List() []compute.Compute {
	l := w.Computes.List()
	for i := range l {
		l[i].NodeTypes = append(slices.Clone(l[i].NodeTypes), w.more...)
	}
	return l
}

// tinyFiles are stand-ins for the tiny guest's files in a compute's QEMU
// images folder: name → content.
var tinyFiles = map[string]string{"vmlinuz": "a kernel, not really", "initrd.img": "an initramfs, not really"}

// applianceServer is a server whose local compute runs qemu (fake nodes),
// reports docker when docker is set, and holds the tiny guest's files when
// images is set.
func applianceServer(t *testing.T, docker, images bool) *server {
	t.Helper()
	prepare := func(data string) {
		if !images {
			return
		}
		dir := filepath.Join(data, "images", "QEMU")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range tinyFiles {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	configure := func(cfg *api.Config) {
		if docker {
			cfg.Computes = withNodeTypes{cfg.Computes, []string{"docker"}}
		}
	}
	return newServerRunning(t, []string{"vpcs", "qemu"}, prepare, configure)
}

// appliances lists GET path's appliances by name.
func appliances(t *testing.T, s *server, path string) map[string]map[string]any {
	t.Helper()
	r := s.mustT(t, "GET", path, nil, 200, "/v2/appliances")
	out := map[string]map[string]any{}
	for _, e := range r.list {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		if _, dup := out[name]; dup || m == nil {
			t.Fatalf("GET %s: entry %v twice or not an object: %s", path, name, r.raw)
		}
		out[name] = m
	}
	return out
}

// applianceSchema is the GUI's appliance schema (registry versions 1 to 7).
func applianceSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../appliances/testdata/gns3-appliance.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("appliance.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("appliance.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every appliance of the catalogue is served where a compute runs its node
// type, as the GUI's wizard reads it: its schema holds, images carry the
// compute's md5 sums, symbols follow the theme.
func TestAppliancesAreServedInTheShapeTheGUIWizardReads(t *testing.T) {
	t.Parallel()
	s := applianceServer(t, true, true)
	schema := applianceSchema(t)
	got := appliances(t, s, "/v2/appliances?symbol_theme=Classic")
	if len(got) != len(catalogueImages) {
		t.Fatalf("got %d appliances, want %d: %v", len(got), len(catalogueImages), slices.Sorted(maps.Keys(got)))
	}
	ids := map[string]bool{}
	for name, want := range catalogueImages {
		a := got[name]
		if a == nil {
			t.Fatalf("no appliance %q", name)
		}
		raw, _ := json.Marshal(a)
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("%s does not hold to the GUI's appliance schema: %v\n%s", name, err, raw)
		}
		if a["builtin"] != true {
			t.Errorf("%s: builtin %v", name, a["builtin"])
		}
		id, _ := a["appliance_id"].(string)
		if ids[id] {
			t.Errorf("%s: appliance_id %s twice", name, id)
		}
		ids[id] = true
		if d, ok := a["docker"].(map[string]any); ok {
			if d["image"] != want {
				t.Errorf("%s: image %v, want %s", name, d["image"], want)
			}
			continue
		}
		var files []string
		for _, im := range a["images"].([]any) {
			m := im.(map[string]any)
			name := m["filename"].(string)
			files = append(files, name)
			sum := md5.Sum([]byte(tinyFiles[name]))
			if m["md5sum"] != hex.EncodeToString(sum[:]) || m["filesize"] != float64(len(tinyFiles[name])) {
				t.Errorf("image %s: md5sum %v filesize %v, want the compute's file's", name, m["md5sum"], m["filesize"])
			}
		}
		if strings.Join(files, " ") != want {
			t.Errorf("%s: images %v, want %s", name, files, want)
		}
	}
	wantSymbols := map[string]string{"labtap FRR": "router.svg", "labtap Debian host": "docker_guest.svg", "labtap tiny guest": "qemu_guest.svg"}
	for name, file := range wantSymbols {
		if got[name]["symbol"] != ":/symbols/classic/"+file {
			t.Errorf("%s: symbol %v, want the Classic %s", name, got[name]["symbol"], file)
		}
	}
	affinity := appliances(t, s, "/v2/appliances?symbol_theme=Affinity-square-blue")
	if affinity["labtap FRR"]["symbol"] != ":/symbols/affinity/square/blue/router.svg" ||
		affinity["labtap Debian host"]["symbol"] != ":/symbols/affinity/square/blue/docker.svg" {
		t.Errorf("Affinity theme symbols: %v %v", affinity["labtap FRR"]["symbol"], affinity["labtap Debian host"]["symbol"])
	}
	// An unknown theme is Classic (GNS3 answered 404, a toast at every
	// connect); update=yes fetches nothing and lists the same.
	for _, path := range []string{"/v2/appliances?symbol_theme=nope", "/v2/appliances?update=yes&symbol_theme=Classic", "/v2/appliances"} {
		again := appliances(t, s, path)
		if len(again) != len(got) || again["labtap FRR"]["symbol"] != got["labtap FRR"]["symbol"] {
			t.Errorf("GET %s lists %d appliances, FRR symbol %v", path, len(again), again["labtap FRR"]["symbol"])
		}
	}
}

// An appliance is listed only where some compute runs its node type, and
// the QEMU guest only once its files are in that compute's images.
func TestAppliancesAreListedOnlyWhereTheyCanRun(t *testing.T) {
	t.Parallel()
	names := func(m map[string]map[string]any) string {
		return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
	}
	for _, c := range []struct {
		docker, images bool
		want           string
	}{
		{false, false, ""},
		{false, true, "labtap tiny guest"},
		{true, false, "labtap Debian host, labtap FRR"},
		{true, true, "labtap Debian host, labtap FRR, labtap tiny guest"},
	} {
		s := applianceServer(t, c.docker, c.images)
		if got := names(appliances(t, s, "/v2/appliances")); got != c.want {
			t.Errorf("docker %v, guest files %v: listed %q, want %q", c.docker, c.images, got, c.want)
		}
	}
}

// What the GUI's wizard posts for each appliance makes a template, and the
// template a node (the qemu one, whose agent runs fake nodes, starts).
func TestAppliancesInstallAsTemplatesTheWizardWay(t *testing.T) {
	t.Parallel()
	s := applianceServer(t, true, true)
	got := appliances(t, s, "/v2/appliances")
	pid := s.must("POST", "/v2/projects", map[string]any{"name": "appliances"}, 201, "/v2/projects").body["project_id"].(string)
	for _, name := range slices.Sorted(maps.Keys(catalogueImages)) {
		body, err := gns3wizard.Template(got[name], "local", "local build", "/usr/bin/qemu-system-x86_64")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tpl := s.must("POST", "/v2/templates", body, 201, "/v2/templates").body
		for k, v := range body {
			if mustJSON(v) != mustJSON(tpl[k]) {
				t.Errorf("%s: template %s = %v, want %v", name, k, tpl[k], v)
			}
		}
		if body["template_type"] == "docker" {
			continue // the test agent has no Docker Engine (../docker_test.go starts these)
		}
		if body["kernel_image"] != "vmlinuz" || body["initrd"] != "initrd.img" {
			t.Fatalf("%s: the wizard's template names the files %v %v", name, body["kernel_image"], body["initrd"])
		}
		n := s.must("POST", "/v2/projects/"+pid+"/templates/"+tpl["template_id"].(string), map[string]any{"x": 0, "y": 0}, 201,
			"/v2/projects/{project_id}/templates/{template_id}").body
		props, _ := n["properties"].(map[string]any)
		if n["node_type"] != "qemu" || props["kernel_image"] != "vmlinuz" || props["initrd"] != "initrd.img" || props["ram"] != 128.0 {
			t.Fatalf("%s: node %v", name, n)
		}
		st := s.must("POST", "/v2/projects/"+pid+"/nodes/"+n["node_id"].(string)+"/start", nil, 200,
			"/v2/projects/{project_id}/nodes/{node_id}/start").body
		if st["status"] != "started" {
			t.Fatalf("%s: start: %v", name, st)
		}
	}
}
