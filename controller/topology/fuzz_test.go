package topology

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	gojson "github.com/goccy/go-json"
)

// FuzzDecode reads hostile .gns3 content: Decode refuses or returns a
// snapshot, never panics, and what it returns encodes and decodes again.
func FuzzDecode(f *testing.F) {
	if data, err := os.ReadFile("testdata/gns3-2.2.gns3"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"type":"topology","revision":9,"project_id":"0b0c6e2e-4f5a-4a8e-9a53-0f6f4e4f0a11","name":"p","topology":{"nodes":[{"node_id":"x","name":"a","node_type":"vpcs","compute_id":"local","ports":[]}],"links":[{"link_id":"l","nodes":[{"node_id":"x","adapter_number":0,"port_number":0}]}],"drawings":[{"drawing_id":"d","svg":"<svg/>"}]}}`))
	f.Add([]byte(`{"revision":10}`))
	f.Add([]byte(`{"topology":null,"name":null}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := Decode(data, dir, "fuzz.gns3")
		if err != nil {
			return
		}
		s := &Store{}
		out, err := s.Encode(snap)
		if err != nil {
			return // a snapshot Encode refuses is refused before it is stored
		}
		if _, err := Decode(out, dir, "fuzz.gns3"); err != nil {
			t.Fatalf("what Decode read does not read back once encoded: %v\n%s", err, out)
		}
	})
}

// FuzzJournal reads a journal whose tail is hostile: the records of a
// well-made prefix are always read back (a torn or corrupt tail may be
// refused, never misread as other records), and replaying what is read
// never panics.
func FuzzJournal(f *testing.F) {
	base := []byte(`{"name":"p","topology":{"nodes":[],"links":[],"drawings":[]}}`)
	f.Add([]byte{}, uint16(0))
	f.Add(frame([]byte(`{"set":[{"k":"nodes","id":"a","v":{"node_id":"a"}}]}`)), uint16(5))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint16(40))
	f.Add(frame([]byte(`{"order":{"nodes":["b","a"]},"del":[{"k":"links","id":"x"}]}`)), uint16(1))
	f.Fuzz(func(t *testing.T, tail []byte, cut uint16) {
		sum := sha256Of(base)
		good := []journalRecord{
			{Set: []journalEntry{{K: "nodes", ID: "a", V: json.RawMessage(`{"node_id":"a"}`)}}},
			{Top: json.RawMessage(`{"name":"q"}`)},
		}
		data := append([]byte(journalMagic), sum...)
		for _, r := range good {
			p, _ := json.Marshal(r)
			data = append(data, frame(p)...)
		}
		whole := len(data)
		data = append(data, tail...)
		if c := int(cut); c < len(data) && c > whole {
			data = data[:c]
		}
		recs, err := readJournal(data, base)
		if err != nil {
			return
		}
		if len(recs) < len(good) {
			t.Fatalf("read %d records of a journal that holds %d whole ones before its tail", len(recs), len(good))
		}
		for i, r := range good {
			a, _ := json.Marshal(r)
			b, _ := json.Marshal(recs[i])
			if !bytes.Equal(a, b) {
				t.Fatalf("record %d read as %s, written as %s", i, b, a)
			}
		}
		_, _ = replay(base, recs)
	})
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// FuzzDecodeAgreesWithEncodingJSON holds go-json, which Decode reads
// project files with (see unmarshal), to encoding/json's reading: the
// same content gives the same snapshot, and what one refuses the other
// refuses. Its seeds run in the unit tier as a test.
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	if data, err := os.ReadFile("testdata/gns3-2.2.gns3"); err == nil {
		f.Add(data)
	}
	if files, err := filepath.Glob("testdata/fuzz/FuzzDecode/*"); err == nil {
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				if v, ok := corpusBytes(data); ok {
					f.Add(v)
				}
			}
		}
	}
	f.Add([]byte(`{"type":"topology","revision":9,"project_id":"0b0c6e2e-4f5a-4a8e-9a53-0f6f4e4f0a11","name":"p","topology":{"nodes":[{"node_id":"x","name":"a","node_type":"vpcs","compute_id":"local","ports":[],"X":3,"Properties":{"a":"\u00e9\ud800"}}],"links":[{"link_id":"l","nodes":[{"node_id":"x","adapter_number":0,"port_number":0}]}],"drawings":[{"drawing_id":"d","svg":"<svg/>"}]},"zz":[1,{"b":null}],"name":"dup"}`))
	f.Add([]byte(`{"project_id":"p","name":"n","topology":{"nodes":[{"node_id":"x","x":1.5}]}}`))
	f.Add([]byte(`{"project_id":"p","name":"n","topology":{"nodes":[{"node_id":"x"}]}} trailing`))
	f.Add([]byte("{\"project_id\":\"p\",\"name\":\"\xff\"}"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := Decode(data, dir, "fuzz.gns3")
		unmarshal = json.Unmarshal
		want, werr := Decode(data, dir, "fuzz.gns3")
		unmarshal = gojson.Unmarshal
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("go-json: %v; encoding/json: %v\n%q", gerr, werr, data)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("go-json and encoding/json read different snapshots:\n%+v\n%+v\n%q", got, want, data)
		}
	})
}

// corpusBytes reads the one []byte value of a "go test fuzz v1" file.
func corpusBytes(file []byte) ([]byte, bool) {
	lines := bytes.SplitN(file, []byte("\n"), 3)
	if len(lines) < 2 {
		return nil, false
	}
	v, ok := bytes.CutPrefix(bytes.TrimSpace(lines[1]), []byte("[]byte("))
	if !ok {
		return nil, false
	}
	s, err := strconv.Unquote(string(bytes.TrimSuffix(v, []byte(")"))))
	return []byte(s), err == nil
}
