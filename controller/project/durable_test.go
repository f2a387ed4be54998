package project

import (
	"testing"
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
