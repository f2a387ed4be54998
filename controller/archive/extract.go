package archive

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Limits bound what an archive may unpack to. Zero members take the
// defaults of DefaultLimits.
type Limits struct {
	Entries int   // entries in the archive
	Size    int64 // bytes unpacked, all entries together
	// Ratio bounds each entry's unpacked size against its packed size
	// (entries of 1 MiB and less are not checked).
	Ratio int64
}

// DefaultLimits bound what an archive may unpack to: entries, bytes in all
// and the ratio of unpacked to packed bytes (a zip bomb's).
var DefaultLimits = Limits{Entries: 100_000, Size: 20 << 30, Ratio: 200}

func (l Limits) orDefaults() Limits {
	if l.Entries <= 0 {
		l.Entries = DefaultLimits.Entries
	}
	if l.Size <= 0 {
		l.Size = DefaultLimits.Size
	}
	if l.Ratio <= 0 {
		l.Ratio = DefaultLimits.Ratio
	}
	return l
}

// smallBombFloor is how much the entries of 1 MiB and less may unpack to
// whatever their compression ratio (configurations and notes compress
// well).
const smallBombFloor = 64 << 20

// ErrTooLarge reports an archive over its Limits.
var ErrTooLarge = errors.New("archive too large")

// Open reads an archive's directory, with decompressors for every
// compression GNS3 writes.
func Open(f io.ReaderAt, size int64) (*zip.Reader, error) {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, refuse("Cannot import project, not a GNS3 project (invalid zip)")
	}
	registerDecompressors(zr)
	return zr, nil
}

// Check refuses an archive that Extract would refuse, from its directory
// alone: an entry that is not a regular file or a directory (links, hard
// links, devices, FIFOs, sockets), a name that is not a clean relative
// path, a name used twice (or a file used as a directory), or more entries
// or bytes than lim allows. It also requires exactly one project.gns3.
func Check(zr *zip.Reader, lim Limits) error {
	lim = lim.orDefaults()
	if len(zr.File) > lim.Entries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.Entries)
	}
	seen := make(map[string]bool, len(zr.File))
	dirs := make(map[string]bool)
	var total uint64
	var smallU, smallC uint64 // the entries not checked one by one
	projectFiles := 0
	for _, f := range zr.File {
		if err := checkName(f.Name); err != nil {
			return err
		}
		mode := f.Mode()
		isDir := strings.HasSuffix(f.Name, "/")
		switch {
		case isDir && (mode.Type() == fs.ModeDir || mode.Type() == 0):
		case !isDir && mode.IsRegular():
		default:
			return refuse("Archive entry %s is not a regular file", f.Name)
		}
		name := strings.TrimSuffix(f.Name, "/")
		if seen[name] && !(isDir && dirs[name]) {
			return refuse("Archive entry %s appears twice", f.Name)
		}
		seen[name] = true
		if isDir {
			dirs[name] = true
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if seen[p] && !dirs[p] {
				return refuse("Archive entry %s is inside a file", f.Name)
			}
			dirs[p] = true
		}
		if !isDir && dirs[name] {
			return refuse("Archive entry %s appears twice", f.Name)
		}
		if name == ProjectFile {
			projectFiles++
		}
		total += f.UncompressedSize64
		if total > uint64(lim.Size) {
			return fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, lim.Size)
		}
		if f.UncompressedSize64 > 1<<20 && f.UncompressedSize64/max(f.CompressedSize64, 1) > uint64(lim.Ratio) {
			return fmt.Errorf("%w: entry %s is compressed more than %d:1", ErrTooLarge, f.Name, lim.Ratio)
		}
		if f.UncompressedSize64 <= 1<<20 {
			smallU, smallC = smallU+f.UncompressedSize64, smallC+f.CompressedSize64
			// Many small entries are a bomb too: checked together once
			// they are more than a project's text files.
			if smallU > smallBombFloor && smallU/max(smallC, 1) > uint64(lim.Ratio) {
				return fmt.Errorf("%w: its entries of 1 MiB and less are compressed more than %d:1", ErrTooLarge, lim.Ratio)
			}
		}
	}
	if projectFiles == 0 {
		return refuse("Cannot import project, project.gns3 file could not be found")
	}
	return nil
}

// ReadProjectFile returns the content of the archive's project.gns3
// (at most 64 MiB).
func ReadProjectFile(zr *zip.Reader) ([]byte, error) {
	for _, f := range zr.File {
		if f.Name != ProjectFile {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, refuse("Cannot import project, the project.gns3 file is corrupted")
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, 64<<20+1))
		if err != nil || len(data) > 64<<20 {
			return nil, refuse("Cannot import project, the project.gns3 file is corrupted")
		}
		return data, nil
	}
	return nil, refuse("Cannot import project, project.gns3 file could not be found")
}

// Extract unpacks every entry that skip does not name into dir, an empty
// directory, after Check. Files are created through an os.Root on dir, new
// (O_EXCL), mode 0644 whatever the archive says: an imported file is
// never executable, so nothing in a project can be run as the server's
// user by naming it (a QEMU node's qemu_path, say); each
// writes at most its declared size and the whole at most lim.Size. On
// error dir holds part of the archive: the caller removes it.
func Extract(zr *zip.Reader, dir string, lim Limits, skip func(name string) bool) error {
	lim = lim.orDefaults()
	if err := Check(zr, lim); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	budget := lim.Size
	for _, f := range zr.File {
		name := strings.TrimSuffix(f.Name, "/")
		if skip != nil && skip(name) {
			continue
		}
		if strings.HasSuffix(f.Name, "/") {
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("extract %s: %w", f.Name, unwrapPath(err))
			}
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("extract %s: %w", f.Name, unwrapPath(err))
			}
		}
		n, err := extractFile(root, f, name, budget)
		if err != nil {
			return err
		}
		budget -= n
	}
	return nil
}

func extractFile(root *os.Root, f *zip.File, name string, budget int64) (int64, error) {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, refuse("Cannot extract archive entry %s: %v", f.Name, unwrapPath(err))
	}
	defer out.Close()
	rc, err := f.Open()
	if err != nil {
		return 0, refuse("Cannot extract files from GNS3 project (invalid zip): %s: %v", f.Name, err)
	}
	defer rc.Close()
	limit := min(int64(f.UncompressedSize64), budget)
	n, err := io.Copy(out, io.LimitReader(rc, limit+1))
	switch {
	case err != nil && errors.Is(err, zip.ErrChecksum), err != nil && errors.Is(err, zip.ErrFormat):
		return n, refuse("Cannot extract files from GNS3 project (invalid zip): %s: %v", f.Name, err)
	case err != nil:
		return n, fmt.Errorf("extract %s: %w", f.Name, unwrapPath(err))
	case n > limit:
		return n, fmt.Errorf("%w: entry %s unpacks to more than it declares", ErrTooLarge, f.Name)
	}
	return n, out.Close()
}
