package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

const mixedLab = "6f1d2c3b-4a5e-4f60-8a71-b2c3d4e5f601"

// mixedLabFile is the GNS3 2.2 fixture of controller/topology, with what a
// newer GNS3 could add at every level; keep(node type) selects its nodes
// (and the links between those).
func mixedLabFile(t *testing.T, keep func(nodeType string) bool) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../topology/testdata/gns3-2.2.gns3")
	if err != nil {
		t.Fatal(err)
	}
	f := decodeNumbers(t, data)
	f["future_setting"] = map[string]any{"enabled": true}
	topo := f["topology"].(map[string]any)
	topo["groups"] = []any{map[string]any{"name": "core"}}
	kept := map[string]bool{}
	var nodes []any
	for _, n := range topo["nodes"].([]any) {
		n := n.(map[string]any)
		if keep(n["node_type"].(string)) {
			n["aux_type"] = "telnet"
			kept[n["node_id"].(string)] = true
			nodes = append(nodes, n)
		}
	}
	topo["nodes"] = nodes
	var links []any
	for _, l := range topo["links"].([]any) {
		l := l.(map[string]any)
		ends := l["nodes"].([]any)
		if kept[ends[0].(map[string]any)["node_id"].(string)] && kept[ends[1].(map[string]any)["node_id"].(string)] {
			l["link_type"] = "ethernet"
			ends[0].(map[string]any)["interface_id"] = "if-0"
			links = append(links, l)
		}
	}
	topo["links"] = links
	for _, d := range topo["drawings"].([]any) {
		d.(map[string]any)["layer"] = json.Number("3")
	}
	return f
}

func decodeNumbers(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return v
}

func writeProjectFile(t *testing.T, data, id, name string, f map[string]any) {
	t.Helper()
	dir := filepath.Join(data, "projects", id)
	os.MkdirAll(dir, 0o755)
	out, _ := json.MarshalIndent(f, "", "    ")
	if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *server) projectFile(id, name string) map[string]any {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.data, "projects", id, name))
	if err != nil {
		s.t.Fatal(err)
	}
	return decodeNumbers(s.t, data)
}

// jsonDiff lists the paths where a and b differ.
func jsonDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k, av := range am {
			if bv, ok := bm[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: lost (was %v)", path, k, av))
			} else {
				out = append(out, jsonDiff(path+"."+k, av, bv)...)
			}
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: added %v", path, k, bv))
			}
		}
		slices.Sort(out)
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: %v → %v", path, a, b)}
	}
	return nil
}

// A project GNS3 made (drawings, a remote compute, members labtap does not
// model at every level) goes through open → change → close, and its file
// keeps every member labtap did not change.
func TestOpenChangeCloseKeepsWhatLabtapDoesNotModel(t *testing.T) {
	t.Parallel()
	runnable := func(typ string) bool { return typ == "vpcs" || typ == "ethernet_switch" }
	orig := mixedLabFile(t, runnable)
	s := newServerWith(t, func(data string) { writeProjectFile(t, data, mixedLab, "mixed-lab.gns3", orig) })
	p := "/v2/projects/" + mixedLab
	s.must("POST", p+"/open", nil, 201, rProject+"/open")
	s.must("PUT", p+"/nodes/a0000001-0000-4000-8000-000000000001", map[string]any{"x": 7}, 200, rNode)
	s.must("PUT", p, map[string]any{"show_grid": false}, 200, rProject)
	s.must("POST", p+"/close", nil, 204, rProject+"/close")

	got := s.projectFile(mixedLab, "mixed-lab.gns3")
	want := mixedLabFile(t, runnable)
	want["show_grid"], want["version"] = false, "2.2.59"
	nodes := want["topology"].(map[string]any)["nodes"].([]any)
	nodes[0].(map[string]any)["x"] = json.Number("7")
	// The agent gives each node the console it has (the test's fake VPCS
	// has none).
	for i, n := range got["topology"].(map[string]any)["nodes"].([]any) {
		for _, k := range []string{"console", "console_type"} {
			nodes[i].(map[string]any)[k] = n.(map[string]any)[k]
		}
	}
	if d := jsonDiff("", want, got); len(d) > 0 {
		t.Fatalf("open → change → close changed:\n%v", d)
	}
}

// A project with node types labtap does not run (qemu, docker, dynamips)
// is listed and changed while closed without losing any of them.
func TestAClosedProjectOfOtherNodeTypesIsRewrittenWhole(t *testing.T) {
	t.Parallel()
	all := func(string) bool { return true }
	orig := mixedLabFile(t, all)
	s := newServerWith(t, func(data string) { writeProjectFile(t, data, mixedLab, "mixed-lab.gns3", orig) })
	p := "/v2/projects/" + mixedLab
	if n := s.must("GET", p+"/nodes", nil, 200, rNodes); len(n.list) != 5 {
		t.Fatalf("closed project lists %d nodes", len(n.list))
	}
	s.must("PUT", p, map[string]any{"name": "renamed", "zoom": 80}, 200, rProject)
	got := s.projectFile(mixedLab, "mixed-lab.gns3")
	want := mixedLabFile(t, all)
	want["name"], want["zoom"], want["version"] = "renamed", json.Number("80"), "2.2.59"
	if d := jsonDiff("", want, got); len(d) > 0 {
		t.Fatalf("rewrite of a closed project changed:\n%v", d)
	}
}

// A project holding node types this server cannot run (dynamips, iou)
// opens: those nodes are kept, stopped, with their links; starting one is
// 409 naming its type, starting all starts the others; the file keeps them
// whole.
func TestAProjectWithNodesThisServerCannotRunOpens(t *testing.T) {
	t.Parallel()
	keep := func(typ string) bool { return typ == "vpcs" || typ == "ethernet_switch" || typ == "dynamips" }
	orig := mixedLabFile(t, keep)
	topo := orig["topology"].(map[string]any)
	const iou = "a0000009-0000-4000-8000-000000000009"
	topo["nodes"] = append(topo["nodes"].([]any), map[string]any{
		"node_id": iou, "node_type": "iou", "name": "IOU1", "compute_id": "local", "console": json.Number("5009"),
		"console_type": "telnet", "x": json.Number("10"), "y": json.Number("10"), "z": json.Number("1"),
		"symbol": ":/symbols/multilayer_switch.svg", "properties": map[string]any{"path": "i86bi-linux-l2.bin",
			"ethernet_adapters": json.Number("2"), "serial_adapters": json.Number("0"), "ram": json.Number("256")},
		"port_name_format": "Ethernet{segment0}/{port0}", "port_segment_size": json.Number("4"),
	})
	topo["links"] = append(topo["links"].([]any), map[string]any{"link_id": "b0000009-0000-4000-8000-000000000009", "nodes": []any{
		map[string]any{"node_id": iou, "adapter_number": json.Number("0"), "port_number": json.Number("0")},
		map[string]any{"node_id": "a0000002-0000-4000-8000-000000000002", "adapter_number": json.Number("0"), "port_number": json.Number("2")},
	}})
	s := newServerWith(t, func(data string) { writeProjectFile(t, data, mixedLab, "mixed-lab.gns3", orig) })
	p := "/v2/projects/" + mixedLab
	s.must("POST", p+"/open", nil, 201, rProject+"/open")
	nodes := s.must("GET", p+"/nodes", nil, 200, rNodes).list
	if len(nodes) != 4 {
		t.Fatalf("opened project lists %d nodes", len(nodes))
	}
	if links := s.must("GET", p+"/links", nil, 200, rLinks).list; len(links) != 2 {
		t.Fatalf("opened project lists %d links", len(links))
	}
	for id, typ := range map[string]string{"a0000005-0000-4000-8000-000000000005": "dynamips", iou: "iou"} {
		n := s.must("GET", p+"/nodes/"+id, nil, 200, rNode)
		if n.body["status"] != "stopped" || n.body["node_type"] != typ {
			t.Errorf("%s node: %v", typ, n.body)
		}
		r := s.must("POST", p+"/nodes/"+id+"/start", nil, 409, rNode+"/start")
		if r.body["message"] != "Node type "+typ+" is not supported by this server" {
			t.Errorf("start %s: %v", typ, r.body)
		}
	}
	s.must("POST", p+"/nodes/start", nil, 204, rNodes+"/start")
	if n := s.must("GET", p+"/nodes/a0000001-0000-4000-8000-000000000001", nil, 200, rNode); n.body["status"] != "started" {
		t.Errorf("PC1 after start all: %v", n.body["status"])
	}
	s.must("POST", p+"/nodes/stop", nil, 204, rNodes+"/stop")
	s.must("POST", p+"/close", nil, 204, rProject+"/close")
	got := s.projectFile(mixedLab, "mixed-lab.gns3")
	gotNodes := got["topology"].(map[string]any)["nodes"].([]any)
	for i, n := range topo["nodes"].([]any) {
		n, g := n.(map[string]any), gotNodes[i].(map[string]any)
		if n["node_type"] != "dynamips" && n["node_type"] != "iou" {
			continue
		}
		for k := range g {
			if _, ok := n[k]; !ok {
				delete(g, k) // defaults labtap writes, as GNS3 does
			}
		}
		if d := jsonDiff(n["name"].(string), n, g); len(d) > 0 {
			t.Errorf("%s changed in the file: %v", n["node_type"], d)
		}
	}
	if l := got["topology"].(map[string]any)["links"].([]any); len(l) != 2 {
		t.Errorf("file keeps %d links", len(l))
	}
}
