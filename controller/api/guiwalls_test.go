package api_test

import (
	"testing"
)

// TestGUINewProjectSendsNullPath: the GUI's "New project" dialog against a
// remote server sends "path": null, which GNS3 takes as "no path" (its
// schemas type path as string or null). So does "Save as", and a project
// rename may carry a null name or path.
func TestGUINewProjectSendsNullPath(t *testing.T) {
	s := newServer(t)
	r := s.must("POST", "/v2/projects", map[string]any{"name": "guilab", "path": nil, "project_id": nil}, 201, rProjects)
	id := r.body["project_id"].(string)
	if r.body["path"] == nil || r.body["path"] == "" {
		t.Fatalf("created project has no path: %s", r.raw)
	}
	u := s.must("PUT", "/v2/projects/"+id, map[string]any{"name": nil, "path": nil, "auto_close": false}, 200, rProject)
	if u.body["name"] != "guilab" || u.body["path"] != r.body["path"] {
		t.Fatalf("null name and path changed the project: %s", u.raw)
	}
	// A null name at creation stays refused: GNS3 crashes on it.
	s.must("POST", "/v2/projects", map[string]any{"name": nil}, 400, rProjects)
}
