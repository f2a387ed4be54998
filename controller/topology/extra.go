package topology

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"

	"github.com/labtap/labtap/controller/project"
)

// A .gns3 file may hold members labtap does not model: a newer GNS3's
// additions, properties of node types labtap does not run, whatever another
// tool put there. Each entry type below keeps them in its Extra on decode
// and writes them back on encode, so a rewrite loses nothing it did not
// change.

// knownKeys lists the JSON member names of a struct type's fields.
var knownKeys sync.Map // reflect.Type → map[string]bool

func keysOf(t reflect.Type) map[string]bool {
	if k, ok := knownKeys.Load(t); ok {
		return k.(map[string]bool)
	}
	k := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			k[name] = true
		}
	}
	knownKeys.Store(t, k)
	return k
}

// unmarshal decodes a project file and each of its parts. Each part's
// UnmarshalJSON decodes its bytes twice (decodeWithExtra), inside its
// parent's decode: with encoding/json, which checks all of its input
// before it decodes any, a 1,000-node file was read about ten times over,
// the largest share of the controller's CPU in opening it. go-json checks
// as it decodes (BenchmarkDecodeLab1000).
var unmarshal = gojson.Unmarshal

// decodeWithExtra decodes data into v (a pointer to a struct whose methods
// are not in play: see the alias types below) and returns data's members
// that v's type does not name, nil if none.
func decodeWithExtra(data []byte, v any) (project.Extra, error) {
	if err := unmarshal(data, v); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := unmarshal(data, &all); err != nil {
		return nil, err
	}
	known := keysOf(reflect.TypeOf(v).Elem())
	var extra project.Extra
	for k, raw := range all {
		if !known[k] {
			if extra == nil {
				extra = project.Extra{}
			}
			extra[k] = raw
		}
	}
	return extra, nil
}

// encodeWithExtra encodes v (a struct, methods not in play) with extra's
// members added; a member v has wins. Keys come out sorted, as GNS3 writes
// them.
func encodeWithExtra(v any, extra project.Extra) ([]byte, error) {
	data, err := gojson.MarshalWithOption(v, gojson.DisableHTMLEscape())
	if err != nil || len(extra) == 0 {
		return data, err
	}
	var all map[string]json.RawMessage
	if err := gojson.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for k, raw := range extra {
		if _, known := all[k]; !known {
			all[k] = raw
		}
	}
	return gojson.MarshalWithOption(all, gojson.DisableHTMLEscape())
}

type (
	fileFields     File
	topologyFields Topology
	nodeFields     Node
	linkFields     Link
	endpointFields Endpoint
	drawingFields  Drawing
)

// UnmarshalJSON keeps unknown members in f.Extra.
func (f *File) UnmarshalJSON(data []byte) error {
	var v fileFields
	extra, err := decodeWithExtra(data, &v)
	*f = File(v)
	f.Extra = extra
	return err
}

// MarshalJSON writes f.Extra's members too.
func (f File) MarshalJSON() ([]byte, error) { return encodeWithExtra(fileFields(f), f.Extra) }

// UnmarshalJSON keeps unknown members ("computes" included) in t.Extra.
func (t *Topology) UnmarshalJSON(data []byte) error {
	var v topologyFields
	extra, err := decodeWithExtra(data, &v)
	*t = Topology(v)
	t.Extra = extra
	return err
}

// MarshalJSON writes t.Extra's members too, and "computes": [] unless the
// file had its own.
func (t Topology) MarshalJSON() ([]byte, error) {
	extra := t.Extra
	if _, ok := extra["computes"]; !ok {
		extra = project.Extra{"computes": json.RawMessage("[]")}
		for k, v := range t.Extra {
			extra[k] = v
		}
	}
	return encodeWithExtra(topologyFields(t), extra)
}

// UnmarshalJSON keeps unknown members in n.Extra.
func (n *Node) UnmarshalJSON(data []byte) error {
	var v nodeFields
	extra, err := decodeWithExtra(data, &v)
	*n = Node(v)
	n.Extra = extra
	return err
}

// MarshalJSON writes n.Extra's members too.
func (n Node) MarshalJSON() ([]byte, error) { return encodeWithExtra(nodeFields(n), n.Extra) }

// UnmarshalJSON keeps unknown members in l.Extra.
func (l *Link) UnmarshalJSON(data []byte) error {
	var v linkFields
	extra, err := decodeWithExtra(data, &v)
	*l = Link(v)
	l.Extra = extra
	return err
}

// MarshalJSON writes l.Extra's members too.
func (l Link) MarshalJSON() ([]byte, error) { return encodeWithExtra(linkFields(l), l.Extra) }

// UnmarshalJSON keeps unknown members in e.Extra.
func (e *Endpoint) UnmarshalJSON(data []byte) error {
	var v endpointFields
	extra, err := decodeWithExtra(data, &v)
	*e = Endpoint(v)
	e.Extra = extra
	return err
}

// MarshalJSON writes e.Extra's members too.
func (e Endpoint) MarshalJSON() ([]byte, error) { return encodeWithExtra(endpointFields(e), e.Extra) }

// UnmarshalJSON keeps unknown members in d.Extra.
func (d *Drawing) UnmarshalJSON(data []byte) error {
	var v drawingFields
	extra, err := decodeWithExtra(data, &v)
	*d = Drawing(v)
	d.Extra = extra
	return err
}

// MarshalJSON writes d.Extra's members too.
func (d Drawing) MarshalJSON() ([]byte, error) { return encodeWithExtra(drawingFields(d), d.Extra) }
