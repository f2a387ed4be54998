package project

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// gatedStore writes saves at once and makes each durable only when the
// test lets it (gate); waiting tells that a wait began.
type gatedStore struct {
	MemoryStore
	waiting chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) SaveAsync(snap *Snapshot) (func() error, error) {
	if err := s.MemoryStore.Save(snap); err != nil {
		return nil, err
	}
	return func() error {
		s.waiting <- struct{}{}
		<-s.gate
		return nil
	}, nil
}

// TestAChangeAnswersOnceDurableWithoutHoldingItsProject: a change returns
// only after its save is on disk, and waits for that with the project's
// ops lock released, so the next change is written meanwhile (and the
// two can share the disk's flush).
func TestAChangeAnswersOnceDurableWithoutHoldingItsProject(t *testing.T) {
	store := &gatedStore{waiting: make(chan struct{}), gate: make(chan struct{})}
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes(), Store: store})
	p, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	update := func(zoom int) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := svc.UpdateProject(t.Context(), p.ID, ProjectUpdate{SettingsUpdate: SettingsUpdate{Zoom: &zoom}})
			done <- err
		}()
		return done
	}
	first := update(150)
	<-store.waiting // written, not yet durable
	select {
	case err := <-first:
		t.Fatalf("the change answered (%v) before its save was on disk", err)
	default:
	}
	st, err := svc.core.lookup(p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !st.ops.mu.TryLock() {
		t.Fatal("the project's ops lock is held while the change waits for the disk")
	}
	st.ops.mu.Unlock()
	second := update(160)
	<-store.waiting // the second change was written while the first waits
	if got := store.Saved(p.ID).Project.Settings.Zoom; got != 160 {
		t.Fatalf("stored zoom %d, want the second change's 160", got)
	}
	store.gate <- struct{}{}
	store.gate <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// flushStore writes saves at once; each save's flush waits for the test
// to answer it (flushes), and Save (a whole rewrite) fails with saveErr.
type flushStore struct {
	MemoryStore
	flushes chan chan error
	mu      sync.Mutex
	saveErr error
	saves   int // Saves (whole rewrites) that succeeded
}

func (s *flushStore) SaveAsync(snap *Snapshot) (func() error, error) {
	if err := s.MemoryStore.Save(snap); err != nil {
		return nil, err
	}
	return func() error {
		answer := make(chan error)
		s.flushes <- answer
		return <-answer
	}, nil
}

func (s *flushStore) Save(snap *Snapshot) error {
	s.mu.Lock()
	err := s.saveErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.saves++
	s.mu.Unlock()
	return s.MemoryStore.Save(snap)
}

func (s *flushStore) failSaves(err error) {
	s.mu.Lock()
	s.saveErr = err
	s.mu.Unlock()
}

func flushFixture(t *testing.T) (*Service, *flushStore, *recorder, Project) {
	t.Helper()
	store := &flushStore{flushes: make(chan chan error)}
	events := &recorder{}
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes(), Store: store, Events: events})
	p, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store, events, p
}

// zoomAsync changes the project's zoom in the background.
func zoomAsync(t *testing.T, svc *Service, id string, zoom int) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := svc.UpdateProject(t.Context(), id, ProjectUpdate{SettingsUpdate: SettingsUpdate{Zoom: &zoom}})
		done <- err
	}()
	return done
}

// zooms returns the zooms of the project.updated events recorded.
func (r *recorder) zooms() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, e := range r.events {
		if e.Action == ProjectUpdated {
			out = append(out, e.Project.Settings.Zoom)
		}
	}
	return out
}

// TestAChangeNotOnDiskAnswersTheFailureAndIsNotAnnounced: a change whose
// flush fails, and whose whole rewrite fails too, answers a 500 with
// GNS3's words, is not announced (a log.error says why), stays in memory,
// and the next save that succeeds writes it.
func TestAChangeNotOnDiskAnswersTheFailureAndIsNotAnnounced(t *testing.T) {
	svc, store, events, p := flushFixture(t)
	store.failSaves(errors.New("no space left on device"))
	done := zoomAsync(t, svc, p.ID, 150)
	(<-store.flushes) <- errors.New("fsync: input/output error")
	err := <-done
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrInternal) || pe.Msg != "Could not write topology: no space left on device" {
		t.Fatalf("a change that is not on disk answered %v, want a 500: Could not write topology: ...", err)
	}
	if z := events.zooms(); len(z) != 0 {
		t.Fatalf("listeners saw project.updated %v for a change that is not on disk", z)
	}
	if a := events.actions(); a[len(a)-1] != LogError {
		t.Fatalf("listeners were not told the change is not saved: %v", a)
	}
	if got, _ := svc.Project(p.ID); got.Settings.Zoom != 150 {
		t.Fatalf("zoom %d in memory, want the change's 150 (its compute calls were made)", got.Settings.Zoom)
	}
	// The disk heals: the next change's save holds both.
	store.failSaves(nil)
	name := "renamed"
	done = make(chan error, 1)
	go func() {
		_, err := svc.UpdateProject(t.Context(), p.ID, ProjectUpdate{Name: &name})
		done <- err
	}()
	(<-store.flushes) <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if saved := store.Saved(p.ID); saved.Project.Settings.Zoom != 150 || saved.Project.Name != "renamed" {
		t.Fatalf("saved %+v after the disk healed", saved.Project)
	}
}

// TestAFailedFlushIsRewrittenWholeBeforeTheChangeAnswers: when the
// rewrite after a failed flush succeeds, the change is on disk and
// answers (and is announced) as any other.
func TestAFailedFlushIsRewrittenWholeBeforeTheChangeAnswers(t *testing.T) {
	svc, store, events, p := flushFixture(t)
	store.mu.Lock()
	before := store.saves
	store.mu.Unlock()
	done := zoomAsync(t, svc, p.ID, 150)
	(<-store.flushes) <- errors.New("fsync: input/output error")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	after := store.saves
	store.mu.Unlock()
	if after != before+1 || store.Saved(p.ID).Project.Settings.Zoom != 150 {
		t.Fatalf("the change answered after %d rewrites, want 1 that holds it", after-before)
	}
	if z := events.zooms(); !slices.Equal(z, []int{150}) {
		t.Fatalf("project.updated for zooms %v, want [150]", z)
	}
}

// TestEventsLeaveOnceOnDiskInTheOrderOfTheChanges: a change's event waits
// for its flush, and for the events of the changes before it, even when
// its own flush ends first.
func TestEventsLeaveOnceOnDiskInTheOrderOfTheChanges(t *testing.T) {
	svc, store, events, p := flushFixture(t)
	first := zoomAsync(t, svc, p.ID, 150)
	flushFirst := <-store.flushes
	second := zoomAsync(t, svc, p.ID, 160)
	flushSecond := <-store.flushes
	if z := events.zooms(); len(z) != 0 {
		t.Fatalf("listeners saw zooms %v before they were on disk", z)
	}
	flushSecond <- nil
	// The second change is on disk; its event must wait for the first's
	// (a moment for a wrong one to leave: slowness only hides it).
	time.Sleep(100 * time.Millisecond)
	if z := events.zooms(); len(z) != 0 {
		t.Fatalf("listeners saw zooms %v before the first change's was on disk", z)
	}
	flushFirst <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if z := events.zooms(); !slices.Equal(z, []int{150, 160}) {
		t.Fatalf("project.updated for zooms %v, want [150 160]", z)
	}
}
