package project

import (
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/labtap/labtap/capspec"
)

// Quotas: limits on what a set of projects may hold (nodes), run (running
// nodes, their RAM) and keep on disk (capture bytes), whoever sets them.
// The Service asks Config.Quotas which quotas a change in a project must
// keep, counts what their projects use, and refuses the change with
// ErrConflict ("quota exceeded: ...") when it would take one past its
// limit. A change that passes is a claim, counted with the projects'
// state until the state shows it (or it is undone): the count and the
// claim are one step under quotaMu, so two changes at a limit never both
// pass, and no lock is held while the change's compute calls run.

// NoLimit is a Usage member that limits nothing.
const NoLimit = -1

// Usage is what projects use, or (as Quota.Max) the most they may.
type Usage struct {
	// Nodes counts every node.
	Nodes int64
	// Running counts started or suspended nodes, but the built-in
	// switches, hubs and clouds, which run whenever they exist.
	Running int64
	// RAMMB is the RAM of the running QEMU nodes (their "ram") and docker
	// nodes (their "memory", when set), in MB.
	RAMMB int64
	// CaptureBytes is the size of the project's capture files on the
	// controller's disk plus, for each running capture, the most it may
	// write (its capture_max_bytes, whole ring).
	CaptureBytes int64
}

// Unlimited is a Usage that limits nothing.
func Unlimited() Usage { return Usage{NoLimit, NoLimit, NoLimit, NoLimit} }

// Quota is one limit a change must keep: Max over the projects Projects.
type Quota struct {
	// Scope says whose quota it is, as the refusal names it ("user alice").
	Scope    string
	Projects []string
	Max      Usage
}

// Quotas tells the quotas a change in a project must keep.
type Quotas interface {
	For(projectID string) []Quota
}

// SetQuotas sets (or, with nil, removes) the quotas changes keep from now
// on, in place of Config.Quotas: the controller opens its access
// database after the projects.
func (s *Service) SetQuotas(q Quotas) { s.core.quotas.Store(&quotasBox{q}) }

type quotasBox struct{ q Quotas }

// quotasFor lists the quotas a change in projectID keeps.
func (s *core) quotasFor(projectID string) []Quota {
	b := s.quotas.Load()
	if b == nil || b.q == nil {
		return nil
	}
	return b.q.For(projectID)
}

// claim is a change admitted and not yet done: what it adds counts
// against its project's quotas until done reports it visible in the
// project's state (or it is released), so that no lock is held across
// the change's compute calls and nothing is counted twice.
type claim struct {
	projectID string
	add       Usage
	// done reports, under the project's st.mu, whether the change shows
	// in st (then st counts it); nil: never (counted until released).
	done func(st *state) bool
}

// admit checks that c.add, added to what the projects of each quota of
// c.projectID use (changes admitted and not done included), keeps every
// limit, and then counts it until release, which the caller calls once
// the change is made or undone (a no-op when no quota applies). It reads
// projects under their st.mu: the caller may hold an ops lock, not st.mu.
func (s *core) admit(c claim) (release func(), err error) {
	qs := s.quotasFor(c.projectID)
	if len(qs) == 0 {
		return func() {}, nil
	}
	if s.hooks.beforeQuotaCount != nil {
		s.hooks.beforeQuotaCount()
	}
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	for _, q := range qs {
		used := s.usageLocked(q.Projects)
		add := c.add
		for _, d := range []struct {
			name            string
			used, add, max_ int64
			unit            string
		}{
			{"nodes", used.Nodes, add.Nodes, q.Max.Nodes, ""},
			{"running nodes", used.Running, add.Running, q.Max.Running, ""},
			{"RAM", used.RAMMB, add.RAMMB, q.Max.RAMMB, " MB"},
			{"capture bytes", used.CaptureBytes, add.CaptureBytes, q.Max.CaptureBytes, ""},
		} {
			if d.add > 0 && d.max_ >= 0 && d.used+d.add > d.max_ {
				return nil, errorf(ErrConflict, "quota exceeded: %s %s/%s%s for %s (this needs %s more)",
					d.name, strconv.FormatInt(d.used, 10), strconv.FormatInt(d.max_, 10), d.unit, q.Scope, strconv.FormatInt(d.add, 10))
			}
		}
	}
	if s.claims == nil {
		s.claims = map[*claim]bool{}
	}
	held := &c
	s.claims[held] = true
	return func() {
		s.quotaMu.Lock()
		delete(s.claims, held)
		s.quotaMu.Unlock()
	}, nil
}

// Usage is what the projects ids use now, changes admitted and not done
// included (unknown ids use nothing).
func (s *Service) Usage(ids []string) Usage {
	s.core.quotaMu.Lock()
	defer s.core.quotaMu.Unlock()
	return s.core.usageLocked(ids)
}

// usageLocked is Usage; s.quotaMu must be held.
func (s *core) usageLocked(ids []string) Usage {
	var u Usage
	for _, id := range ids {
		st, err := s.lookup(id)
		if err != nil {
			continue
		}
		var active []capspec.Spec // running captures' specs, file names set
		st.mu.RLock()
		dir := st.p.Path
		for _, n := range st.nodes {
			u.Nodes++
			if runs(n) {
				u.Running++
				u.RAMMB += ramOf(n)
			}
		}
		for _, l := range st.links {
			if l.Capture.Active {
				u.CaptureBytes += captureBudget(l.Capture.Spec)
				sp := l.Capture.Spec
				if l.Capture.FileName != "" && !sp.Ring() {
					sp.FileName = l.Capture.FileName
				}
				active = append(active, sp)
			}
		}
		for c := range s.claims {
			if c.projectID == id && (c.done == nil || !c.done(st)) {
				u.Nodes += c.add.Nodes
				u.Running += c.add.Running
				u.RAMMB += c.add.RAMMB
				u.CaptureBytes += c.add.CaptureBytes
			}
		}
		st.mu.RUnlock()
		u.CaptureBytes += captureFilesBytes(dir, active)
	}
	return u
}

// captureFilesBytes is the size of the capture files in a project's
// directory on the controller, but those of the running captures active
// (counted by their budget).
func captureFilesBytes(dir string, active []capspec.Spec) int64 {
	if dir == "" {
		return 0
	}
	entries, err := os.ReadDir(filepath.Join(dir, "project-files", "captures"))
	if err != nil {
		return 0
	}
	var total int64
next:
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		for _, sp := range active {
			if e.Name() == sp.FileName || sp.Ring() && capspec.IsRingName(e.Name(), sp.FileName) {
				continue next
			}
		}
		if fi, err := e.Info(); err == nil {
			total += fi.Size()
		}
	}
	return total
}

// runs reports whether n counts as a running node.
func runs(n *Node) bool {
	return (n.Status == Started || n.Status == Suspended) && !isAlwaysRunning(n.Type)
}

// ramOf is the RAM a running node n takes, in MB: QEMU's "ram", a docker
// node's "memory" (0 when it has none).
func ramOf(n *Node) int64 {
	key := ""
	switch n.Type {
	case "qemu":
		key = "ram"
	case TypeDocker:
		key = "memory"
	default:
		return 0
	}
	switch v := n.Properties[key].(type) {
	case int:
		return int64(max(v, 0))
	case int64:
		return max(v, 0)
	case float64:
		if v > 0 && v < math.MaxInt32 {
			return int64(v)
		}
	}
	return 0
}

// captureBudget is the most a running capture may write: its file limit,
// times the ring's files.
func captureBudget(sp capspec.Spec) int64 {
	if sp.MaxBytes <= 0 {
		return 0
	}
	if sp.Ring() {
		return sp.MaxBytes * int64(sp.RingFiles)
	}
	return sp.MaxBytes
}

// admitCapture admits a capture of projectID with spec sp. Where a quota
// limits capture bytes, a capture is given a budget: one without
// capture_max_bytes gets what the tightest quota has left (split over a
// ring's files), and one whose budget does not fit is refused.
func (s *core) admitCapture(projectID, linkID string, sp *capspec.Spec) (release func(), err error) {
	qs := s.quotasFor(projectID)
	if len(qs) == 0 {
		return func() {}, nil
	}
	if sp.MaxBytes == 0 {
		s.quotaMu.Lock()
		left := int64(-1)
		for _, q := range qs {
			if q.Max.CaptureBytes >= 0 {
				l := max(q.Max.CaptureBytes-s.usageLocked(q.Projects).CaptureBytes, 0)
				if left < 0 || l < left {
					left = l
				}
			}
		}
		s.quotaMu.Unlock()
		if left >= 0 {
			files := int64(1)
			if sp.Ring() {
				files = int64(sp.RingFiles)
			}
			sp.MaxBytes = max(left/files, capspec.MinMaxBytes)
		}
	}
	return s.admit(claim{projectID: projectID, add: Usage{CaptureBytes: captureBudget(*sp)}, done: func(st *state) bool {
		l, ok := st.links[linkID]
		return !ok || l.Capture.Active
	}})
}
