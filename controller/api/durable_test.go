package api_test

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// faultyDisk is the project files' Store on a disk that fails when told:
// a save's flush fails, and so does writing the file whole.
type faultyDisk struct {
	*topology.Store
	failing atomic.Bool
}

func (d *faultyDisk) SaveAsync(snap *project.Snapshot) (func() error, error) {
	if d.failing.Load() { // written nowhere: only a later save can carry it
		return func() error { return errors.New("fsync: input/output error") }, nil
	}
	return d.Store.SaveAsync(snap)
}

func (d *faultyDisk) Save(snap *project.Snapshot) error {
	if d.failing.Load() {
		return errors.New("no space left on device")
	}
	return d.Store.Save(snap)
}

// TestAChangeTheDiskDoesNotTakeIsA500: a change whose flush and whole
// rewrite fail answers GNS3's 500 with a JSON message, not success; the
// next change once the disk works saves it too.
func TestAChangeTheDiskDoesNotTakeIsA500(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "projects")
	disk := &faultyDisk{Store: &topology.Store{Dir: dir, Version: "2.2.59"}}
	reg := compute.NewRegistry(compute.RegistryConfig{})
	svc := project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Store: disk})
	t.Cleanup(svc.Close)
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", Context: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, app: app}
	p := s.must("POST", "/v2/projects", map[string]any{"name": "disk"}, 201, "/v2/projects").body["project_id"].(string)
	disk.failing.Store(true)
	r := s.do("PUT", "/v2/projects/"+p, map[string]any{"scene_width": 3000})
	if r.status != 500 || r.body["message"] != "Could not write topology: no space left on device" || r.body["status"] != float64(500) {
		t.Fatalf("a change the disk did not take: %d %s", r.status, r.raw)
	}
	got := s.must("GET", "/v2/projects/"+p, nil, 200, "/v2/projects/{project_id}").body
	onDisk := func() *project.Snapshot {
		t.Helper()
		snap, err := (&topology.Store{Dir: dir}).Load(&project.Project{ID: p, Path: got["path"].(string), Filename: got["filename"].(string)})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	if w := onDisk().Project.Settings.SceneWidth; w == 3000 {
		t.Fatal("the failed change is on disk already: the test's disk wrote it")
	}
	disk.failing.Store(false)
	s.must("PUT", "/v2/projects/"+p, map[string]any{"scene_height": 2000}, 200, "/v2/projects/{project_id}")
	snap := onDisk()
	if snap.Project.Settings.SceneWidth != 3000 || snap.Project.Settings.SceneHeight != 2000 {
		t.Fatalf("on disk: scene %dx%d, want the failed change's width 3000 and the next one's height 2000",
			snap.Project.Settings.SceneWidth, snap.Project.Settings.SceneHeight)
	}
}
