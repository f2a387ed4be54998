package project

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/labtap/labtap/controller/archive"
	"github.com/labtap/labtap/internal/confined"
)

// Images in portable projects (an export's include_images, an import):
// the QEMU images of the local compute's nodes go into an export as
// images/QEMU/<file>, GNS3 2.2's layout, and an import installs the
// archive's images/QEMU/ (or images/qemu/, as GNS3 writes a remote
// compute's) into the local images folder. Docker images are the Docker
// Engine's and never travel.

// qemuImagesSub is the QEMU folder inside ImagesDir (GNS3's name).
const qemuImagesSub = "QEMU"

// maxImageFile bounds one image an import installs.
const maxImageFile = 256 << 30

// imageProperties are the QEMU node properties naming an image.
func imageProperty(key string) bool {
	return strings.HasSuffix(key, "_image") || key == "image"
}

// exportImages lists the images the QEMU nodes of the local compute use
// that are in the local QEMU images folder (a name, or a path inside the
// folder; links may not lead out of it). Anything else is left out, with
// a warning.
func (s *Archives) exportImages(nodes []Node, warn func(string)) []archive.Image {
	if s.core.cfg.ImagesDir == "" {
		warn("include_images: this server has no images folder; the export holds no images")
		return nil
	}
	dir, err := filepath.Abs(filepath.Join(s.core.cfg.ImagesDir, qemuImagesSub))
	if err == nil {
		if real, rerr := filepath.EvalSymlinks(dir); rerr == nil {
			dir = real
		}
	}
	var out []archive.Image
	for _, n := range nodes {
		if n.Type != "qemu" {
			continue
		}
		keys := make([]string, 0, len(n.Properties))
		for k := range n.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, _ := n.Properties[k].(string)
			if !imageProperty(k) || v == "" {
				continue
			}
			if n.ComputeID != "local" {
				warn(fmt.Sprintf("Could not export image %s of node %s: it is on compute %s", path.Base(filepath.ToSlash(v)), n.Name, n.ComputeID))
				continue
			}
			p := v
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			real, err := filepath.EvalSymlinks(p)
			if err == nil {
				var rel string
				rel, err = filepath.Rel(dir, real)
				if err == nil && !filepath.IsLocal(rel) {
					err = errors.New("not in the images folder")
				}
			}
			if err == nil {
				var info os.FileInfo
				if info, err = os.Stat(real); err == nil && !info.Mode().IsRegular() {
					err = errors.New("not a regular file")
				}
			}
			if err != nil {
				warn(fmt.Sprintf("Could not export image %s of node %s: %s", path.Base(filepath.ToSlash(v)), n.Name, pathless(err)))
				continue
			}
			name := qemuImagesSub + "/" + filepath.Base(real)
			if !slices.ContainsFunc(out, func(i archive.Image) bool { return i.Name == name }) {
				out = append(out, archive.Image{Name: name, Path: real})
			}
		}
	}
	return out
}

// installImages puts an imported archive's QEMU images into the local
// images folder: only plain names directly under images/QEMU/ (or
// images/qemu/), each at most maxImageFile bytes (the archive's limits
// held already), written beside its name and renamed into place. An
// image already there with the same content is kept; one with other
// content is never overwritten: the archive's is left out, with a
// warning. Other images/ entries are not installed.
func (s *Archives) installImages(projectID string, zr *zip.Reader) {
	log := s.core.log.With("project", projectID)
	var entries []*zip.File
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "images/") && !strings.HasSuffix(f.Name, "/") {
			entries = append(entries, f)
		}
	}
	if len(entries) == 0 {
		return
	}
	if s.core.cfg.ImagesDir == "" {
		log.Warn("import: the archive's images are not installed: this server has no images folder")
		return
	}
	dir := filepath.Join(s.core.cfg.ImagesDir, qemuImagesSub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Warn("import: images not installed", "err", err)
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		log.Warn("import: images not installed", "err", err)
		return
	}
	defer root.Close()
	for _, f := range entries {
		sub, name, ok := strings.Cut(strings.TrimPrefix(f.Name, "images/"), "/")
		if !ok || !strings.EqualFold(sub, qemuImagesSub) || name == "" || strings.Contains(name, "/") || strings.HasPrefix(name, ".") ||
			!f.Mode().IsRegular() {
			log.Warn("import: image entry not installed", "entry", f.Name)
			continue
		}
		if f.UncompressedSize64 > maxImageFile {
			log.Warn("import: image too large, not installed", "entry", f.Name)
			continue
		}
		switch same, err := sameFile(root, name, f); {
		case err == nil && same:
			continue
		case err == nil:
			msg := fmt.Sprintf("Image %s was not installed: an image of that name with other content is there", name)
			log.Warn("import: "+msg, "entry", f.Name)
			s.core.cfg.Events.Emit(Event{Action: LogWarning, ProjectID: projectID, Message: msg})
			continue
		case !errors.Is(err, fs.ErrNotExist):
			log.Warn("import: image not installed", "entry", f.Name, "err", err)
			continue
		}
		if err := writeImage(root, name, f); err != nil {
			log.Warn("import: image not installed", "entry", f.Name, "err", err)
			continue
		}
		log.Info("import: image installed", "image", name, "bytes", f.UncompressedSize64)
	}
}

// sameFile reports whether name in root holds what entry f holds
// (fs.ErrNotExist when there is no such file).
func sameFile(root *os.Root, name string, f *zip.File) (bool, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return false, err
	}
	if !info.Mode().IsRegular() || uint64(info.Size()) != f.UncompressedSize64 {
		return false, nil
	}
	a, err := confined.Open(root, name) // the Lstat above may be stale: never block on a FIFO
	if err != nil {
		return false, err
	}
	defer a.Close()
	b, err := f.Open()
	if err != nil {
		return false, err
	}
	defer b.Close()
	ha, hb := sha256.New(), sha256.New()
	if _, err := io.Copy(ha, a); err != nil {
		return false, err
	}
	if _, err := io.Copy(hb, io.LimitReader(b, maxImageFile)); err != nil {
		return false, err
	}
	return bytes.Equal(ha.Sum(nil), hb.Sum(nil)), nil
}

// writeImage writes entry f as name in root, through a temporary name,
// never replacing a file that appeared meanwhile.
func writeImage(root *os.Root, name string, f *zip.File) error {
	in, err := f.Open()
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := "." + name + ".import"
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, int64(f.UncompressedSize64)+1))
	if err == nil && uint64(n) != f.UncompressedSize64 {
		err = errors.New("the entry's size is not what the archive says")
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link, not a rename: it fails if the name was taken meanwhile.
		if err = root.Link(tmp, name); err == nil {
			root.Remove(tmp)
		}
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}
