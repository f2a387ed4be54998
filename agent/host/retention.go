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
// directory, may hold at most a budget of bytes (Config.CaptureBudget).
// Past it, the oldest stopped files go first (by last write); a running
// capture's file is never removed. A new capture is refused only when the
// running ones alone hold the budget. Each removal is logged (info) and
// counted (Retention).

// RetentionSweepEvery is how often the budget is checked while captures
// run, besides each capture's start.
const RetentionSweepEvery = 10 * time.Second

// retention holds what the budget removed, for /metrics.
type retention struct {
	budget  int64      // bytes; 0: none
	mu      sync.Mutex // one sweep at a time
	files   atomic.Uint64
	bytes   atomic.Uint64
	lastRun atomic.Int64 // bytes the running captures held at the last sweep
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

// enforceBudget removes the oldest stopped capture files of every project
// until all of them fit in the budget, and returns the bytes the running
// captures' files hold (which stay, whatever they hold).
func (o *Captures) enforceBudget() (running int64) {
	r := &o.retention
	if r.budget <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	projects, _ := os.ReadDir(filepath.Join(o.dataDir, "projects"))
	var files []sweptFile
	var total int64
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
			total += sf.size
			if sf.running {
				running += sf.size
			}
			files = append(files, sf)
		}
		f.close()
	}
	r.lastRun.Store(running)
	if total <= r.budget {
		return running
	}
	slices.SortFunc(files, func(a, b sweptFile) int { return a.modified.Compare(b.modified) })
	for _, sf := range files {
		if total <= r.budget {
			break
		}
		if sf.running {
			continue
		}
		if err := o.DeleteFile(sf.projectID, sf.name); err != nil {
			continue // running since, or gone
		}
		total -= sf.size
		r.files.Add(1)
		r.bytes.Add(uint64(sf.size))
		o.log.Info("capture file removed: the captures are over their disk budget", "project", sf.projectID, "file", sf.name,
			"bytes", sf.size, "modified", sf.modified.UTC(), "budget", r.budget, "left", total)
	}
	if total > r.budget {
		o.log.Warn("captures over their disk budget: only running captures are left", "budget", r.budget, "bytes", total)
	}
	return running
}

// admit makes room for a new capture: it enforces the budget, and refuses
// the capture when the running ones alone hold it.
func (o *Captures) admit() error {
	if o.retention.budget <= 0 {
		return nil
	}
	if running := o.enforceBudget(); running >= o.retention.budget {
		return proto.Errorf(proto.CodeConflict,
			"The capture disk budget (%d bytes, --capture-disk-budget) is held by running captures alone (%d bytes): stop one, or raise the budget",
			o.retention.budget, running)
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
