package topology

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/labtap/labtap/controller/project"
)

// A change of a project is written to disk as a record of what changed,
// appended to a journal beside the .gns3 file ("<name>.gns3.journal"),
// instead of rewriting the whole file: the write is O(changes), and the
// changes of concurrent requests share one fsync (group commit). The
// journal is folded into a fresh .gns3 (atomicfile.Write) when it grows
// past the project file's size, when the project has been idle for a
// moment, before the file is read (export, close) and at the first save
// after a start. So the .gns3 file stays the GNS3 file other tools read,
// at most a moment behind while the project changes.
//
// The journal file is a header, "labtap-journal 1\n" and the SHA-256 of
// the .gns3 file it follows (the base), then records: a 4-byte
// little-endian length n > 0, the CRC-32C of those 4 bytes, the CRC-32C
// of the payload, then the n bytes of the payload (a journalRecord in
// JSON).
// Loading a project replays its journal on the base when the base's hash
// is the header's; any other base is newer than the journal (a fold
// ended between the rename of the new .gns3 and the journal's reset) or
// was written by someone else, and the journal is ignored. A torn last
// record (a crash amid an append) is ignored: its change was never
// acknowledged. A record that fails its checksum with records after it
// is an error: the journal lost a change that was acknowledged.

// JournalSuffix is appended to a project file's name to name its journal.
const JournalSuffix = project.JournalSuffix

const journalMagic = "labtap-journal 1\n"

const journalHeaderSize = len(journalMagic) + sha256.Size

// frameHeader is the size of a record's frame: its length, the length's
// CRC-32C and the payload's.
const frameHeader = 12

// ErrJournalCorrupt reports a journal record that fails its checksum, or
// a header that is not a journal's.
var ErrJournalCorrupt = errors.New("project journal is corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// syncFile flushes a journal's appends; tests make it fail.
var syncFile = (*os.File).Sync

// journalRecord is one change: the file's members outside the topology
// arrays when they changed (Top: the file as Encode writes it with empty
// arrays), the entries written anew (Set: added or changed), the entries
// removed (Del), and an array's id order when it is not the one the other
// members imply (the previous order, removed ids left out, new ones
// appended).
type journalRecord struct {
	Top   json.RawMessage     `json:"top,omitempty"`
	Set   []journalEntry      `json:"set,omitempty"`
	Del   []journalEntry      `json:"del,omitempty"`
	Order map[string][]string `json:"order,omitempty"`
}

// journalEntry is an entry of an array of the topology: K is "nodes",
// "links" or "drawings".
type journalEntry struct {
	K  string          `json:"k"`
	ID string          `json:"id"`
	V  json.RawMessage `json:"v,omitempty"`
}

// journal is an open journal file being appended to. Appends are ordered
// by the caller (projectCache.mu); durable waits for an append's fsync, and
// the appends that wait together share one.
type journal struct {
	f *os.File

	mu      sync.Mutex // guards the fields below
	synced  sync.Cond  // on mu: broadcast when an fsync ends
	size    int64      // bytes written (header and whole records)
	written uint64     // appends written
	onDisk  uint64     // appends known to be on disk
	syncing bool       // an fsync runs
	fsyncs  int        // fsyncs of appends run, for tests
	err     error      // a failed fsync or write: nothing after it is durable
}

// createJournal makes path a journal with no record after base (the
// content of the .gns3 file just written), on disk when it returns.
func createJournal(path string, base []byte) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(base)
	hdr := append([]byte(journalMagic), sum[:]...)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	j := &journal{f: f, size: int64(len(hdr))}
	j.synced.L = &j.mu
	return j, nil
}

// frame returns payload framed as a journal record.
func frame(payload []byte) []byte {
	out := make([]byte, frameHeader, frameHeader+len(payload))
	binary.LittleEndian.PutUint32(out, uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[4:], crc32.Checksum(out[:4], castagnoli))
	binary.LittleEndian.PutUint32(out[8:], crc32.Checksum(payload, castagnoli))
	return append(out, payload...)
}

// appendRecord writes one record and returns its sequence number for
// durable. The caller orders appends. A failed write is undone (the file
// is cut back to its last whole record) or, if that fails too, leaves the
// journal failed: either way the record is not in the journal.
func (j *journal) appendRecord(payload []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return 0, j.err
	}
	data := frame(payload)
	if _, err := j.f.WriteAt(data, j.size); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.err = fmt.Errorf("journal write: %w (and cutting it back: %v)", err, terr)
		}
		return 0, err
	}
	j.size += int64(len(data))
	j.written++
	return j.written, nil
}

// durable waits until append seq is on disk. One waiter at a time runs
// the fsync, for every append written when it starts; the others wait for
// it and, if their append came later, the next one.
func (j *journal) durable(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.onDisk < seq {
		if j.err != nil {
			return j.err
		}
		if j.syncing {
			j.synced.Wait()
			continue
		}
		j.syncing = true
		upTo := j.written
		j.mu.Unlock()
		err := syncFile(j.f)
		j.mu.Lock()
		j.syncing = false
		j.fsyncs++
		if err != nil {
			j.err = fmt.Errorf("journal fsync: %w", err)
		} else {
			j.onDisk = max(j.onDisk, upTo)
		}
		j.synced.Broadcast()
	}
	return nil
}

// records returns how many appends the journal holds.
func (j *journal) records() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.written
}

// failed returns the error that stopped the journal, nil if none.
func (j *journal) failed() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// close waits for every append to be durable (their waiters must not see
// a closed file) and closes the file.
func (j *journal) close() error {
	err := j.durable(j.records())
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readJournal returns the records of journal data that follow base; none
// when data is not a journal of base (see the package comment), when it
// is empty or its header is torn. A torn last record is left out; a
// record that fails its checksum before the last is ErrJournalCorrupt.
func readJournal(data, base []byte) ([]journalRecord, error) {
	if len(data) < journalHeaderSize {
		if !bytes.HasPrefix([]byte(journalMagic), data[:min(len(data), len(journalMagic))]) {
			return nil, fmt.Errorf("%w: no journal header", ErrJournalCorrupt)
		}
		return nil, nil // torn as it was made: nothing was appended
	}
	if string(data[:len(journalMagic)]) != journalMagic {
		return nil, fmt.Errorf("%w: no journal header", ErrJournalCorrupt)
	}
	sum := sha256.Sum256(base)
	if !bytes.Equal(sum[:], data[len(journalMagic):journalHeaderSize]) {
		return nil, nil
	}
	var out []journalRecord
	at := journalHeaderSize
	for at < len(data) {
		rest := data[at:]
		if len(rest) < frameHeader {
			break // torn in its frame
		}
		n := binary.LittleEndian.Uint32(rest)
		if crc32.Checksum(rest[:4], castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
			if !slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }) {
				break // zeros: the file grew, its data did not land
			}
			return nil, fmt.Errorf("%w: bad record length at offset %d", ErrJournalCorrupt, at)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: empty record at offset %d", ErrJournalCorrupt, at)
		}
		if uint64(n) > uint64(len(rest)-frameHeader) {
			break // a whole length, the record cut short
		}
		payload := rest[frameHeader : frameHeader+n]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[8:]) {
			if frameHeader+int(n) == len(rest) {
				break // the last record, torn
			}
			return nil, fmt.Errorf("%w: record at offset %d fails its checksum", ErrJournalCorrupt, at)
		}
		var r journalRecord
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, fmt.Errorf("%w: record at offset %d: %v", ErrJournalCorrupt, at, err)
		}
		out = append(out, r)
		at += frameHeader + int(n)
	}
	return out, nil
}

// loadFile reads a project file and its journal and returns the file's
// content with the journal's changes applied (re-encoded, not laid out as
// Encode would) and whether there were any.
func loadFile(path string) ([]byte, bool, error) {
	base, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	jdata, err := os.ReadFile(path + JournalSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return base, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	recs, err := readJournal(jdata, base)
	if err != nil {
		return nil, false, fmt.Errorf("%s%s: %w", path, JournalSuffix, err)
	}
	if len(recs) == 0 {
		return base, false, nil
	}
	out, err := replay(base, recs)
	if err != nil {
		return nil, false, fmt.Errorf("%s%s: %w", path, JournalSuffix, err)
	}
	return out, true, nil
}

// idOf returns an entry's id.
func idOf(kind string, raw json.RawMessage) (string, error) {
	var e struct {
		Node    string `json:"node_id"`
		Link    string `json:"link_id"`
		Drawing string `json:"drawing_id"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return "", err
	}
	switch kind {
	case "nodes":
		return e.Node, nil
	case "links":
		return e.Link, nil
	}
	return e.Drawing, nil
}

var kinds = []string{"drawings", "links", "nodes"}

// replayArray is one topology array being replayed: its ids in order
// (those removed left in place as holes until the end), where each is,
// and the entries by id. Its order holds each id of val once, as a
// journal Save wrote implies, so a record costs what it changes, not the
// size of the project.
type replayArray struct {
	order []string
	hole  []bool // order[i] was removed
	at    map[string]int
	val   map[string]json.RawMessage
}

func (a *replayArray) del(id string) {
	if i, ok := a.at[id]; ok {
		a.hole[i] = true
		delete(a.at, id)
		delete(a.val, id)
	}
}

func (a *replayArray) set(id string, v json.RawMessage) {
	if _, ok := a.at[id]; !ok {
		a.at[id] = len(a.order)
		a.order = append(a.order, id)
		a.hole = append(a.hole, false)
	}
	a.val[id] = v
}

// reorder takes a record's order (dedupPresent: the ids of val it lacks
// are kept, at the end).
func (a *replayArray) reorder(ord []string) {
	a.order = dedupPresent(ord, a.val)
	a.hole = make([]bool, len(a.order))
	clear(a.at)
	for i, id := range a.order {
		a.at[id] = i
	}
}

// items returns the entries, in order.
func (a *replayArray) items() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(a.val))
	for i, id := range a.order {
		if !a.hole[i] {
			out = append(out, a.val[id])
		}
	}
	return out
}

// replay applies records to a project file's content. The result is
// compact JSON laid out by hand from the members' bytes (each was checked
// as it was decoded), not encoded again: its reader decodes it.
func replay(base []byte, recs []journalRecord) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(base, &top); err != nil {
		return nil, fmt.Errorf("decode the project file: %w", err)
	}
	var topo map[string]json.RawMessage
	if err := json.Unmarshal(top["topology"], &topo); err != nil {
		return nil, fmt.Errorf("decode the project file's topology: %w", err)
	}
	arrays := map[string]*replayArray{}
	for _, k := range kinds {
		a := &replayArray{at: map[string]int{}, val: map[string]json.RawMessage{}}
		arrays[k] = a
		var items []json.RawMessage
		if raw, ok := topo[k]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, fmt.Errorf("decode the project file's %s: %w", k, err)
			}
		}
		for _, it := range items {
			id, err := idOf(k, it)
			if err != nil {
				return nil, fmt.Errorf("decode the project file's %s: %w", k, err)
			}
			a.set(id, it)
		}
	}
	for _, r := range recs {
		if r.Top != nil {
			top = nil // Unmarshal into a map would merge
			if err := json.Unmarshal(r.Top, &top); err != nil {
				return nil, fmt.Errorf("decode a record: %w", err)
			}
			topo = nil
			if err := json.Unmarshal(top["topology"], &topo); err != nil {
				return nil, fmt.Errorf("decode a record's topology: %w", err)
			}
		}
		for _, d := range r.Del {
			a, ok := arrays[d.K]
			if !ok {
				return nil, fmt.Errorf("a record removes from %q", d.K)
			}
			a.del(d.ID)
		}
		for _, e := range r.Set {
			a, ok := arrays[e.K]
			if !ok {
				return nil, fmt.Errorf("a record sets in %q", e.K)
			}
			a.set(e.ID, e.V)
		}
		for k, ord := range r.Order {
			if a, ok := arrays[k]; ok {
				a.reorder(ord)
			}
		}
	}
	if topo == nil {
		topo = map[string]json.RawMessage{}
	}
	var tb bytes.Buffer
	for _, k := range kinds {
		tb.Reset()
		tb.WriteByte('[')
		for i, it := range arrays[k].items() {
			if i > 0 {
				tb.WriteByte(',')
			}
			tb.Write(it)
		}
		tb.WriteByte(']')
		topo[k] = slices.Clone(tb.Bytes())
	}
	top["topology"] = joinObject(topo)
	return joinObject(top), nil
}

// joinObject lays out an object from its members' bytes (valid JSON
// each), keys sorted.
func joinObject(m map[string]json.RawMessage) []byte {
	n := 2
	for k, v := range m {
		n += len(k) + len(v) + 8
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(k) // a string always encodes
		out = append(out, key...)
		out = append(out, ':')
		v := m[k]
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		out = append(out, v...)
	}
	return append(out, '}')
}

// dedupPresent keeps the ids of order that are in val, once each, and
// appends those of val it lacks (none, for a journal Save wrote).
func dedupPresent(order []string, val map[string]json.RawMessage) []string {
	seen := make(map[string]bool, len(order))
	out := order[:0:0]
	for _, id := range order {
		if _, ok := val[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) < len(val) {
		// An order that leaves out an entry (not one Save writes): the
		// entry is kept, at the end.
		for _, id := range slices.Sorted(maps.Keys(val)) {
			if !seen[id] {
				out = append(out, id)
			}
		}
	}
	return out
}
