package archive

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ExportOptions are GNS3's export query parameters, and what the caller
// resolved for them.
type ExportOptions struct {
	IncludeImages    bool // the client asked for images/ (see Images)
	IncludeSnapshots bool // add snapshots/
	ResetMACs        bool // null every node's mac_addr / mac_address
	KeepComputeIDs   bool // keep compute ids, topology.computes and image paths
	Compression      Compression
	// Images are added under images/ (include_images). The caller finds
	// them inside its image directories only: an image path a client set
	// is never read as is (GNS3 bug 3.1.3).
	Images []Image
	// Files are added under their names (slash-separated, relative to
	// the project directory), in place of the directory's files of those
	// names: files kept elsewhere, such as node files read from their
	// computes.
	Files map[string][]byte
	// Warn is told, in words, of each file left out (a link, a special
	// file, a file that cannot be read); nil drops them.
	Warn func(msg string)
	// Now dates project.gns3; zero is the time of the call.
	Now time.Time
}

// Image is an image file to add to an export.
type Image struct {
	Name string // in the archive under images/, e.g. "QEMU/disk.qcow2"
	Path string // on this host
}

// minZipTime is the earliest time a zip's DOS date holds.
var minZipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Export writes the project in dir, whose project file holds projectFile,
// to w as a .gns3project, in GNS3 2.2's layout: images/ first
// (if any), then project.gns3, then the project directory's files in path
// order. Left out: every *.gns3 of the directory (project.gns3 replaces the
// project's own), snapshots/ unless asked, project-files/captures and
// project-files/tmp, *.log, *_log.txt, .DS_Store, links and special files.
// Entries are streamed with data descriptors (ZIP64 when large) as the
// files are read: only the project file is ever held whole in memory.
// dir must not change meanwhile (the caller holds the project). An
// error after the first byte leaves w with a truncated zip.
func Export(w io.Writer, dir string, projectFile []byte, opts ExportOptions) error {
	warn := opts.Warn
	if warn == nil {
		warn = func(string) {}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	pf, err := ExportProjectFile(projectFile, opts)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	registerCompressors(zw)
	method := uint16(opts.Compression)
	for _, img := range opts.Images {
		if err := checkName("images/" + img.Name); err != nil {
			warn(fmt.Sprintf("Could not export image %s: %v", img.Name, err))
			continue
		}
		if err := addFile(zw, "images/"+img.Name, img.Path, method); err != nil {
			if isEntryWritten(err) {
				return err
			}
			warn(fmt.Sprintf("Could not export image %s: %v", img.Name, err))
		}
	}
	h := fileHeader(ProjectFile, method, now, 0o600)
	fw, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := fw.Write(pf); err != nil {
		return err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if err != nil {
			warn(fmt.Sprintf("Could not export file %s: %v", rel, unwrapPath(err)))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if _, given := opts.Files[rel]; given && !d.IsDir() {
			return nil
		}
		if excluded(rel, d.IsDir(), opts.IncludeSnapshots) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			entries, err := os.ReadDir(p)
			if err != nil {
				warn(fmt.Sprintf("Could not export directory %s: %v", rel, unwrapPath(err)))
				return fs.SkipDir
			}
			if len(entries) == 0 {
				info, err := d.Info()
				if err != nil {
					return nil
				}
				h := &zip.FileHeader{Name: rel + "/", Method: zip.Store, Modified: zipTime(info.ModTime())}
				h.SetMode(fs.ModeDir | 0o755)
				_, err = zw.CreateHeader(h)
				return err
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			warn(fmt.Sprintf("Could not export file %s: a symbolic link is never exported", rel))
			return nil
		case !d.Type().IsRegular():
			warn(fmt.Sprintf("Could not export file %s: not a regular file", rel))
			return nil
		}
		if err := addFile(zw, rel, p, method); err != nil {
			if isEntryWritten(err) {
				return err
			}
			warn(fmt.Sprintf("Could not export file %s: %v", rel, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Files)) {
		if err := checkName(name); err != nil || excluded(name, false, opts.IncludeSnapshots) {
			warn(fmt.Sprintf("Could not export file %s: not a project file name", name))
			continue
		}
		fw, err := zw.CreateHeader(fileHeader(name, method, now, 0o644))
		if err != nil {
			return err
		}
		if _, err := fw.Write(opts.Files[name]); err != nil {
			return err
		}
	}
	return zw.Close()
}

// excluded says whether a project directory entry stays out of exports.
func excluded(rel string, isDir bool, snapshots bool) bool {
	base := path.Base(rel)
	switch {
	case rel == "snapshots":
		return !snapshots
	case rel == "project-files/captures", rel == "project-files/tmp":
		return true
	case isDir:
		return false
	case !strings.Contains(rel, "/") && (strings.HasSuffix(rel, ".gns3") || strings.HasSuffix(rel, ".gns3.journal") ||
		strings.Contains(rel, ".gns3.") && strings.HasSuffix(rel, ".tmp")):
		return true // project files (one project.gns3 replaces them), their journals (folded into them first), and temp files of their atomic writes
	case strings.HasSuffix(base, ".log"), strings.HasSuffix(base, "_log.txt"), base == ".DS_Store":
		return true
	}
	return false
}

// entryWritten marks a failure once an entry's header went out: the zip
// cannot skip the file any more.
type entryWritten struct{ err error }

func (e entryWritten) Error() string { return e.err.Error() }
func (e entryWritten) Unwrap() error { return e.err }

func isEntryWritten(err error) bool {
	_, ok := err.(entryWritten)
	return ok
}

// addFile streams one regular file into the zip. It opens the file without
// following a link (one may replace the file after the walk saw it).
func addFile(zw *zip.Writer, name, p string, method uint16) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return unwrapPath(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return unwrapPath(err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	h := fileHeader(name, method, info.ModTime(), info.Mode().Perm())
	fw, err := zw.CreateHeader(h)
	if err != nil {
		return entryWritten{err}
	}
	if _, err := io.Copy(fw, f); err != nil {
		return entryWritten{fmt.Errorf("export %s: %w", name, unwrapPath(err))}
	}
	return nil
}

// unwrapPath drops the server path from an os error (API messages name no
// server path).
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// fileHeader describes a regular file's entry.
func fileHeader(name string, method uint16, mtime time.Time, perm fs.FileMode) *zip.FileHeader {
	h := &zip.FileHeader{Name: name, Method: method, Modified: zipTime(mtime)}
	if method == uint16(LZMA) {
		h.Flags |= lzmaEOSFlag
	}
	h.SetMode(perm)
	return h
}

func zipTime(t time.Time) time.Time {
	if t.Before(minZipTime) {
		return minZipTime
	}
	return t.UTC()
}

// ExportProjectFile rewrites a .gns3 file's content into project.gns3 as
// GNS3 2.2 exports it: unless KeepComputeIDs, every node's compute_id is
// "local", topology.computes is empty and image properties (names ending
// in "image", IOU's "path"; not Docker's image) keep their base name; with
// ResetMACs every mac_addr / mac_address is null. Everything else, members
// labtap does not model included, is kept. JSON indented by 4, keys sorted.
func ExportProjectFile(data []byte, opts ExportOptions) ([]byte, error) {
	doc, err := decodeProject(data)
	if err != nil {
		return nil, err
	}
	topo, _ := doc["topology"].(map[string]any)
	if topo != nil {
		if !opts.KeepComputeIDs {
			topo["computes"] = []any{}
		}
		for _, n := range objects(topo["nodes"]) {
			if !opts.KeepComputeIDs {
				n["compute_id"] = "local"
			}
			props, _ := n["properties"].(map[string]any)
			if props == nil {
				continue
			}
			nodeType, _ := n["node_type"].(string)
			for k, v := range props {
				s, ok := v.(string)
				switch {
				case opts.ResetMACs && (k == "mac_addr" || k == "mac_address"):
					props[k] = nil
				case !opts.KeepComputeIDs && ok && s != "" && nodeType != "docker" &&
					(strings.HasSuffix(k, "image") || nodeType == "iou" && k == "path"):
					props[k] = baseName(s)
				}
			}
		}
	}
	return encodeProject(doc)
}

// baseName is the last element of a path written on any system.
func baseName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		return s[i+1:]
	}
	return s
}

// decodeProject reads a project file as JSON, numbers kept as written.
func decodeProject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, refuse("Cannot import project, the project.gns3 file is corrupted")
	}
	return doc, nil
}

// encodeProject writes a project file as GNS3 does: indent 4, sorted keys,
// "<" and ">" as they are.
func encodeProject(doc map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// objects returns the JSON objects of an array, skipping anything else.
func objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
