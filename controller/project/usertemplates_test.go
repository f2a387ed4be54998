package project

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// User templates survive a restart; a templates file that cannot be read
// is never written over.
func TestTemplatesAreKeptInTheirFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "templates.json")
	s := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	made, err := s.Templates.Create(map[string]any{"name": "sw", "template_type": TypeSwitch, "compute_id": "local"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Templates.Update(made.ID, map[string]any{"name": "core switch"}); err != nil {
		t.Fatal(err)
	}
	again := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	if err := again.Templates.Load(); err != nil {
		t.Fatal(err)
	}
	got, err := again.Templates.Get(made.ID)
	if err != nil || got.Name != "core switch" || got.Type != TypeSwitch || len(got.Settings["ports_mapping"].([]any)) != 8 {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}

	if err := os.WriteFile(file, []byte("[{broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	if err := broken.Templates.Load(); err == nil {
		t.Fatal("a broken file loaded")
	}
	if _, err := broken.Templates.Create(map[string]any{"name": "x", "template_type": "vpcs"}); err == nil {
		t.Fatal("created a template over a file that could not be read")
	}
	if data, _ := os.ReadFile(file); string(data) != "[{broken" {
		t.Fatalf("the unreadable file was rewritten: %q", data)
	}
}

func TestTemplateErrorsNameNoServerPath(t *testing.T) {
	s := NewService(Config{ProjectsDir: t.TempDir()})
	_, err := s.Templates.Create(map[string]any{"name": "x", "template_type": "vpcs", "console_type": "vnc"})
	if err == nil || strings.Contains(err.Error(), "/") && strings.Contains(err.Error(), "file:") {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(err.Error(), "console_type") {
		t.Fatalf("error does not say what is wrong: %v", err)
	}
}

// qemuComputes run QEMU and docker nodes.
type qemuComputes struct{ dockerComputes }

func (qemuComputes) NodeTypes(string) []string { return []string{"vpcs", TypeDocker, TypeQemu} }

// A template's port names' format, segment size and first name and its
// custom adapters are the node's own members, not its properties (a QEMU
// node's properties refuse them): a node made from a QEMU template, with
// GNS3's defaults or its own, names its ports from them, and a docker
// template's custom adapters reach the node.
func TestANodeFromAQemuOrDockerTemplateTakesItsPortMembers(t *testing.T) {
	f := &fixture{computes: newFakeComputes(), store: &failingStore{}, events: &recorder{}}
	f.svc = NewService(Config{ProjectsDir: t.TempDir(), Computes: qemuComputes{dockerComputes{f.computes}}, Store: f.store, Events: f.events})
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	fromTemplate := func(tpl map[string]any) Node {
		t.Helper()
		made, err := f.svc.Templates.Create(tpl)
		if err != nil {
			t.Fatal(err)
		}
		n, err := f.svc.Templates.CreateNode(t.Context(), p.ID, made.ID, FromTemplate{})
		if err != nil {
			t.Fatalf("node from the %s template: %v", tpl["name"], err)
		}
		for _, k := range []string{"port_name_format", "port_segment_size", "first_port_name", "custom_adapters"} {
			if _, in := n.Properties[k]; in {
				t.Errorf("%s: %s is among the node's properties", n.Name, k)
			}
		}
		return n
	}
	portNames := func(n Node) []string {
		var names []string
		for _, port := range n.Ports() {
			names = append(names, port.Name)
		}
		return names
	}
	plain := fromTemplate(map[string]any{"name": "tiny", "template_type": TypeQemu, "compute_id": "local", "kernel_image": "vmlinuz"})
	if got := portNames(plain); !slices.Equal(got, []string{"Ethernet0"}) {
		t.Errorf("a node of GNS3's default QEMU template has ports %v", got)
	}
	router := fromTemplate(map[string]any{"name": "router", "template_type": TypeQemu, "compute_id": "local", "adapters": 4,
		"port_name_format": "Gi0/{0}", "port_segment_size": 2, "first_port_name": "mgmt0",
		"custom_adapters": []any{map[string]any{"adapter_number": 3, "port_name": "uplink"}}})
	if got := portNames(router); !slices.Equal(got, []string{"mgmt0", "Gi0/0", "Gi0/1", "uplink"}) {
		t.Errorf("router ports %v", got)
	}
	dk := fromTemplate(map[string]any{"name": "dk", "template_type": TypeDocker, "compute_id": "local", "image": "labtap/host:bookworm",
		"adapters": 2, "custom_adapters": []any{map[string]any{"adapter_number": 1, "port_name": "lan"}}})
	if got := portNames(dk); !slices.Equal(got, []string{"eth0", "lan"}) {
		t.Errorf("docker ports %v", got)
	}
}
