package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestAProjectsCaptureDiskBudgetRoundTripsThroughPUTTheFileAndARestart: the
// labtap project setting capture_disk_budget is set by PUT, shown in the
// project, written in its .gns3 file, and read back by a controller
// started again on the same data; a value out of bounds is a 400 that
// changes nothing.
func TestAProjectsCaptureDiskBudgetRoundTripsThroughPUTTheFileAndARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the controller twice")
	}
	data := t.TempDir()
	c := startControllerIn(t, data)
	type proj struct {
		ProjectID string `json:"project_id"`
		Path      string `json:"path"`
		Filename  string `json:"filename"`
		Budget    *int64 `json:"capture_disk_budget"`
	}
	var p proj
	c.call("POST", "/v2/projects", map[string]any{"name": "budget"}, 201, &p)
	if p.Budget != nil {
		t.Fatalf("a new project shows capture_disk_budget %d, want none (GNS3's shape)", *p.Budget)
	}
	const budget = 20 << 30
	c.call("PUT", "/v2/projects/"+p.ProjectID, map[string]any{"capture_disk_budget": budget}, 200, &p)
	if p.Budget == nil || *p.Budget != budget {
		t.Fatalf("after PUT the project shows capture_disk_budget %v, want %d", p.Budget, budget)
	}
	for _, bad := range []any{-1, int64(1<<50) + 1, "20GiB"} {
		c.call("PUT", "/v2/projects/"+p.ProjectID, map[string]any{"capture_disk_budget": bad}, 400, nil)
	}
	c.call("GET", "/v2/projects/"+p.ProjectID, nil, 200, &p)
	if p.Budget == nil || *p.Budget != budget {
		t.Fatalf("after bad PUTs the project shows capture_disk_budget %v, want %d unchanged", p.Budget, budget)
	}
	c.stop() // the file is written by then
	raw, err := os.ReadFile(filepath.Join(p.Path, p.Filename))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Budget int64 `json:"capture_disk_budget"`
	}
	if err := json.Unmarshal(raw, &file); err != nil || file.Budget != budget {
		t.Fatalf("the .gns3 file holds capture_disk_budget %d (%v), want %d", file.Budget, err, budget)
	}

	c = startControllerIn(t, data)
	c.call("POST", "/v2/projects/"+p.ProjectID+"/open", nil, 201, nil)
	var again proj
	c.call("GET", "/v2/projects/"+p.ProjectID, nil, 200, &again)
	if again.Budget == nil || *again.Budget != budget {
		t.Fatalf("after a restart the project shows capture_disk_budget %v, want %d", again.Budget, budget)
	}
	var cleared proj
	c.call("PUT", "/v2/projects/"+p.ProjectID, map[string]any{"capture_disk_budget": 0}, 200, &cleared)
	if cleared.Budget != nil {
		t.Fatalf("capture_disk_budget 0 is shown as %d, want none", *cleared.Budget)
	}
}
