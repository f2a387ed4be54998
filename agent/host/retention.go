package host

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labtap/labtap/proto"
)

// Retention: an agent's capture files, of every project in its data
// directory, may hold at most a budget of bytes (Config.CaptureBudget),
// and a project's at most the project's own budget (its
// capture_disk_budget, sent with each capture's start), by the same rule.
// Past it, the oldest stopped files go first (by last write); a running
// capture's file is never removed. A new capture is refused only when the
// running ones alone hold the budget. Each removal is logged (info) and
// counted (Retention).

// RetentionSweepEvery is how often the budget is checked while captures
// run, besides each capture's start.
const RetentionSweepEvery = 10 * time.Second

// retention holds what the budget removed, for /metrics.
type retention struct {
	budget int64      // bytes; 0: none
	mu     sync.Mutex // one sweep at a time; guards projects
	// projects are the projects' own budgets, by id, as their last
	// capture's start sent them.
	projects map[string]int64
	files    atomic.Uint64
	bytes    atomic.Uint64
	lastRun  atomic.Int64 // bytes the running captures held at the last sweep
}

// Retention is what the capture disk budget removed since the agent
// started.
type Retention struct {
	Budget       int64 // bytes; 0: no budget
	FilesRemoved uint64
	BytesRemoved uint64
}

// Retention returns what the capture disk budget removed so far.
func (o *Captures) Retention() Retention {
	return Retention{Budget: o.retention.budget, FilesRemoved: o.retention.files.Load(), BytesRemoved: o.retention.bytes.Load()}
}

// sweptFile is one capture file the budget counts.
type sweptFile struct {
	projectID, name string
	size            int64
	modified        time.Time
	running         bool
}

// setProjectBudget records a project's own capture disk budget (its
// capture_disk_budget, sent with each capture's start); 0 removes it.
func (o *Captures) setProjectBudget(projectID string, budget int64) {
	r := &o.retention
	r.mu.Lock()
	defer r.mu.Unlock()
	if budget <= 0 {
		delete(r.projects, projectID)
		return
	}
	if r.projects == nil {
		r.projects = map[string]int64{}
	}
	r.projects[projectID] = budget
}

// enforceBudget removes the oldest stopped capture files of each project
// with a budget of its own until the project's files fit in it, then those
// of every project until all fit in the agent's budget, and returns the
// bytes the running captures' files hold, of all projects and by project
// (which stay, whatever they hold).
func (o *Captures) enforceBudget() (running int64, byProject map[string]int64) {
	r := &o.retention
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budget <= 0 && len(r.projects) == 0 {
		return 0, nil
	}
	projects, _ := os.ReadDir(filepath.Join(o.dataDir, "projects"))
	var files []sweptFile
	byProject = map[string]int64{}
	for _, p := range projects {
		if !p.IsDir() || checkID("project", p.Name()) != nil {
			continue
		}
		f, err := o.folder(p.Name())
		if err != nil || f.root == nil {
			continue
		}
		entries, _ := os.ReadDir(f.root.Name())
		for _, e := range entries {
			if !e.Type().IsRegular() || !isCaptureFile(e.Name()) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			sf := sweptFile{projectID: p.Name(), name: e.Name(), size: fi.Size(), modified: fi.ModTime(), running: f.writer(e.Name()) != nil}
			if sf.running {
				running += sf.size
				byProject[sf.projectID] += sf.size
			}
			files = append(files, sf)
		}
		f.close()
	}
	r.lastRun.Store(running)
	slices.SortFunc(files, func(a, b sweptFile) int { return a.modified.Compare(b.modified) })
	for id, budget := range r.projects {
		files = o.removeOver(files, budget, id)
	}
	if r.budget > 0 {
		o.removeOver(files, r.budget, "")
	}
	return running, byProject
}

// removeOver removes the oldest stopped files of files (of projectID
// alone, unless it is "") until those left hold at most budget bytes, and
// returns the files left. files are sorted oldest first.
func (o *Captures) removeOver(files []sweptFile, budget int64, projectID string) []sweptFile {
	r := &o.retention
	mine := func(sf sweptFile) bool { return projectID == "" || sf.projectID == projectID }
	var total int64
	for _, sf := range files {
		if mine(sf) {
			total += sf.size
		}
	}
	if total <= budget {
		return files
	}
	whose, flag := "agent", "--capture-disk-budget"
	if projectID != "" {
		whose, flag = "project", "capture_disk_budget"
	}
	left := files[:0:0]
	for _, sf := range files {
		if total <= budget || !mine(sf) || sf.running {
			left = append(left, sf)
			continue
		}
		if err := o.DeleteFile(sf.projectID, sf.name); err != nil {
			left = append(left, sf) // running since, or gone
			continue
		}
		total -= sf.size
		r.files.Add(1)
		r.bytes.Add(uint64(sf.size))
		o.log.Info("capture file removed: the captures are over their disk budget", "project", sf.projectID, "file", sf.name,
			"bytes", sf.size, "modified", sf.modified.UTC(), "budget", budget, "budget_of", whose, "setting", flag, "left", total)
	}
	if total > budget {
		o.log.Warn("captures over their disk budget: only running captures are left", "budget", budget, "budget_of", whose, "project", projectID, "bytes", total)
	}
	return left
}

// admit makes room for a new capture of projectID, whose own budget is
// projectBudget (0: none): it enforces the budgets, and refuses the capture
// when the running ones alone hold the agent's budget or the project's.
func (o *Captures) admit(projectID string, projectBudget int64) error {
	o.setProjectBudget(projectID, projectBudget)
	if o.retention.budget <= 0 && projectBudget <= 0 {
		return nil
	}
	running, byProject := o.enforceBudget()
	if b := o.retention.budget; b > 0 && running >= b {
		return proto.Errorf(proto.CodeConflict,
			"The capture disk budget (%d bytes, --capture-disk-budget) is held by running captures alone (%d bytes): stop one, or raise the budget",
			b, running)
	}
	if projectBudget > 0 && byProject[projectID] >= projectBudget {
		return proto.Errorf(proto.CodeConflict,
			"The project's capture disk budget (%d bytes, capture_disk_budget) is held by its running captures alone (%d bytes): stop one, or raise the budget",
			projectBudget, byProject[projectID])
	}
	return nil
}

// sweepLoop enforces the budget every RetentionSweepEvery until stop is
// closed.
func (o *Captures) sweepLoop(stop <-chan struct{}) {
	t := time.NewTicker(RetentionSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			o.enforceBudget()
		}
	}
}
