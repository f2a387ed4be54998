package topology

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/labtap/labtap/controller/project"
)

// TestSaveIsEncodeToTheByte holds Save's incremental encoding to Encode's
// bytes through a run of changes, including one made in place in a map the
// previous snapshot shared, and members labtap does not model whose nested
// keys spell "drawings", "links" and "nodes" at other depths.
func TestSaveIsEncodeToTheByte(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 6, 8)
	snap.Project.Extra.File = project.Extra{
		"a_tool":  json.RawMessage(`{"drawings": [], "links": [], "nodes": []}`),
		"zz_tool": json.RawMessage(`{"topology": {"drawings": []}}`),
	}
	snap.Project.Extra.Topology = project.Extra{
		"computes": json.RawMessage(`[{"compute_id": "vm", "links": [], "nodes": []}]`),
		"a":        json.RawMessage(`{"drawings": []}`),
	}
	snap.Nodes[2].Extra = project.Extra{"nodes": json.RawMessage(`[]`)}
	path := filepath.Join(snap.Project.Path, snap.Project.Filename)
	// What a load reads (the file and its journal) is what Encode gives,
	// and a fold writes Encode's bytes.
	check := func(step string) {
		t.Helper()
		if err := s.Save(snap); err != nil {
			t.Fatal(step, err)
		}
		want, err := s.Encode(snap)
		if err != nil {
			t.Fatal(step, err)
		}
		loaded, _, err := loadFile(path)
		if err != nil {
			t.Fatal(step, err)
		}
		if d := diff("", generic(t, want), generic(t, loaded)); len(d) > 0 {
			t.Fatalf("%s: the file and its journal differ from Encode:\n%s", step, d)
		}
	}
	folded := func(step string) {
		t.Helper()
		data, err := s.FoldFile(&snap.Project)
		if err != nil {
			t.Fatal(step, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(step, err)
		}
		if !bytes.Equal(data, got) {
			t.Fatalf("%s: the fold returned %d bytes, not the %d it wrote", step, len(data), len(got))
		}
		want, err := s.Encode(snap)
		if err != nil {
			t.Fatal(step, err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s: folded file differs from Encode at byte %d:\n got …%s\nwant …%s", step, i,
				got[max(0, i-80):min(len(got), i+80)], want[max(0, i-80):min(len(want), i+80)])
		}
	}
	check("first save")
	first, _ := os.ReadFile(path)
	snap.Nodes[1].X = 999
	check("node moved")
	if now, _ := os.ReadFile(path); !bytes.Equal(now, first) {
		t.Fatal("a node move rewrote the whole file: it belongs in the journal")
	}
	// In place, in the map the saved snapshot shared: the cache must not
	// see it as unchanged.
	pm := snap.Nodes[3].Properties["ports_mapping"].([]any)
	pm[0].(map[string]any)["vlan"] = 42
	check("property changed in place")
	snap.Nodes[4].Label["text"] = json.RawMessage(`"renamed"`)
	check("label changed in place")
	gone := snap.Links[2]
	snap.Links = append(snap.Links[:2], snap.Links[3:]...)
	check("link deleted")
	snap.Links = append(snap.Links, gone)
	check("link added again, last")
	n := snap.Nodes[0]
	n.ID, n.Name = "new-node", "new"
	snap.Nodes = append(snap.Nodes, n)
	check("node added")
	snap.Nodes[0], snap.Nodes[2] = snap.Nodes[2], snap.Nodes[0]
	check("nodes reordered")
	snap.Drawings = []project.Drawing{{ID: "d1", SVG: `<svg height="10" width="10"><rect/></svg>`, X: 1}}
	check("drawing added")
	folded("drawing added")
	snap.Project.Name = "renamed project"
	check("project renamed")
	snap.Nodes, snap.Links, snap.Drawings = nil, nil, nil
	check("everything deleted")
	snap.Project.Extra = project.FileExtra{}
	check("no extras")
	folded("no extras")
}

// TestSameSeesEveryField holds the entry comparisons to every field of
// the entry types: a field added to one and not to its comparison would
// let Save write a stale entry.
func TestSameSeesEveryField(t *testing.T) {
	check := func(name string, typ reflect.Type, same func(a, b reflect.Value) bool) {
		for i := range typ.NumField() {
			a, b := reflect.New(typ).Elem(), reflect.New(typ).Elem()
			f := b.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int:
				f.SetInt(1)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Pointer:
				f.Set(reflect.New(f.Type().Elem()))
			case reflect.Map:
				m := reflect.MakeMap(f.Type())
				m.SetMapIndex(reflect.ValueOf("k"), reflect.New(f.Type().Elem()).Elem())
				f.Set(m)
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			default:
				t.Fatalf("%s.%s: kind %s not covered by this test", name, typ.Field(i).Name, f.Kind())
			}
			if same(a, b) {
				t.Errorf("%s: a change of %s alone is not seen", name, typ.Field(i).Name)
			}
			if !same(b, b) {
				t.Errorf("%s: an entry with %s set is not the same as itself", name, typ.Field(i).Name)
			}
		}
	}
	check("Node", reflect.TypeFor[Node](), func(a, b reflect.Value) bool {
		x, y := a.Interface().(Node), deepCopy(b.Interface().(Node))
		return sameNode(&x, &y)
	})
	check("Link", reflect.TypeFor[Link](), func(a, b reflect.Value) bool {
		x, y := a.Interface().(Link), deepCopy(b.Interface().(Link))
		return sameLink(&x, &y)
	})
	check("Drawing", reflect.TypeFor[Drawing](), func(a, b reflect.Value) bool {
		x, y := a.Interface().(Drawing), deepCopy(b.Interface().(Drawing))
		return sameDrawing(&x, &y)
	})
	// An endpoint's fields, inside a link.
	check("Endpoint", reflect.TypeFor[Endpoint](), func(a, b reflect.Value) bool {
		x := Link{Nodes: []Endpoint{a.Interface().(Endpoint)}}
		y := deepCopy(Link{Nodes: []Endpoint{b.Interface().(Endpoint)}})
		return sameLink(&x, &y)
	})
}
