package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/atomicfile"
)

// journaled saves a project whole, then moves its first node to x = 1, 2
// and 3, each move a journal record, and returns the project's file path
// and the journal's content.
func journaled(t *testing.T) (*Store, *project.Snapshot, string, []byte) {
	t.Helper()
	dir := t.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 4, 3)
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	for x := 1; x <= 3; x++ {
		snap.Nodes[0].X = x
		if err := s.Save(snap); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(snap.Project.Path, snap.Project.Filename)
	j, err := os.ReadFile(path + JournalSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return s, snap, path, j
}

// firstX loads the project as stored and returns its first node's x.
func firstX(t *testing.T, s *Store, p *project.Project) int {
	t.Helper()
	snap, err := s.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Nodes[0].X
}

// recordEnds returns the offset where each of the journal's records ends.
func recordEnds(t *testing.T, j []byte) []int {
	t.Helper()
	var ends []int
	for at := journalHeaderSize; at < len(j); {
		n := int(uint32(j[at]) | uint32(j[at+1])<<8 | uint32(j[at+2])<<16 | uint32(j[at+3])<<24)
		at += frameHeader + n
		ends = append(ends, at)
	}
	if len(ends) != 3 || ends[2] != len(j) {
		t.Fatalf("journal of %d bytes holds records ending at %v, want 3 records", len(j), ends)
	}
	return ends
}

func TestAJournalReplaysEveryChangeOnItsFile(t *testing.T) {
	s, snap, path, _ := journaled(t)
	if got := firstX(t, s, &snap.Project); got != 3 {
		t.Fatalf("loaded x = %d, the last change moved it to 3", got)
	}
	base, _ := Decode(must(os.ReadFile(path)), "", "lab.gns3")
	if base.Nodes[0].X != 0 {
		t.Fatalf("the moves rewrote the file (x = %d there): they belong in the journal", base.Nodes[0].X)
	}
	// A fold writes them into the file.
	if err := s.Save(snap); err != nil { // the Load above forgot the cache: written whole
		t.Fatal(err)
	}
	base, _ = Decode(must(os.ReadFile(path)), "", "lab.gns3")
	if base.Nodes[0].X != 3 {
		t.Fatalf("after a whole write the file has x = %d", base.Nodes[0].X)
	}
}

func TestATornLastJournalRecordIsIgnored(t *testing.T) {
	_, snap, path, j := journaled(t)
	ends := recordEnds(t, j)
	for name, cut := range map[string]int{
		"in its payload":       ends[2] - 3,
		"in its length":        ends[1] + 2,
		"after its length":     ends[1] + 5,
		"just after its frame": ends[1] + frameHeader + 1,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path+JournalSuffix, j[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			s := &Store{Dir: filepath.Dir(snap.Project.Path)}
			if got := firstX(t, s, &snap.Project); got != 2 {
				t.Fatalf("loaded x = %d; the torn record moved it to 3, the one before to 2", got)
			}
		})
	}
	t.Run("its payload garbled", func(t *testing.T) {
		// Whole in length, not in content: a crash before its data landed.
		bad := append([]byte(nil), j...)
		bad[len(bad)-2] ^= 0x40
		if err := os.WriteFile(path+JournalSuffix, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Store{Dir: filepath.Dir(snap.Project.Path)}
		if got := firstX(t, s, &snap.Project); got != 2 {
			t.Fatalf("loaded x = %d; the torn record moved it to 3, the one before to 2", got)
		}
	})
	t.Run("zeros after the last record", func(t *testing.T) {
		// A file extended by a crash before its data landed.
		if err := os.WriteFile(path+JournalSuffix, append(j[:len(j):len(j)], make([]byte, 64)...), 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Store{Dir: filepath.Dir(snap.Project.Path)}
		if got := firstX(t, s, &snap.Project); got != 3 {
			t.Fatalf("loaded x = %d, want 3", got)
		}
	})
}

func TestACorruptJournalRecordBeforeTheLastIsAnError(t *testing.T) {
	_, snap, path, j := journaled(t)
	ends := recordEnds(t, j)
	bad := append([]byte(nil), j...)
	bad[ends[0]+20] ^= 0x40 // in the second record's payload
	if err := os.WriteFile(path+JournalSuffix, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Store{Dir: filepath.Dir(snap.Project.Path)}
	if _, err := s.Load(&snap.Project); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("Load: %v, want ErrJournalCorrupt", err)
	}
	snaps, errs := s.LoadAll()
	if len(snaps) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrJournalCorrupt) {
		t.Fatalf("LoadAll: %d projects, errors %v; want the project reported corrupt", len(snaps), errs)
	}
	// Nothing was folded over it: the file is as it was.
	if x := must(Decode(must(os.ReadFile(path)), "", "lab.gns3")).Nodes[0].X; x != 0 {
		t.Fatalf("the file has x = %d after a failed load", x)
	}
}

func TestAJournalOfAnotherFileIsIgnored(t *testing.T) {
	s, snap, path, _ := journaled(t)
	// The file replaced by someone else (or by a fold that ended before
	// its journal was reset): the journal does not follow it.
	other := *snap
	other.Nodes = append([]project.Node(nil), snap.Nodes...)
	other.Nodes[0].X = 77
	data, err := s.Encode(&other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := &Store{Dir: filepath.Dir(snap.Project.Path)}
	if got := firstX(t, s2, &snap.Project); got != 77 {
		t.Fatalf("loaded x = %d, the file says 77", got)
	}
}

func TestLoadAllFoldsTheJournal(t *testing.T) {
	_, snap, path, _ := journaled(t)
	s := &Store{Dir: filepath.Dir(snap.Project.Path)}
	snaps, errs := s.LoadAll()
	if len(errs) != 0 || len(snaps) != 1 || snaps[0].Nodes[0].X != 3 {
		t.Fatalf("LoadAll: %d projects, errors %v", len(snaps), errs)
	}
	if x := must(Decode(must(os.ReadFile(path)), "", "lab.gns3")).Nodes[0].X; x != 3 {
		t.Fatalf("the file has x = %d after LoadAll; the journal says 3", x)
	}
	if _, err := os.Stat(path + JournalSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folded journal is still there: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSavesThatWaitTogetherShareOneFsync makes eight changes, one after
// the other as a project's changes are, then waits for them: one fsync
// makes them all durable.
func TestSavesThatWaitTogetherShareOneFsync(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir, Version: "2.2.59"}
	snap := labSnapshot(dir, 8, 3)
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	var waits []func() error
	for i := range 8 {
		snap.Nodes[i].X = 100 + i
		wait, err := s.SaveAsync(snap)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
	}
	// The first alone, then the others at once: the first one's fsync
	// covers every change written before it.
	errs := make([]error, len(waits))
	errs[0] = waits[0]()
	var wg sync.WaitGroup
	for i, w := range waits[1:] {
		wg.Go(func() { errs[i+1] = w() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	j := s.cached(snap.Project.ID).j
	j.mu.Lock()
	n, recs := j.fsyncs, j.written
	j.mu.Unlock()
	if recs != 8 || n != 1 {
		t.Fatalf("%d records made durable by %d fsyncs, want 8 by 1", recs, n)
	}
	loaded, err := (&Store{Dir: dir}).Load(&snap.Project)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if loaded.Nodes[i].X != 100+i {
			t.Fatalf("node %d at x=%d, want %d", i, loaded.Nodes[i].X, 100+i)
		}
	}
}

// A project whose cache is evicted (more than maxCached projects saved
// since) keeps its acknowledged changes: its journal stays beside its file
// and replays at a load, and its next save writes the file whole.
func TestAnEvictedProjectKeepsItsJournaledChanges(t *testing.T) {
	root := t.TempDir()
	s := &Store{Dir: root, Version: "2.2.59"}
	at := func(i int) *project.Snapshot {
		snap := labSnapshot(root, 2, 1)
		snap.Project.ID = fmt.Sprintf("5c1e0a52-0d6f-4b7e-9a31-%012d", i)
		snap.Project.Path = filepath.Join(root, snap.Project.ID)
		if err := os.MkdirAll(snap.Project.Path, 0o755); err != nil {
			t.Fatal(err)
		}
		return snap
	}
	a := at(0)
	must(0, s.Save(a))
	a.Nodes[0].X = 7
	must(0, s.Save(a))
	for i := 1; i <= maxCached; i++ {
		must(0, s.Save(at(i)))
	}
	if s.cached(a.Project.ID) != nil {
		t.Fatalf("%d projects saved after it, and the first is still cached", maxCached)
	}
	if x := firstX(t, &Store{Dir: root, Version: "2.2.59"}, &a.Project); x != 7 {
		t.Fatalf("evicted project loads with x = %d, want 7 (its journaled move)", x)
	}
	a.Nodes[0].X = 8
	must(0, s.Save(a))
	if x := firstX(t, &Store{Dir: root, Version: "2.2.59"}, &a.Project); x != 8 {
		t.Fatalf("saved again after its eviction, the project loads with x = %d, want 8", x)
	}
}

// TestAfterAFailedFlushTheNextSaveWritesTheWholeProject: a change whose
// journal flush failed, and whose whole rewrite failed too, is written by
// the next save that succeeds, whole, with the project as it is then.
func TestAfterAFailedFlushTheNextSaveWritesTheWholeProject(t *testing.T) {
	s, snap, path, _ := journaled(t)
	ioErr := errors.New("input/output error")
	syncFile = func(*os.File) error { return ioErr }
	defer func() { syncFile = (*os.File).Sync }()
	snap.Nodes[0].X = 40
	wait, err := s.SaveAsync(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); !errors.Is(err, ioErr) {
		t.Fatalf("a failed flush waited with %v", err)
	}
	writeFile = func(string, []byte, os.FileMode) error { return ioErr }
	defer func() { writeFile = atomicfile.Write }()
	if err := s.Save(snap); !errors.Is(err, ioErr) { // the rewrite after it
		t.Fatalf("the rewrite of a project whose disk fails: %v", err)
	}
	syncFile, writeFile = (*os.File).Sync, atomicfile.Write
	snap.Nodes[1].X = 50
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	fresh := &Store{Dir: s.Dir, Version: s.Version}
	data := must(os.ReadFile(path))
	got, err := Decode(data, filepath.Dir(path), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	if got.Nodes[0].X != 40 || got.Nodes[1].X != 50 {
		t.Fatalf("the project file holds x %d and %d, want the unflushed 40 and the next save's 50", got.Nodes[0].X, got.Nodes[1].X)
	}
	if n := firstX(t, fresh, &snap.Project); n != 40 {
		t.Fatalf("loaded x %d, want 40", n)
	}
}

// TestAMoveRecordsTheNodeOnly: a node moved is a record of that node
// alone, with no order of the arrays (the order it implies is theirs).
func TestAMoveRecordsTheNodeOnly(t *testing.T) {
	_, snap, path, j := journaled(t)
	recs := must(readJournal(j, must(os.ReadFile(path))))
	for i, r := range recs {
		if r.Top != nil || r.Del != nil || r.Order != nil || len(r.Set) != 1 || r.Set[0].ID != snap.Nodes[0].ID {
			t.Fatalf("record %d of a node move: top %d bytes, del %v, order %v, set %d entries", i, len(r.Top), r.Del, r.Order, len(r.Set))
		}
	}
}
