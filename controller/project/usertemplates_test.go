package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// User templates survive a restart; a templates file that cannot be read
// is never written over.
func TestTemplatesAreKeptInTheirFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "templates.json")
	s := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	made, err := s.Templates.Create(map[string]any{"name": "sw", "template_type": TypeSwitch, "compute_id": "local"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Templates.Update(made.ID, map[string]any{"name": "core switch"}); err != nil {
		t.Fatal(err)
	}
	again := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	if err := again.Templates.Load(); err != nil {
		t.Fatal(err)
	}
	got, err := again.Templates.Get(made.ID)
	if err != nil || got.Name != "core switch" || got.Type != TypeSwitch || len(got.Settings["ports_mapping"].([]any)) != 8 {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}

	if err := os.WriteFile(file, []byte("[{broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := NewService(Config{ProjectsDir: t.TempDir(), TemplatesFile: file})
	if err := broken.Templates.Load(); err == nil {
		t.Fatal("a broken file loaded")
	}
	if _, err := broken.Templates.Create(map[string]any{"name": "x", "template_type": "vpcs"}); err == nil {
		t.Fatal("created a template over a file that could not be read")
	}
	if data, _ := os.ReadFile(file); string(data) != "[{broken" {
		t.Fatalf("the unreadable file was rewritten: %q", data)
	}
}

func TestTemplateErrorsNameNoServerPath(t *testing.T) {
	s := NewService(Config{ProjectsDir: t.TempDir()})
	_, err := s.Templates.Create(map[string]any{"name": "x", "template_type": "vpcs", "console_type": "vnc"})
	if err == nil || strings.Contains(err.Error(), "/") && strings.Contains(err.Error(), "file:") {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(err.Error(), "console_type") {
		t.Fatalf("error does not say what is wrong: %v", err)
	}
}
