package project

import (
	"path/filepath"
	"testing"
	"time"
)

// Listing templates must not wait for a template change's disk write.
func TestTemplateListingDoesNotWaitForAWrite(t *testing.T) {
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes(),
		TemplatesFile: filepath.Join(t.TempDir(), "templates.json")})
	t.Cleanup(svc.Close)
	writing, release := make(chan struct{}), make(chan struct{})
	svc.Templates.store.beforeWrite = func() {
		close(writing)
		<-release
	}
	created := make(chan error, 1)
	go func() {
		_, err := svc.Templates.Create(map[string]any{"template_type": "vpcs", "name": "pc"})
		created <- err
	}()
	<-writing
	listed := make(chan int, 1)
	go func() { listed <- len(svc.Templates.List()) }()
	select {
	case <-listed:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("listing templates waited for a template's write")
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}
