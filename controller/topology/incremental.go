package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/labtap/labtap/controller/project"
)

// Every change of a project rewrites its whole file (atomically), and
// encoding the whole file was most of a change's time in a large project:
// 24 ms of go-json's indenting for 200 nodes and 300 links, where the write
// and its fsyncs take about the same time at 1 KB as at 700 KB. So Save
// keeps each project's entries (nodes, links, drawings) as last encoded,
// with the entry they were encoded from, and encodes again only the entries
// that changed: a change costs its own entries' encoding, a comparison of
// the others (field by field, much cheaper than encoding them) and the copy of their bytes. The bytes are those Encode gives, to
// the byte (TestSaveIsEncodeToTheByte).

// maxCached is the number of projects whose entries Save keeps; the least
// recently saved beyond it are forgotten (and encoded whole at their next
// save).
const maxCached = 32

// entryIndent is the indent of a topology array's elements in the file:
// file → "topology" → array → element.
const entryIndent = "            "

// encoded is one entry as last written: a deep copy of the entry (so that
// no one's later change of a shared map can make it look unchanged) and
// its bytes.
type encoded[E any] struct {
	entry E
	data  []byte
}

// projectCache is what Save keeps of one project: its entries' bytes, and
// what its files on disk hold (the .gns3 and its journal's records), which
// the next change's record is relative to.
type projectCache struct {
	mu       sync.Mutex // held through an encode, so one project's saves use it one at a time
	nodes    map[string]encoded[Node]
	links    map[string]encoded[Link]
	drawings map[string]encoded[Drawing]
	used     uint64 // the Store's save count at its last use

	path     string      // the project file
	top      []byte      // the file as encoded with empty topology arrays
	order    [3][]string // drawings', links' and nodes' ids, in file order
	baseSize int         // size of the project file as last written whole
	j        *journal    // nil: the next save writes the file whole
	idle     *time.Timer // folds the journal when the project stops changing
	gone     bool        // forgotten: nothing writes through it any more
}

// cacheOf returns project id's cache, making it (and forgetting the least
// recently used beyond maxCached) if needed.
func (s *Store) cacheOf(id string) *projectCache {
	s.mu.Lock()
	if s.cache == nil {
		s.cache = map[string]*projectCache{}
	}
	s.saves++
	c, ok := s.cache[id]
	var evicted *projectCache
	if !ok {
		if len(s.cache) >= maxCached {
			oldest := ""
			for k, v := range s.cache {
				if oldest == "" || v.used < s.cache[oldest].used {
					oldest = k
				}
			}
			evicted = s.cache[oldest]
			delete(s.cache, oldest)
		}
		c = &projectCache{nodes: map[string]encoded[Node]{}, links: map[string]encoded[Link]{}, drawings: map[string]encoded[Drawing]{}}
		s.cache[id] = c
	}
	c.used = s.saves
	s.mu.Unlock()
	if evicted != nil {
		// Not folded: its journal stays beside the file it follows (a
		// load replays it), and the project's next save writes the file
		// whole. A fold here could race that save and write an older
		// project over it.
		s.retire(evicted, false)
	}
	return c
}

// cached returns project id's cache, nil if none.
func (s *Store) cached(id string) *projectCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache[id]
}

// forget drops a project's cache, its journal closed (not folded), if
// the cache is of the file at path; "" is any file.
func (s *Store) forget(id, path string) {
	s.mu.Lock()
	c := s.cache[id]
	if c != nil && path != "" {
		c.mu.Lock()
		mine := c.path == path || c.path == ""
		c.mu.Unlock()
		if !mine {
			c = nil
		}
	}
	if c != nil {
		delete(s.cache, id)
	}
	s.mu.Unlock()
	if c != nil {
		s.retire(c, false)
	}
}

// retire closes a forgotten cache's journal, folding it first if asked
// (a fold that fails leaves the journal, which a load replays, and is
// the error retire returns).
func (s *Store) retire(c *projectCache, fold bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if fold && !c.gone {
		err = s.foldLocked(c)
	}
	c.gone = true
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.j != nil {
		c.j.close()
		c.j = nil
	}
	return err
}

// prepared is a project encoded for a save: the file with empty topology
// arrays, and each array's entries (drawings, links, nodes) with their ids,
// those encoded anew and those gone since the last save.
type prepared struct {
	top     []byte
	items   [3][][]byte
	ids     [3][]string
	changed [3][]int    // indexes in items and ids of the entries encoded anew
	added   [3][]string // ids of those the last save did not have, in order
	removed [3][]string // ids of the entries gone, sorted
}

// prepare encodes snap, reusing the bytes of the entries that did not
// change since the project's last save. c.mu must be held.
func (s *Store) prepare(c *projectCache, snap *project.Snapshot) (*prepared, error) {
	f := s.fileOf(snap)
	nodes, links, drawings := f.Topology.Nodes, f.Topology.Links, f.Topology.Drawings
	f.Topology.Nodes, f.Topology.Links, f.Topology.Drawings = []Node{}, []Link{}, []Drawing{}
	skeleton, err := gojson.MarshalIndentWithOption(f, "", "    ", gojson.DisableHTMLEscape())
	if err != nil {
		return nil, err
	}
	p := &prepared{top: skeleton}
	var keep [3]map[string]bool
	if keep[2], err = entries(p, 2, c.nodes, nodes, func(n *Node) string { return n.NodeID }, sameNode); err != nil {
		return nil, err
	}
	if keep[1], err = entries(p, 1, c.links, links, func(l *Link) string { return l.LinkID }, sameLink); err != nil {
		return nil, err
	}
	if keep[0], err = entries(p, 0, c.drawings, drawings, func(d *Drawing) string { return d.DrawingID }, sameDrawing); err != nil {
		return nil, err
	}
	p.removed[2] = forgetOthers(c.nodes, keep[2])
	p.removed[1] = forgetOthers(c.links, keep[1])
	p.removed[0] = forgetOthers(c.drawings, keep[0])
	return p, nil
}

// encodeIncremental is Encode, reusing the bytes of the entries that did
// not change since the project's last save.
func (s *Store) encodeIncremental(snap *project.Snapshot) ([]byte, error) {
	c := s.cacheOf(snap.Project.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := s.prepare(c, snap)
	if err != nil {
		return nil, err
	}
	return assemble(p.top, p.items)
}

// assemble lays out a file from its skeleton (the file encoded with empty
// topology arrays) and the arrays' entries: drawings, links, nodes.
func assemble(skeleton []byte, items [3][][]byte) ([]byte, error) {
	// The skeleton's "topology" object holds the three empty arrays, in
	// this order (keys sorted). A line that starts with exactly eight
	// spaces and a quote is a member of an object at depth 2, and the
	// first such "drawings" after "topology" begins is topology's own.
	top := bytes.Index(skeleton, []byte("\n    \"topology\": {"))
	if top < 0 {
		return nil, errors.New("topology: no topology object in the encoded file")
	}
	var out bytes.Buffer
	out.Grow(len(skeleton) + size(items[0]) + size(items[1]) + size(items[2]))
	from, at := 0, top
	for i, key := range kinds {
		marker := []byte("\n        \"" + key + "\": []")
		k := bytes.Index(skeleton[at:], marker)
		if k < 0 {
			return nil, fmt.Errorf("topology: no %s array in the encoded file", key)
		}
		k += at + len(marker) - len("[]")
		out.Write(skeleton[from:k])
		writeArray(&out, items[i])
		from, at = k+len("[]"), k+len("[]")
	}
	out.Write(skeleton[from:])
	return out.Bytes(), nil
}

// entries sets p's array i from list: each entry's bytes, from the cache
// when the entry is as it was, their ids in order, the indexes of those
// encoded anew and the ids of those the cache did not have; it returns
// the ids as a set.
func entries[E any](p *prepared, i int, cache map[string]encoded[E], list []E, id func(*E) string, same func(a, b *E) bool) (map[string]bool, error) {
	out := make([][]byte, len(list))
	order := make([]string, len(list))
	ids := make(map[string]bool, len(list))
	for n := range list {
		e := &list[n]
		k := id(e)
		ids[k] = true
		order[n] = k
		c, ok := cache[k]
		if ok && same(&c.entry, e) {
			out[n] = c.data
			continue
		}
		data, err := gojson.MarshalIndentWithOption(*e, entryIndent, "    ", gojson.DisableHTMLEscape())
		if err != nil {
			return nil, err
		}
		out[n] = data
		p.changed[i] = append(p.changed[i], n)
		if !ok {
			p.added[i] = append(p.added[i], k)
		}
		cache[k] = encoded[E]{entry: deepCopy(*e), data: data}
	}
	p.items[i], p.ids[i] = out, order
	return ids, nil
}

// forgetOthers drops the cache's entries that keep does not hold and
// returns their ids, sorted.
func forgetOthers[E any](cache map[string]encoded[E], keep map[string]bool) []string {
	var gone []string
	for k := range cache {
		if !keep[k] {
			delete(cache, k)
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	return gone
}

func size(items [][]byte) int {
	n := 0
	for _, b := range items {
		n += len(b) + len(entryIndent) + 2
	}
	return n
}

// writeArray writes items as an indented JSON array at depth 2, as
// MarshalIndent lays it out.
func writeArray(out *bytes.Buffer, items [][]byte) {
	if len(items) == 0 {
		out.WriteString("[]")
		return
	}
	out.WriteString("[\n")
	for i, b := range items {
		out.WriteString(entryIndent)
		out.Write(b)
		if i < len(items)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("        ]")
}

// deepCopy copies v with every map, slice and pointer in it copied too, so
// the copy shares no memory that a later change could write.
func deepCopy[T any](v T) T {
	var out T
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(v))
	return out
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			copyValue(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		copyValue(v, src.Elem())
		dst.Set(v)
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}

// The entries are compared field by field, and their JSON-like values
// (properties, filters, labels) by a type switch: reflect.DeepEqual made
// the comparison of a 200-node project cost as much as encoding it.
// TestSameSeesEveryField fails when a field is added to an entry type and
// not here.

func sameNode(a, b *Node) bool {
	return a.ComputeID == b.ComputeID && samePtr(a.Console, b.Console) &&
		a.ConsoleAutoStart == b.ConsoleAutoStart && samePtr(a.ConsoleType, b.ConsoleType) &&
		sameRaws(a.CustomAdapters, b.CustomAdapters) && samePtr(a.FirstPortName, b.FirstPortName) &&
		a.Height == b.Height && sameExtra(a.Label, b.Label) && a.Locked == b.Locked && a.Name == b.Name &&
		a.NodeID == b.NodeID && a.NodeType == b.NodeType && a.PortNameFormat == b.PortNameFormat &&
		a.PortSegmentSize == b.PortSegmentSize && sameMap(a.Properties, b.Properties) &&
		a.Symbol == b.Symbol &&
		samePtr(a.TemplateID, b.TemplateID) && a.Width == b.Width &&
		a.X == b.X && a.Y == b.Y && a.Z == b.Z && sameExtra(a.Extra, b.Extra)
}

func sameLink(a, b *Link) bool {
	if len(a.Filters) != len(b.Filters) || (a.Filters == nil) != (b.Filters == nil) {
		return false
	}
	for k, v := range a.Filters {
		w, ok := b.Filters[k]
		if !ok || !sameSlice(v, w) {
			return false
		}
	}
	if a.LinkID != b.LinkID || !bytes.Equal(a.LinkStyle, b.LinkStyle) || (a.LinkStyle == nil) != (b.LinkStyle == nil) ||
		a.Suspend != b.Suspend || !sameExtra(a.Extra, b.Extra) ||
		len(a.Nodes) != len(b.Nodes) || (a.Nodes == nil) != (b.Nodes == nil) {
		return false
	}
	for i := range a.Nodes {
		x, y := &a.Nodes[i], &b.Nodes[i]
		if x.AdapterNumber != y.AdapterNumber || x.NodeID != y.NodeID || x.PortNumber != y.PortNumber ||
			!sameExtra(x.Label, y.Label) || !sameExtra(x.Extra, y.Extra) {
			return false
		}
	}
	return true
}

func sameDrawing(a, b *Drawing) bool {
	return a.DrawingID == b.DrawingID && a.Locked == b.Locked && a.Rotation == b.Rotation && a.SVG == b.SVG &&
		a.X == b.X && a.Y == b.Y && a.Z == b.Z && sameExtra(a.Extra, b.Extra)
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameRaws(a, b []json.RawMessage) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) || (a[i] == nil) != (b[i] == nil) {
			return false
		}
	}
	return true
}

func sameExtra[M ~map[string]json.RawMessage](a, b M) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) || (v == nil) != (w == nil) {
			return false
		}
	}
	return true
}

func sameMap(a, b map[string]any) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !sameValue(v, w) {
			return false
		}
	}
	return true
}

func sameSlice(a, b []any) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameValue compares two values of decoded JSON (or what the controller
// puts beside them); an unusual type falls back to reflect.DeepEqual.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int:
		y, ok := b.(int)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && sameMap(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && sameSlice(x, y)
	case json.RawMessage:
		y, ok := b.(json.RawMessage)
		return ok && bytes.Equal(x, y) && (x == nil) == (y == nil)
	default:
		return reflect.DeepEqual(a, b)
	}
}
