package host

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labtap/labtap/agent/imagesum"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/atomicfile"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/proto"
)

// Images is the agent's images folders and the QEMU wizard's facts: what
// the images and QEMU routes serve. It holds the data directory and the
// images' md5 sums (safe for concurrent use), so it needs no lock; each
// call does its own disk I/O.
type Images struct {
	dataDir  string
	log      *slog.Logger
	sums     *imagesum.Sums
	listWait time.Duration    // DefaultImageListWait when 0
	sandbox  *sandbox.Sandbox // what QEMU nodes run confined by (KVM for them)
}

// DefaultImageListWait is how long an images listing waits for md5 sums
// not known yet before it answers them empty.
const DefaultImageListWait = 2 * time.Second

// DefaultMaxImageBytes bounds one image upload: 128 GiB.
const DefaultMaxImageBytes = 128 << 30

// ImagesDir is where the agent keeps the images of a node type
// (<data dir>/images/QEMU for qemu, GNS3's layout).
func (im *Images) ImagesDir(nodeType string) string {
	sub := nodeType
	if nodeType == TypeQemu {
		sub = "QEMU"
	}
	return filepath.Join(im.dataDir, "images", sub)
}

// SumStats counts the md5 computations of images so far (for metrics and
// tests).
func (im *Images) SumStats() imagesum.Stats { return im.sums.Stats() }

// imageTypes are the node types with an images folder.
func imageType(nodeType string) error {
	if nodeType != TypeQemu {
		return proto.Errorf(proto.CodeNotFound, "node type %q has no images", nodeType)
	}
	return nil
}

// Images lists the images of a node type (GNS3's rules): every regular file
// under the images folder, sorted by file name, but hidden ones, md5
// caches, partial uploads, files under 7 bytes and ELF executables. Each
// md5 comes from imagesum: known ones at once, the others computed in the
// background (shared with other listings, a few files at a time) and
// waited for until ctx is done or listWait has passed; a sum not known by
// then, or of a file too large to hash, is empty. A computation no
// listing waits for any more pauses.
func (im *Images) Images(ctx context.Context, nodeType string) ([]proto.Image, error) {
	if err := imageType(nodeType); err != nil {
		return nil, err
	}
	dir := im.ImagesDir(nodeType)
	out := []proto.Image{}
	var paths []string // of out's images
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipAll
			}
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") && p != dir {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(name, ".md5sum") || strings.HasSuffix(name, ".tmp") {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil || info.Size() < 7 {
			return nil
		}
		if head, err := readHead(p, 4); err != nil || bytes.Equal(head, []byte("\x7fELF")) {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, proto.Image{Filename: name, Path: filepath.ToSlash(rel), FileSize: info.Size()})
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "list images: %v", err)
	}
	wait := im.listWait
	if wait <= 0 {
		wait = DefaultImageListWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range paths {
		if sum, ok := im.sums.Cached(p); ok {
			out[i].MD5Sum = sum
			continue
		}
		wg.Go(func() {
			sum, err := im.sums.Sum(wctx, p)
			if err != nil {
				im.log.Debug("image md5 not known yet", "path", out[i].Path, "err", err)
			}
			out[i].MD5Sum = sum
		})
	}
	wg.Wait()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Filename < out[j].Filename })
	return out, nil
}

// readHead reads the first n bytes of the regular file at path; a FIFO
// put in a file's place since it was listed is refused without blocking.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b := make([]byte, n)
	_, err = io.ReadFull(f, b)
	return b, err
}

// WriteImage stores an upload as the image at rel (a path inside the
// images folder, which it can never leave: os.Root) from r, at most limit
// bytes: into <rel>.tmp, renamed over the image once whole, with its md5
// cached. A failed or oversized upload leaves the previous image as it
// was.
func (im *Images) WriteImage(nodeType, rel string, r io.Reader, limit int64) error {
	if err := imageType(nodeType); err != nil {
		return err
	}
	if limit <= 0 {
		limit = DefaultMaxImageBytes
	}
	clean := path.Clean(rel)
	if rel == "" || !filepath.IsLocal(clean) || strings.HasPrefix(path.Base(clean), ".") || strings.HasSuffix(clean, ".md5sum") || strings.ContainsRune(rel, 0) {
		return proto.Errorf(proto.CodeInvalid, "Could not write image: %s is forbidden", rel)
	}
	dir := im.ImagesDir(nodeType)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return proto.Errorf(proto.CodeConflict, "Could not write image: %s because %v", rel, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "Could not write image: %s because %v", rel, err)
	}
	defer root.Close()
	if d := path.Dir(clean); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return proto.Errorf(proto.CodeInvalid, "Could not write image: %s is forbidden (%v)", rel, err)
		}
	}
	// A temporary file of this upload's own: two uploads of one image each
	// write whole (the last one wins), and a FIFO or link left at the name
	// is replaced, never opened or followed.
	f, err := atomicfile.CreateIn(root, clean, 0o644)
	if err != nil {
		return proto.Errorf(proto.CodeInvalid, "Could not write image: %s is forbidden (%v)", rel, pathlessErr(err))
	}
	m := md5.New()
	n, err := io.Copy(io.MultiWriter(f, m), io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = errTooLarge
	}
	if err == nil {
		err = f.Commit()
	} else {
		f.Abort()
	}
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return proto.Errorf(proto.CodeInvalid, "Could not write image: %s is larger than %d bytes", rel, limit)
		}
		return proto.Errorf(proto.CodeConflict, "Could not write image: %s because %v", rel, err)
	}
	im.sums.Store(filepath.Join(dir, filepath.FromSlash(clean)), hex.EncodeToString(m.Sum(nil)))
	im.log.Info("image written", "type", nodeType, "path", clean, "bytes", n)
	return nil
}

var errTooLarge = errors.New("too large")

// QemuCapabilities reports KVM where QEMU nodes can use it (kvmUsable:
// its self-test passes and node programs can open /dev/kvm), as the GUI's
// "Require KVM" check reads it.
func (im *Images) QemuCapabilities() proto.QemuCapabilities {
	caps := proto.QemuCapabilities{KVM: []string{}}
	if kvmUsable(im.sandbox) {
		caps.KVM = []string{"x86_64", "i386"}
	}
	return caps
}

// QemuImgBinaries lists the qemu-img executables in PATH with versions.
func (im *Images) QemuImgBinaries(ctx context.Context) []proto.QemuBinary {
	out := []proto.QemuBinary{}
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "qemu-img")
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if v, err := node.QemuImgVersion(ctx, p); err == nil {
			out = append(out, proto.QemuBinary{Path: p, Version: v})
		}
	}
	return out
}

// QemuBinariesList is QemuBinaries as wire data.
func (im *Images) QemuBinariesList(ctx context.Context, archs []string) []proto.QemuBinary {
	var out []proto.QemuBinary
	for _, b := range QemuBinaries(ctx, archs) {
		out = append(out, proto.QemuBinary{Path: b.Path, Version: b.Version})
	}
	if out == nil {
		out = []proto.QemuBinary{}
	}
	return out
}
