package topology

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/labtap/labtap/controller/project"
)

// labSnapshot is a project the size of scripts/bench -api's lab: 200
// nodes (switches with 8 ports mapped, VPCS), 300 links.
func labSnapshot(dir string, nodes, links int) *project.Snapshot {
	snap := snapshot(dir)
	base := snap.Nodes[0]
	snap.Nodes = nil
	for i := range nodes {
		n := base
		n.ID = fmt.Sprintf("9d3c51e2-7a41-4c0b-8f7e-%012d", i)
		n.Name = fmt.Sprintf("N%d", i)
		n.X, n.Y = i*10, i*5
		n.Label = project.Label{"text": json.RawMessage(fmt.Sprintf("%q", n.Name)), "x": json.RawMessage("5"), "y": json.RawMessage("-25"), "style": json.RawMessage(`"font-family: TypeWriter;font-size: 10.0;font-weight: bold;fill: #000000;fill-opacity: 1.0;"`)}
		var pm []any
		for p := range 8 {
			pm = append(pm, map[string]any{"name": fmt.Sprintf("Ethernet%d", p), "port_number": p, "type": "access", "vlan": 1})
		}
		n.Properties = map[string]any{"ports_mapping": pm}
		snap.Nodes = append(snap.Nodes, n)
	}
	bl := snap.Links[0]
	snap.Links = nil
	for i := range links {
		l := bl
		l.ID = fmt.Sprintf("2f0b7a9e-3c0d-4a5e-9a51-%012d", i)
		l.Endpoints = []project.Endpoint{
			{NodeID: snap.Nodes[i%nodes].ID, Label: project.Label{"text": json.RawMessage(`"e0"`), "x": json.RawMessage("40"), "y": json.RawMessage("20")}},
			{NodeID: snap.Nodes[(i+1)%nodes].ID, Adapter: 0, Port: i % 8, Label: project.Label{"text": json.RawMessage(`"e1"`)}},
		}
		snap.Links = append(snap.Links, l)
	}
	return snap
}

// BenchmarkSaveLab is one change saved in a 200-node, 300-link project:
// what a node move costs in Store.Save (encode, write, fsync, rename).
func BenchmarkSaveLab(b *testing.B) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 200, 300)
	if err := s.Save(snap); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		snap.Nodes[0].X = i
		if err := s.Save(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLab is the encode alone.
func BenchmarkEncodeLab(b *testing.B) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 200, 300)
	data, _ := s.Encode(snap)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Encode(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeIncrementalLab is Save's encoding of one change (a node
// moved) in the lab.
func BenchmarkEncodeIncrementalLab(b *testing.B) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 200, 300)
	if _, err := s.encodeIncremental(snap); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		snap.Nodes[0].X = i
		if _, err := s.encodeIncremental(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveAsyncLab is what one change (a node moved) costs a save
// under the project's lock in the lab: the encode and the journal append,
// with the whole-file writes the journal's bound brings (amortised), and
// not the fsync its wait shares with the other changes.
func BenchmarkSaveAsyncLab(b *testing.B) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 200, 300)
	if err := s.Save(snap); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		snap.Nodes[i%200].X = i
		if _, err := s.SaveAsync(snap); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s.Close()
}

// journaledLab writes the lab whole, then n node moves as journal
// records, and returns the file's path and the file and journal as they
// are then, for a benchmark to lay down again each round.
func journaledLab(b *testing.B, n int) (path string, file, journal []byte) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 200, 300)
	if err := s.Save(snap); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		snap.Nodes[i%200].X = i + 1
		if err := s.Save(snap); err != nil {
			b.Fatal(err)
		}
	}
	// Its journal closed as it is, its idle fold stopped (it would write
	// into the directory as the benchmark's cleanup removes it).
	s.forget(snap.Project.ID, "")
	path = filepath.Join(snap.Project.Path, snap.Project.Filename)
	file, journal = must(os.ReadFile(path)), must(os.ReadFile(path+JournalSuffix))
	if len(must(readJournal(journal, file))) != n {
		b.Fatalf("the journal does not hold the %d moves", n)
	}
	return path, file, journal
}

// BenchmarkLoadJournaledLab is a load of the lab with 300 changes in its
// journal: read, replay, decode.
func BenchmarkLoadJournaledLab(b *testing.B) {
	path, _, _ := journaledLab(b, 300)
	s := &Store{Dir: filepath.Dir(filepath.Dir(path)), Version: "2.2.59"}
	p := &project.Project{ID: "x", Path: filepath.Dir(path), Filename: filepath.Base(path)}
	for b.Loop() {
		if _, err := s.Load(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFoldFromDiskLab is the fold of that journal into its file
// (LoadAll at start, and Fold of a project saved before the start): the
// load, then the file written whole.
func BenchmarkFoldFromDiskLab(b *testing.B) {
	path, file, journal := journaledLab(b, 300)
	s := &Store{Dir: filepath.Dir(filepath.Dir(path)), Version: "2.2.59"}
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, file, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path+JournalSuffix, journal, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if snap, _, err := s.foldFromDisk(path); err != nil || snap == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLab1000 is the decode of a project file the size of
// scripts/bench -lab 1000's (1,000 nodes, 999 links): the controller's
// largest own cost in opening that lab.
func BenchmarkDecodeLab1000(b *testing.B) {
	dir := b.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	data, err := s.Encode(labSnapshot(dir, 1000, 999))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data, dir, "lab.gns3"); err != nil {
			b.Fatal(err)
		}
	}
}
