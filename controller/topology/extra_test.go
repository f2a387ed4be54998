package topology

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
)

// newerMembers are members a newer GNS3 (or another tool) could write,
// added to the fixture at every level of the file.
func withNewerMembers(t *testing.T, data []byte) []byte {
	t.Helper()
	f := generic(t, data)
	f["future_setting"] = map[string]any{"enabled": true, "levels": []any{json.Number("1"), json.Number("2")}}
	topo := f["topology"].(map[string]any)
	topo["groups"] = []any{map[string]any{"name": "core", "members": []any{"a0000001-0000-4000-8000-000000000001"}}}
	for _, n := range topo["nodes"].([]any) {
		n.(map[string]any)["aux_type"] = "telnet"
		n.(map[string]any)["tags"] = []any{"lab", json.Number("12345678901234567890")}
	}
	for _, l := range topo["links"].([]any) {
		l.(map[string]any)["link_type"] = "ethernet"
		for _, e := range l.(map[string]any)["nodes"].([]any) {
			e.(map[string]any)["interface_id"] = "if-0"
		}
	}
	for _, d := range topo["drawings"].([]any) {
		d.(map[string]any)["layer"] = json.Number("3.5")
	}
	out, err := json.MarshalIndent(f, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// generic decodes JSON keeping numbers as written.
func generic(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode: %v\n%s", err, data)
	}
	return v
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, fmt.Sprintf("%s.%s: added %v", path, k, bv))
			case !bin:
				out = append(out, fmt.Sprintf("%s.%s: lost (was %v)", path, k, av))
			default:
				out = append(out, diff(path+"."+k, av, bv)...)
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
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: %v → %v", path, a, b)}
	}
	return nil
}

// A file GNS3 2.2 wrote, with qemu, docker and dynamips nodes, drawings,
// remote computes and members of a newer GNS3 at every level, goes through
// decode → change → encode with every member it did not change intact.
func TestARewriteKeepsEveryMemberItDidNotChange(t *testing.T) {
	fixture, err := os.ReadFile("testdata/gns3-2.2.gns3")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"as GNS3 2.2 writes it": fixture, "with a newer GNS3's members": withNewerMembers(t, fixture)} {
		t.Run(name, func(t *testing.T) {
			snap, err := Decode(data, "/p", "mixed-lab.gns3")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Nodes) != 5 || len(snap.Links) != 2 || len(snap.Drawings) != 3 {
				t.Fatalf("decoded %d nodes, %d links, %d drawings", len(snap.Nodes), len(snap.Links), len(snap.Drawings))
			}
			snap.Project.Name = "renamed"
			snap.Nodes[2].X = 500
			snap.Drawings[1].Locked = false
			s := &Store{Version: "2.2.60"}
			out, err := s.Encode(snap)
			if err != nil {
				t.Fatal(err)
			}
			want := generic(t, data)
			want["name"], want["version"] = "renamed", "2.2.60"
			topo := want["topology"].(map[string]any)
			topo["nodes"].([]any)[2].(map[string]any)["x"] = json.Number("500")
			topo["drawings"].([]any)[1].(map[string]any)["locked"] = false
			if d := diff("", want, generic(t, out)); len(d) > 0 {
				t.Fatalf("rewrite changed:\n%s\n\nfile:\n%s", d, out)
			}
		})
	}
}

// A file without "computes" (as labtap wrote them before) still gets the
// empty list GNS3 expects.
func TestANewFileListsNoComputes(t *testing.T) {
	s := &Store{Version: "2.2.60"}
	out, err := s.Encode(snapshot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	topo := generic(t, out)["topology"].(map[string]any)
	if c, ok := topo["computes"].([]any); !ok || len(c) != 0 {
		t.Fatalf("computes = %v", topo["computes"])
	}
}
