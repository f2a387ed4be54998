package project

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// blockingStore holds each Save of a project named "slow" until release
// is closed: a disk that stalls on one project's first write.
type blockingStore struct {
	MemoryStore
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *blockingStore) Save(snap *Snapshot) error {
	if snap.Project.Name == "slow" {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.MemoryStore.Save(snap)
}

// A project being created on a slow disk must not stall requests to
// every other project: CreateProject writes outside the lock that every
// lookup takes.
func TestASlowProjectCreateDoesNotStallOtherProjects(t *testing.T) {
	store := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes(), Store: store})
	t.Cleanup(svc.Close)
	other, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		_, err := svc.CreateProject(context.Background(), ProjectCreate{Name: "slow"})
		created <- err
	}()
	<-store.entered
	looked := make(chan error, 1)
	go func() {
		_, err := svc.Project(other.ID)
		looked <- err
	}()
	select {
	case err := <-looked:
		if err != nil {
			t.Fatalf("Project(other) = %v", err)
		}
	case <-time.After(10 * time.Second):
		close(store.release)
		t.Fatal("a lookup of another project waited for a create's disk write")
	}
	// While the slow create is on disk, its name and id are taken.
	if _, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "slow"}); err == nil {
		t.Error("a second create of a name being created succeeded")
	}
	close(store.release)
	if err := <-created; err != nil {
		t.Fatalf("slow create: %v", err)
	}
	if n := len(svc.Projects()); n != 2 {
		t.Errorf("%d projects, want 2", n)
	}
}

// A create whose save fails leaves neither the project nor a claim on
// its name.
func TestAFailedCreateFreesItsName(t *testing.T) {
	store := &flushStore{flushes: make(chan chan error)}
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes(), Store: store})
	t.Cleanup(svc.Close)
	store.failSaves(errors.New("disk full"))
	if _, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "p"}); err == nil {
		t.Fatal("create on a failing disk succeeded")
	}
	store.failSaves(nil)
	if _, err := svc.CreateProject(t.Context(), ProjectCreate{Name: "p"}); err != nil {
		t.Fatalf("create after the disk recovered: %v", err)
	}
}
