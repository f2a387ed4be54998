package host

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/pcapfilter"
	"github.com/labtap/labtap/proto"
	"golang.org/x/net/bpf"
)

// A link's capture: a captures.Ring fed by the relay's tap, through the
// capture filter when there is one. Creating and closing the files (a close
// drains up to the queue's 64 MiB to disk), and naming them (which reads
// the captures folder), happen with no lock the agent's other calls need
// (projects.go): a slow disk holds up the capture's own link, never the
// agent's other calls. A capture whose files are still being closed keeps
// its file name: a new capture of that name waits for the close.

// Captures runs the captures of links: it starts, names, watches,
// stops and closes them, and repairs those a crash left. Its state lives in
// each project's projectCaptures, under that one's locks.
type Captures struct {
	projects  *projectTable
	filters   *Filters
	events    *Events
	log       *slog.Logger
	buffered  bool           // Config.BufferedCaptures
	pool      *captures.Pool // the memory every capture's queue borrows from
	hooks     *hooks         // the Host's, for tests
	wg        sync.WaitGroup // the goroutines watching captures
	dataDir   string         // Config.DataDir: the captures folders of projects not open here
	scans     scans          // what the capture files hold, read once (capturefiles.go)
	retention retention      // the disk budget of capture files (retention.go)
}

type hostCapture struct {
	spec  proto.CaptureSpec // defaults filled in, as asked: a repeated request is recognised by it
	name  string            // the file's name: spec's, or name-N when spec's was taken (uniqueName)
	root  *os.Root          // the captures folder holding the files and their .writing marks
	dir   *os.File          // the same folder, opened for its syncs (projectCaptures.folder)
	owner *projectCaptures  // whose mu guards done
	tap   *captureTap       // nil until the files exist; set under projectCaptures.mu
	ready chan struct{}     // closed when tap is set, or the start failed
	done  bool              // guarded by projectCaptures.mu: stopped (asked, by itself, or the start failed)
	// closed is closed once the capture's files are closed: its name may
	// be used again.
	closed chan struct{}
	// rotations counts the capture.rotated events (Captures.captureRotated);
	// two files may begin between two of them: Metrics counts files.
	rotations atomic.Uint64
}

// captureTap is what the relay writes a capturing link's frames to: the
// capture filter, then the files.
type captureTap struct {
	ring     *captures.Ring
	filter   *bpf.VM // nil: every frame is written
	filtered atomic.Uint64
	keep     sync.Pool // of *[][]byte, for the frames a batch keeps
}

func (t *captureTap) WritePackets(dir bridge.Direction, frames [][]byte) {
	if t.filter == nil {
		t.ring.WritePackets(captures.Direction(dir), frames)
		return
	}
	kp, _ := t.keep.Get().(*[][]byte)
	if kp == nil {
		kp = new([][]byte)
	}
	keep := (*kp)[:0]
	for _, f := range frames {
		if n, err := t.filter.Run(f); err == nil && n != 0 {
			keep = append(keep, f)
		}
	}
	if d := len(frames) - len(keep); d > 0 {
		t.filtered.Add(uint64(d))
	}
	if len(keep) > 0 {
		t.ring.WritePackets(captures.Direction(dir), keep)
	}
	clear(keep)
	*kp = keep[:0]
	t.keep.Put(kp)
}

// compileCaptureFilter compiles a capture filter for the capture's data
// link type, with link filters' budget (Config.FilterDeadline,
// pcapfilter.MaxInstructions, in a killable child, programs cached): an
// expression libpcap refuses is an invalid request with libpcap's message,
// one over the budget "Capture filter: too complex".
func (f *Filters) compileCaptureFilter(spec proto.CaptureSpec) (*bpf.VM, error) {
	if spec.Filter == "" {
		return nil, nil
	}
	lt, err := captures.LinkType(spec.DataLinkType)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	progs, err := f.cache.compile(f.ctx, lt, spec.DataLinkType, []string{spec.Filter}, f.deadline)
	if errors.Is(err, pcapfilter.ErrTooComplex) {
		f.log.Warn("capture filter over budget", "err", err)
		return nil, proto.Errorf(proto.CodeInvalid, "Capture filter: too complex")
	}
	if err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "capture_filter: %v", err)
	}
	vm, err := bridge.NewMatcher(progs[0])
	if err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "capture_filter %q: %v", spec.Filter, err)
	}
	return vm, nil
}

// Start starts writing the frames a link forwards (those the
// capture filter matches, when there is one) to files in the project's
// captures folder, as pcap or, with Format "pcapng", as pcapng with one
// interface per direction, each named after the endpoint that sends its
// frames; the limits of the spec end files (capspec.Spec). Asking again for
// the running capture returns it unchanged; asking for another one while it
// runs is a conflict. The spec is checked here: the agent's trust boundary.
func (o *Captures) Start(projectID, linkID string, spec proto.CaptureSpec) (proto.CaptureState, error) {
	spec = spec.WithDefaults()
	if err := spec.Check(true); err != nil {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	lt, err := captures.LinkType(spec.DataLinkType)
	if err != nil {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	// Compiling may take a while: not under the lock.
	filter, err := o.filters.compileCaptureFilter(spec)
	if err != nil {
		return proto.CaptureState{}, err
	}
	if err := o.admit(projectID, spec.ProjectBudget); err != nil {
		return proto.CaptureState{}, err
	}
	p, l, c, err := o.claimCapture(projectID, linkID, spec)
	if err != nil || c == nil {
		return proto.CaptureState{}, err
	}
	if c.tap != nil { // the same capture, running already
		return o.captureStateOf(c), nil
	}
	ring, err := captures.CreateRing(c.root, c.name, captures.Options{
		Format:     spec.Format,
		LinkType:   lt,
		Interfaces: [2]string{endName(l.spec.A, "A"), endName(l.spec.B, "B")},
		BufferedIO: o.buffered,
		Pool:       o.pool,
		Sync:       o.hooks.sync,
		Dir:        c.dir,
	}, captures.Limits{
		MaxBytes:    spec.MaxBytes,
		MaxDuration: time.Duration(spec.MaxSeconds) * time.Second,
		MaxPackets:  uint64(spec.MaxPackets),
		Files:       spec.RingFiles,
	}, captures.RingHooks{
		Creating: func(name string) {
			if o.hooks.creating != nil {
				o.hooks.creating(name)
			}
		},
		// The file is marked once made, off the start's way: the start
		// answers once the file and its header are durable, and the ring
		// writes none of its records before the mark is durable too, so a
		// crash leaves either a header alone or a marked file.
		Created: func(name string, release func()) {
			go func() {
				defer release()
				writeMeta(c.root, name, fileMeta{LinkID: linkID})
				o.markWriting(c.root, c.dir, name)
			}()
		},
		Counted: func(name string, dropped uint64) {
			if dropped > 0 {
				writeMeta(c.root, name, fileMeta{LinkID: linkID, Dropped: dropped})
			}
		},
		Closed: func(name string) {
			unmarkWriting(c.root, name)
			if _, err := c.root.Lstat(name); errors.Is(err, fs.ErrNotExist) {
				_ = c.root.Remove(metaName(name)) // a spare file never begun
			}
		},
		Removed: func(name string) {
			unmarkWriting(c.root, name)
			_ = c.root.Remove(metaName(name))
		},
		Began: func(name string) {
			if o.hooks.began != nil {
				o.hooks.began()
			}
			// The ring's goroutine runs from its first file on: a file can
			// begin (capture_max_seconds) before Start has set c.tap.
			<-c.ready
			if c.tap == nil {
				return // the start failed
			}
			o.captureRotated(projectID, l, c, name)
			st := o.captureStateOf(c)
			o.events.publish(proto.Event{Kind: proto.EventCaptureRotated, ProjectID: projectID, LinkID: linkID, Capture: &st})
		},
	})
	if err == nil && o.hooks.ringMade != nil {
		o.hooks.ringMade()
	}
	p.caps.mu.Lock()
	if err != nil {
		c.done = true
		if p.caps.byLink[linkID] == c {
			delete(p.caps.byLink, linkID)
		}
		if p.caps.closing[c.name] == c {
			delete(p.caps.closing, c.name)
		}
		p.caps.mu.Unlock()
		close(c.ready)
		close(c.closed)
		if errors.Is(err, fs.ErrExist) { // made since uniqueName looked: never overwritten
			return proto.CaptureState{}, proto.Errorf(proto.CodeConflict, "%v", err)
		}
		// The disk failed (full, read-only, an I/O error): the file, if
		// made, is removed, and nothing runs.
		return proto.CaptureState{}, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	c.tap = &captureTap{ring: ring, filter: filter}
	stopped := c.done // stopped while its files were being made
	if !stopped {
		l.relay.SetTap(c.tap)
	}
	p.caps.mu.Unlock()
	close(c.ready)
	o.wg.Go(func() { o.watchCapture(projectID, p, l, c) })
	if stopped {
		o.closeCapture(p, c)
		return proto.CaptureState{}, proto.Errorf(proto.CodeConflict, "the capture was stopped while it started")
	}
	name, path := ring.Current()
	o.log.Info("capture started", "project", projectID, "link", linkID, "file", path, "name", name,
		"format", spec.Format, "filter", spec.Filter, "max_bytes", spec.MaxBytes, "max_seconds", spec.MaxSeconds, "max_packets", spec.MaxPackets, "ring_files", spec.RingFiles)
	return o.captureStateOf(c), nil
}

// claimCapture makes c the link's capture, its files yet to be made, once
// no capture of the same file name is being closed (it waits for that
// close). It returns the running capture instead when it has spec, and a
// conflict when another runs on the link or writes files of that name. A
// file of an earlier capture is never overwritten: c takes the first free
// name-N.ext (uniqueName), and holds it in the project's closing names
// until its files are closed. The captures folder is read under the
// project's nameMu only, which no other call than a capture start waits
// for.
func (o *Captures) claimCapture(projectID, linkID string, spec proto.CaptureSpec) (*project, *hostLink, *hostCapture, error) {
	for {
		p, l, err := o.projects.lockLink(projectID, linkID)
		if err != nil {
			return nil, nil, nil, err
		}
		p.caps.mu.Lock()
		c := p.caps.byLink[linkID]
		running := c != nil && !c.done
		busy, isBusy := p.caps.closing[spec.FileName]
		busyRunning := isBusy && !busy.done
		p.caps.mu.Unlock()
		p.mu.Unlock()
		if running {
			if c.spec != spec {
				return nil, nil, nil, proto.Errorf(proto.CodeConflict, "Packet capture is already active on this link")
			}
			<-c.ready
			if c.tap == nil {
				return nil, nil, nil, proto.Errorf(proto.CodeConflict, "the capture failed to start")
			}
			return p, l, c, nil
		}
		if isBusy {
			if busyRunning {
				return nil, nil, nil, proto.Errorf(proto.CodeConflict, "capture file name %s is in use by another capture", spec.FileName)
			}
			if o.hooks.nameBusy != nil {
				o.hooks.nameBusy()
			}
			<-busy.closed // the files of that name are being closed
			continue
		}
		c, retry, err := o.nameCapture(p, l, spec)
		if err != nil || !retry {
			return p, l, c, err
		}
	}
}

// nameCapture names a new capture of link l and claims the name and the
// link for it, unless the link or the names changed while the folder was
// read: then it asks for a retry.
func (o *Captures) nameCapture(p *project, l *hostLink, spec proto.CaptureSpec) (c *hostCapture, retry bool, err error) {
	p.caps.nameMu.Lock()
	defer p.caps.nameMu.Unlock()
	if o.hooks.naming != nil {
		o.hooks.naming()
	}
	root, err := p.caps.rootLocked()
	if err != nil {
		return nil, false, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	// The names held now: none is added while nameMu is held, and one
	// let go of has its files on disk.
	p.caps.mu.Lock()
	busy := maps.Clone(p.caps.closing)
	p.caps.mu.Unlock()
	name, err := uniqueName(root, busy, spec.FileName, spec.RingFiles > 1)
	if err != nil {
		return nil, false, err
	}
	linkID := l.spec.LinkID
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, notOpen(p.id)
	}
	if p.links[linkID] != l {
		return nil, false, proto.Errorf(proto.CodeNotFound, "link %s does not exist on this agent", linkID)
	}
	p.caps.mu.Lock()
	defer p.caps.mu.Unlock()
	if cur := p.caps.byLink[linkID]; cur != nil && !cur.done {
		return nil, true, nil // another start won the link
	}
	if _, ok := p.caps.closing[spec.FileName]; ok {
		return nil, true, nil // the asked name was taken meanwhile
	}
	c = &hostCapture{spec: spec, name: name, root: root, dir: p.caps.folder, owner: &p.caps, ready: make(chan struct{}), closed: make(chan struct{})}
	p.caps.byLink[linkID] = c
	p.caps.closing[name] = c // the name is taken until the files are closed
	return c, false, nil
}

// uniqueName is name if no capture's file has it, else the first of
// "stem-2.ext", "stem-3.ext", ... that is free. A name is free when no file
// of the captures folder and no capture holding names (by the name it was
// given, in busy) has it, and when neither it nor, for a ring, its files
// (capspec.RingName) can be one of another ring's files, or the other way
// round. The project's nameMu must be held, and busy read under it: no
// other capture claims a name meanwhile, and every file made since the
// folder was read is a busy capture's.
func uniqueName(root *os.Root, busy map[string]*hostCapture, name string, ring bool) (string, error) {
	readFolder := func() ([]string, error) {
		d, err := root.Open(".")
		if err != nil {
			return nil, proto.Errorf(proto.CodeInternal, "captures folder: %v", err)
		}
		defer d.Close()
		names, err := d.Readdirnames(-1)
		if err != nil {
			return nil, proto.Errorf(proto.CodeInternal, "captures folder: %v", err)
		}
		return names, nil
	}
	var files []string // the folder's names, read only for a ring
	if ring {
		var err error
		if files, err = readFolder(); err != nil {
			return "", err
		}
	}
	// Only rings' names reach past themselves: the other busy names are
	// looked up, not walked, for each candidate (a lab runs hundreds).
	var busyRings []string
	for b, c := range busy {
		if c.spec.RingFiles > 1 {
			busyRings = append(busyRings, b)
		}
	}
	// present holds the folder's names once a first candidate was taken:
	// a link's capture started again and again is given name-2, name-3...,
	// and one read of the folder answers for all of them where a stat
	// each would not.
	var present map[string]bool
	taken := func(candidate string) (bool, error) {
		if _, ok := busy[candidate]; ok {
			return true, nil
		}
		for _, b := range busyRings {
			if capspec.IsRingName(candidate, b) {
				return true, nil
			}
		}
		if ring {
			for b := range busy {
				if capspec.IsRingName(b, candidate) {
					return true, nil
				}
			}
		}
		for _, f := range files {
			if capspec.IsRingName(f, candidate) {
				return true, nil
			}
		}
		if present != nil {
			return present[candidate], nil
		}
		_, err := root.Lstat(candidate)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return true, proto.Errorf(proto.CodeInternal, "capture file %s: %v", candidate, err)
		}
		return true, nil
	}
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= 10000; i++ {
		candidate := name
		if i > 1 {
			suffix := fmt.Sprintf("-%d", i)
			candidate = stem[:min(len(stem), capspec.MaxFileName-len(ext)-len(suffix)-ringSuffix(ring))] + suffix + ext
		}
		switch t, err := taken(candidate); {
		case err != nil:
			return "", err
		case !t:
			return candidate, nil
		}
		if present == nil {
			names := files
			if names == nil {
				var err error
				if names, err = readFolder(); err != nil {
					return "", err
				}
			}
			present = make(map[string]bool, len(names))
			for _, f := range names {
				present[f] = true
			}
		}
	}
	return "", proto.Errorf(proto.CodeConflict, "capture file name %s: 10,000 files of that name exist", name)
}

// ringSuffix is the room a ring's numbers take in its files' names.
func ringSuffix(ring bool) int {
	if ring {
		return 1 + capspec.RingDigits
	}
	return 0
}

// endName names the sender of one direction in a pcapng capture.
func endName(ep proto.Endpoint, def string) string {
	switch {
	case ep.Name != "":
		return ep.Name
	case ep.Tunnel != nil:
		return fmt.Sprintf("%s (tunnel from %s:%d)", def, ep.Tunnel.RemoteHost, ep.Tunnel.RemotePort)
	default:
		return fmt.Sprintf("%s (node %s port %d/%d)", def, ep.NodeID, ep.Adapter, ep.Port)
	}
}

// watchCapture notices a capture that ends by itself (a failed write, or a
// limit without a ring), detaches it from the relay and tells the
// controller.
func (o *Captures) watchCapture(projectID string, p *project, l *hostLink, c *hostCapture) {
	ring := c.tap.ring
	<-ring.Done()
	p.caps.mu.Lock()
	if c.done {
		p.caps.mu.Unlock()
		return // stopped on request
	}
	c.done = true
	if p.caps.byLink[l.spec.LinkID] == c {
		l.relay.SetTap(nil)
	}
	p.caps.mu.Unlock()
	o.closeCapture(p, c)
	st := o.captureStateOf(c)
	if err := ring.Err(); err != nil {
		o.log.Error("capture ended by itself", "project", projectID, "link", l.spec.LinkID, "err", err)
		// The writer cuts a failed write back off; should that cut have
		// failed too, Repair does it now that nothing writes. If the
		// project closed meanwhile, the mark stays and the next open
		// repairs the file.
		name, _ := ring.Current()
		switch cut, err := captures.Repair(c.root, name); {
		case err != nil:
			o.log.Warn("repair a capture that ended by itself", "file", name, "err", err)
		default:
			if cut > 0 {
				o.log.Warn("capture repaired after it ended", "file", name, "bytes_cut", cut)
			}
			unmarkWriting(c.root, name)
		}
	} else {
		o.log.Info("capture ended at its limit", "project", projectID, "link", l.spec.LinkID, "why", st.Limit)
	}
	o.events.publish(proto.Event{Kind: proto.EventCaptureEnded, ProjectID: projectID, LinkID: l.spec.LinkID, Capture: &st})
}

// Stop stops a link's capture and returns its final state, once
// every frame the link forwarded before the stop is in the file. Stopping a
// link that is not capturing succeeds. Only this call waits for the files
// to be closed: the agent's other calls go on meanwhile.
func (o *Captures) Stop(projectID, linkID string) (proto.CaptureState, error) {
	p, l, err := o.projects.lockLink(projectID, linkID)
	if err != nil {
		return proto.CaptureState{}, err
	}
	c := o.detachCapture(p, l)
	p.caps.mu.Lock()
	last := p.caps.byLink[linkID]
	p.caps.mu.Unlock()
	p.mu.Unlock()
	if c != nil {
		o.closeCapture(p, c)
	}
	if last == nil {
		return proto.CaptureState{}, nil
	}
	if last.tap == nil { // a start that failed, or is under way
		return proto.CaptureState{FileName: last.name, Spec: last.spec}, nil
	}
	<-last.closed
	return o.captureStateOf(last), nil
}

// detachCapture stops giving a link's frames to its capture and returns
// the capture, whose files the caller closes with closeCapture after
// releasing p.mu; nil when the link is not capturing. p.mu must be held.
func (o *Captures) detachCapture(p *project, l *hostLink) *hostCapture {
	p.caps.mu.Lock()
	defer p.caps.mu.Unlock()
	c := p.caps.byLink[l.spec.LinkID]
	if c == nil || c.done {
		return nil
	}
	l.relay.SetTap(nil)
	c.done = true
	return c
}

// closeCapture closes a detached capture's files, writing every frame
// queued so far (later ones are ignored), then frees its file name. No
// lock may be held: this is the disk's time.
func (o *Captures) closeCapture(p *project, c *hostCapture) {
	<-c.ready
	if c.tap == nil {
		return // its start failed, and freed the name
	}
	if o.hooks.closing != nil {
		o.hooks.closing()
	}
	select {
	case <-c.closed:
		return // closed already (by whoever got here first)
	default:
	}
	if err := c.tap.ring.Close(); err != nil {
		o.log.Warn("capture ended badly", "file", c.name, "err", err)
	}
	p.caps.mu.Lock()
	if p.caps.closing[c.name] == c {
		delete(p.caps.closing, c.name)
	}
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	p.caps.mu.Unlock()
	frames, _, dropped, files := c.tap.ring.Stats()
	o.log.Info("capture stopped", "file", c.name, "frames", frames, "dropped", dropped,
		"filtered", c.tap.filtered.Load(), "files", files)
}

// State returns a link's capture state.
func (o *Captures) State(projectID, linkID string) (proto.CaptureState, error) {
	c, err := o.linkCapture(projectID, linkID)
	if err != nil || c == nil {
		return proto.CaptureState{}, err
	}
	return o.captureStateOf(c), nil
}

// File returns a link's running capture, for streaming.
func (o *Captures) File(projectID, linkID string) (*captures.Ring, error) {
	c, err := o.linkCapture(projectID, linkID)
	if err != nil {
		return nil, err
	}
	if c == nil || o.captureDone(c) {
		return nil, proto.Errorf(proto.CodeConflict, "Nothing to stream because there is no packet capture active")
	}
	<-c.ready
	if c.tap == nil {
		return nil, proto.Errorf(proto.CodeConflict, "Nothing to stream because there is no packet capture active")
	}
	return c.tap.ring, nil
}

// linkCapture returns a link's running or last capture, nil if none.
func (o *Captures) linkCapture(projectID, linkID string) (*hostCapture, error) {
	p, _, err := o.projects.lockLink(projectID, linkID)
	if err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	p.caps.mu.Lock()
	defer p.caps.mu.Unlock()
	return p.caps.byLink[linkID], nil
}

// captureDone reports whether a capture has stopped.
func (o *Captures) captureDone(c *hostCapture) bool {
	c.owner.mu.Lock()
	defer c.owner.mu.Unlock()
	return c.done
}

// captureStateOf returns what a capture reports. No lock may be held.
func (o *Captures) captureStateOf(c *hostCapture) proto.CaptureState {
	return stateOf(c, !o.captureDone(c))
}

// stateOf returns what a capture reports, its files made.
func stateOf(c *hostCapture, active bool) proto.CaptureState {
	ring := c.tap.ring
	frames, size, dropped, files := ring.Stats()
	name, path := ring.Current()
	st := capspec.State{
		Active:   active,
		FilePath: path,
		FileName: name,
		Spec:     c.spec,
		Frames:   frames,
		Bytes:    uint64(size),
		Dropped:  dropped,
		Filtered: c.tap.filtered.Load(),
		Files:    files,
		Limit:    ring.Limit(),
	}
	if err := ring.Err(); err != nil {
		st.Err = err.Error()
	}
	return st
}
