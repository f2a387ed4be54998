package host

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/proto"
)

// The files of a project's captures folder, running or stopped: listed,
// sent and deleted by name. A name comes from the client and reaches the
// file system only once it passes capspec.ValidFileName and ends in a
// capture's extension, and only through the folder's os.Root.
//
// Each capture file has a note beside it, hidden (metaName): the link
// whose capture wrote it, and the frames it could not hold (a pcap file has
// no place to say so). A file without one lists with no link. Notes stay
// with the captures folder, which exports leave out and restores keep.

// metaName names a capture file's note.
func metaName(name string) string { return "." + name + ".meta" }

// maxMeta bounds a note read back.
const maxMeta = 4 << 10

// fileMeta is a capture file's note.
type fileMeta struct {
	LinkID  string `json:"link_id"`
	Dropped uint64 `json:"dropped,omitempty"`
}

// writeMeta writes a capture file's note. It is not synced: a note lost
// in a crash costs the file its link in the list, nothing else.
func writeMeta(root *os.Root, name string, m fileMeta) {
	b, _ := json.Marshal(m)
	_ = root.WriteFile(metaName(name), b, 0o644)
}

// readMeta reads a capture file's note; the zero note if there is none.
func readMeta(root *os.Root, name string) fileMeta {
	var m fileMeta
	f, err := root.Open(metaName(name))
	if err != nil {
		return m
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMeta))
	if err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// scans keeps a Scanner per capture file, so that a file is read once
// however often it is listed (a running one, from where the last list
// stopped).
type scans struct {
	mu    sync.Mutex // guards files
	files map[string]*fileScan
}

// maxScans bounds the Scanners kept: past it, they are forgotten and the
// next lists read their files again.
const maxScans = 4096

type fileScan struct {
	mu   sync.Mutex // held while scanning
	fi   os.FileInfo
	scan captures.Scanner
}

// of returns the Scanner of a file at path, the file being fi now: a new
// one when the file is not the one scanned before.
func (s *scans) of(path string, fi os.FileInfo) *fileScan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil || len(s.files) >= maxScans {
		s.files = map[string]*fileScan{}
	}
	e := s.files[path]
	if e == nil || !os.SameFile(e.fi, fi) || fi.Size() < e.fi.Size() {
		e = &fileScan{fi: fi}
		s.files[path] = e
	}
	return e
}

func (s *scans) forget(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
}

// info reads what a capture file holds, going on from the last read, up
// to limit bytes when limit >= 0 (a running capture's file: what is
// surely on disk).
func (s *scans) info(root *os.Root, name string, limit int64) (captures.Info, os.FileInfo, error) {
	f, err := root.Open(name)
	if err != nil {
		return captures.Info{}, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return captures.Info{}, nil, err
	}
	e := s.of(filepath.Join(root.Name(), name), fi)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fi = fi
	size := fi.Size()
	if limit >= 0 {
		size = min(size, limit)
	}
	info, err := e.scan.Scan(f, size)
	return info, fi, err
}

// capturesFolder is a project's captures folder as the file routes see
// it: its root (nil when the folder does not exist) and the captures that
// hold names in it now, by file name, and their links.
type capturesFolder struct {
	root    *os.Root
	p       *project                // nil when the project is not open here
	running map[string]*hostCapture // by the name it was given
	links   map[*hostCapture]string
}

func (f *capturesFolder) close() {
	if f.root != nil {
		f.root.Close()
	}
}

// folder opens a project's captures folder, whether the project is open
// on the agent or not (its files stay when it closes). A project being
// closed is waited for: its captures are closing.
func (o *Captures) folder(projectID string) (*capturesFolder, error) {
	if err := checkID("project", projectID); err != nil {
		return nil, err
	}
	t := o.projects
	t.mu.Lock()
	p, open := t.open[projectID]
	old, closing := t.closing[projectID]
	t.mu.Unlock()
	if closing && !open {
		<-old.gone
	}
	out := &capturesFolder{running: map[string]*hostCapture{}, links: map[*hostCapture]string{}}
	dir := filepath.Join(o.dataDir, "projects", projectID, "project-files", "captures")
	if open {
		<-p.opened
		out.p, dir = p, p.caps.dir
		p.caps.mu.Lock()
		for name, c := range p.caps.closing {
			out.running[name] = c
		}
		for id, c := range p.caps.byLink {
			out.links[c] = id
		}
		p.caps.mu.Unlock()
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "captures folder: %v", err)
	}
	out.root = root
	return out, nil
}

// writer returns the capture that writes file name (its name, or one of
// its ring's files), nil if none.
func (f *capturesFolder) writer(name string) *hostCapture {
	if c, ok := f.running[name]; ok {
		return c
	}
	for base, c := range f.running {
		if c.spec.Ring() && capspec.IsRingName(name, base) {
			return c
		}
	}
	return nil
}

// isCaptureFile reports whether name may name a capture file: the file
// name rule, and a capture's extension.
func isCaptureFile(name string) bool {
	return capspec.ValidFileName(name) && capspec.CaptureExt(name)
}

// Files lists the capture files of a project's captures folder, oldest
// first: running, stopped and ring files, each with its link, size,
// records, first and last time and dropped frames.
func (o *Captures) Files(projectID string) ([]proto.CaptureFileInfo, error) {
	f, err := o.folder(projectID)
	if err != nil {
		return nil, err
	}
	defer f.close()
	out := []proto.CaptureFileInfo{}
	if f.root == nil {
		return out, nil
	}
	entries, err := os.ReadDir(f.root.Name())
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "captures folder: %v", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !isCaptureFile(name) {
			continue
		}
		fi, ok := o.fileInfo(f, name)
		if ok {
			out = append(out, fi)
		}
	}
	slices.SortStableFunc(out, func(a, b proto.CaptureFileInfo) int { return a.Modified.Compare(b.Modified) })
	return out, nil
}

// written returns how much of file name is surely on disk when a running
// capture is writing it, -1 otherwise.
func (o *Captures) written(f *capturesFolder, name string) int64 {
	c := f.writer(name)
	if c == nil || c.tap == nil || o.captureDone(c) {
		return -1
	}
	cur, size := c.tap.ring.Written()
	if cur != name {
		return -1 // a ring's file that ended: whole
	}
	return size
}

// fileInfo describes one capture file; false when it is gone meanwhile.
func (o *Captures) fileInfo(f *capturesFolder, name string) (proto.CaptureFileInfo, bool) {
	info, st, err := o.scans.info(f.root, name, o.written(f, name))
	if st == nil {
		return proto.CaptureFileInfo{}, false
	}
	if err != nil {
		o.log.Debug("capture file read", "file", name, "err", err)
	}
	out := proto.CaptureFileInfo{
		FileName: name, Format: info.Format, Size: st.Size(), Records: info.Records,
		Dropped: info.Dropped, Modified: st.ModTime().UTC(),
	}
	if out.Format == "" {
		out.Format = capspec.FormatPcap
		if filepath.Ext(name) == ".pcapng" {
			out.Format = capspec.FormatPcapng
		}
	}
	if info.Records > 0 {
		first, last := info.First.UTC(), info.Last.UTC()
		out.FirstTime, out.LastTime = &first, &last
	}
	meta := readMeta(f.root, name)
	out.LinkID = meta.LinkID
	if out.Dropped == 0 {
		out.Dropped = meta.Dropped
	}
	if c := f.writer(name); c != nil {
		out.Running = true
		if id := f.links[c]; id != "" {
			out.LinkID = id
		}
		if c.tap != nil && !o.captureDone(c) {
			_, _, dropped, _ := c.tap.ring.Stats()
			out.Dropped = dropped
		}
	}
	return out, true
}

// OpenFile opens a capture file of a project to send it: up to its last
// whole record, for the file a running capture writes (as it is now) as
// for a stopped one (which a crash may have left cut inside a record).
// It returns size bytes of whole records to send from body, which the
// caller closes.
func (o *Captures) OpenFile(projectID, name string) (size int64, body io.ReadCloser, err error) {
	if !isCaptureFile(name) {
		return 0, nil, proto.Errorf(proto.CodeInvalid, "capture file name %q is not a plain file name ending in .pcap or .pcapng", name)
	}
	f, err := o.folder(projectID)
	if err != nil {
		return 0, nil, err
	}
	defer f.close()
	if f.root == nil {
		return 0, nil, noFile(projectID, name)
	}
	if c := f.writer(name); c != nil && c.tap != nil {
		if cur, _ := c.tap.ring.Current(); cur == name && !o.captureDone(c) {
			s, err := c.tap.ring.Snapshot()
			if err == nil && s.Name == name {
				return s.Size, s, nil
			}
			if err == nil {
				s.Close()
			}
		}
	}
	info, st, err := o.scans.info(f.root, name, o.written(f, name))
	if st == nil {
		return 0, nil, noFile(projectID, name)
	}
	if err != nil {
		o.log.Debug("capture file read", "file", name, "err", err)
	}
	rf, err := f.root.Open(name)
	if err != nil {
		return 0, nil, noFile(projectID, name)
	}
	return info.Whole, struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rf, info.Whole), rf}, nil
}

func noFile(projectID, name string) error {
	return proto.Errorf(proto.CodeNotFound, "project %s has no capture file %s on this agent", projectID, name)
}

// DeleteFile removes a stopped capture file of a project, with its note
// and mark; a file a running capture writes (or one of its ring's) is a
// conflict.
func (o *Captures) DeleteFile(projectID, name string) error {
	if !isCaptureFile(name) {
		return proto.Errorf(proto.CodeInvalid, "capture file name %q is not a plain file name ending in .pcap or .pcapng", name)
	}
	f, err := o.folder(projectID)
	if err != nil {
		return err
	}
	defer f.close()
	if f.p != nil {
		// No capture is named meanwhile: none takes the name being freed.
		f.p.caps.nameMu.Lock()
		defer f.p.caps.nameMu.Unlock()
		f.p.caps.mu.Lock()
		f.running = maps.Clone(f.p.caps.closing)
		f.p.caps.mu.Unlock()
	}
	if c := f.writer(name); c != nil {
		return proto.Errorf(proto.CodeConflict, "capture file %s is being written by the running capture of link %s: stop the capture first", name, f.links[c])
	}
	if f.root == nil {
		return noFile(projectID, name)
	}
	return o.removeFile(f.root, name, projectID)
}

// removeFile removes a stopped capture file, its note and its mark.
func (o *Captures) removeFile(root *os.Root, name, projectID string) error {
	if err := root.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return noFile(projectID, name)
		}
		return proto.Errorf(proto.CodeInternal, "remove capture file %s: %v", name, err)
	}
	_ = root.Remove(metaName(name))
	unmarkWriting(root, name)
	o.scans.forget(filepath.Join(root.Name(), name))
	return nil
}
