package host

import (
	"sort"

	"github.com/labtap/labtap/agent/bridge"
)

// LinkMetrics is a snapshot of one link's counters, for the agent's
// /metrics.
type LinkMetrics struct {
	ProjectID, LinkID string
	Relay             bridge.LinkStats
	// Capture is the link's running or last capture; nil if it has had none
	// since it was made.
	Capture *CaptureMetrics
}

// CaptureMetrics counts what one capture wrote. A new capture of the same
// link starts again from 0.
type CaptureMetrics struct {
	File string // the file name in the project's captures folder (a ring's newest)
	// Frames and Bytes are the records written and the file's size; Dropped
	// counts the records the disk could not take in time or the capture
	// memory (captures.Pool) had no room for.
	Frames, Bytes, Dropped uint64
	// Rotations counts the files the capture has started after its first
	// (ring files).
	Rotations uint64
	Active    bool
}

// CaptureMemory is what the memory the captures queue their records in
// (one captures.Pool per agent, shared by every capture) holds, for the
// agent's /metrics.
type CaptureMemory struct {
	// InUse is what captures hold now; Allocated what the pool holds of
	// the kernel's (in use, and free regions not given back yet); Max its
	// bound. In bytes.
	InUse, Allocated, Max int64
	// Refused counts the blocks captures asked for while it was
	// exhausted: their frames were dropped (and counted by each capture,
	// CaptureMetrics.Dropped).
	Refused uint64
}

// Memory returns what the captures' memory holds now.
func (o *Captures) Memory() CaptureMemory {
	s := o.pool.Stats()
	return CaptureMemory{InUse: s.InUse, Allocated: s.Allocated, Max: s.Max, Refused: s.Refused}
}

// Metrics returns the counters of every link of every opened project, in
// project then link order. The counters are read without stopping the
// relays: each is exact, the set is not one instant.
func (h *Host) Metrics() []LinkMetrics {
	var out []LinkMetrics
	for _, p := range h.projects.openProjects() {
		p.mu.Lock()
		p.caps.mu.Lock()
		for _, l := range p.links {
			m := LinkMetrics{ProjectID: p.id, LinkID: l.spec.LinkID, Relay: l.relay.Stats()}
			if c := p.caps.byLink[l.spec.LinkID]; c != nil && c.tap != nil { // tap is nil while its files are being made
				frames, size, dropped, files := c.tap.ring.Stats()
				name, _ := c.tap.ring.Current()
				m.Capture = &CaptureMetrics{
					File: name, Frames: frames, Bytes: uint64(size), Dropped: dropped,
					Rotations: uint64(max(files-1, 0)), Active: !c.done,
				}
			}
			out = append(out, m)
		}
		p.caps.mu.Unlock()
		p.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ProjectID != out[j].ProjectID {
			return out[i].ProjectID < out[j].ProjectID
		}
		return out[i].LinkID < out[j].LinkID
	})
	return out
}

// captureRotated records that capture c of link l has moved on to a new
// file, and logs it. Ring-file captures call it where they announce a new
// file (capture.rotated); labtap_capture_files_rotated_total counts the
// ring's files instead (Metrics), as two may begin between two calls.
func (o *Captures) captureRotated(projectID string, l *hostLink, c *hostCapture, file string) {
	n := c.rotations.Add(1)
	o.log.Info("capture rotated", "project", projectID, "link", l.spec.LinkID, "file", file, "rotations", n)
}
