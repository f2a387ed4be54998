package topology

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/labtap/labtap/controller/project"
)

func snapshot(dir string) *project.Snapshot {
	cmd := "vpcs"
	return &project.Snapshot{
		Project: project.Project{
			ID: "b8a0c7d4-1e2f-4a3b-9c8d-0e1f2a3b4c5d", Name: "lab", Path: filepath.Join(dir, "b8a0c7d4-1e2f-4a3b-9c8d-0e1f2a3b4c5d"),
			Filename: "lab.gns3", Status: project.Opened, Settings: project.DefaultSettings(),
		},
		Nodes: []project.Node{{
			ID: "9d3c51e2-7a41-4c0b-8f7e-2b1d6c0e4a10", ComputeID: "local", Type: "vpcs", Name: "PC1", Console: 5000,
			ConsoleType: "telnet", Status: project.Started, CommandLine: &cmd, Properties: map[string]any{},
			Label: project.Label{"text": json.RawMessage(`"PC1"`)}, Z: 1, Width: 65, Height: 59, Symbol: project.DefaultSymbol,
			PortNameFormat: project.DefaultPortNameFormat, CustomAdapters: []json.RawMessage{},
		}},
		Links: []project.Link{{
			ID: "2f0b7a9e-3c0d-4a5e-9a51-6a2b7a9d1c11", Filters: map[string][]any{}, Style: json.RawMessage(`{}`),
			Endpoints: []project.Endpoint{{NodeID: "9d3c51e2-7a41-4c0b-8f7e-2b1d6c0e4a10", Label: project.Label{"text": json.RawMessage(`"0/0"`)}}},
			Capture:   capturing("x.pcap"),
		}},
	}
}

func TestSaveWritesGNS3sLayoutAtomically(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := snapshot(dir)
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(snap.Project.Path, "lab.gns3")
	var file map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	want := []string{"auto_close", "auto_open", "auto_start", "drawing_grid_size", "grid_size", "name", "project_id",
		"revision", "scene_height", "scene_width", "show_grid", "show_interface_labels", "show_layers", "snap_to_grid",
		"supplier", "topology", "type", "variables", "version", "zoom"}
	if got := mapKeys(file); !slices.Equal(got, want) {
		t.Fatalf("top-level keys %v", got)
	}
	if file["revision"] != 9.0 || file["type"] != "topology" || file["version"] != "2.2.59" {
		t.Fatalf("file = %s", data)
	}
	topo := file["topology"].(map[string]any)
	if got := mapKeys(topo); !slices.Equal(got, []string{"computes", "drawings", "links", "nodes"}) {
		t.Fatalf("topology keys %v", got)
	}
	n := topo["nodes"].([]any)[0].(map[string]any)
	for _, runtimeOnly := range []string{"status", "ports", "project_id", "console_host", "node_directory", "command_line"} {
		if _, ok := n[runtimeOnly]; ok {
			t.Errorf("node entry has %q, which GNS3 does not store", runtimeOnly)
		}
	}
	l := topo["links"].([]any)[0].(map[string]any)
	if got := mapKeys(l); !slices.Equal(got, []string{"filters", "link_id", "link_style", "nodes", "suspend"}) {
		t.Fatalf("link entry keys %v: capture state must never be stored", got)
	}
	// Nothing but the file and its journal is left in the directory: no
	// temp file.
	entries, _ := os.ReadDir(snap.Project.Path)
	if len(entries) != 2 || entries[0].Name() != "lab.gns3" || entries[1].Name() != "lab.gns3"+JournalSuffix {
		t.Fatalf("directory holds %v after Save", entries)
	}
	// A second save replaces the file, once folded.
	snap.Project.Name = "renamed"
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Fold(&snap.Project); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	json.Unmarshal(data, &file)
	if file["name"] != "renamed" {
		t.Fatalf("second save not visible: %s", data)
	}
}

func TestRemoveOnlyDeletesInsideTheProjectsDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "projects")
	victim := filepath.Join(root, "victim")
	os.MkdirAll(victim, 0o755)
	os.MkdirAll(dir+"-evil", 0o755)
	s := &Store{Dir: dir}
	for _, path := range []string{dir, victim, dir + "-evil", dir + "/../victim", "/"} {
		if err := s.Remove(&project.Project{Path: path}); err == nil {
			t.Errorf("Remove(%q) succeeded", path)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("victim removed: %v", err)
	}
	inside := filepath.Join(dir, "p1")
	os.MkdirAll(filepath.Join(inside, "project-files"), 0o755)
	if err := s.Remove(&project.Project{Path: inside}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inside); !os.IsNotExist(err) {
		t.Fatalf("project directory still there: %v", err)
	}
}

func mapKeys(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// capturing is the capture state of a link that captures into name.
func capturing(name string) project.Capture {
	var c project.Capture
	c.Active, c.FileName = true, name
	return c
}
