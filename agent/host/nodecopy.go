package host

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/labtap/labtap/internal/atomicfile"
	"github.com/labtap/labtap/internal/confined"
	"github.com/labtap/labtap/proto"
)

// Bounds of a node directory copy (a duplicate): its files' total size and
// their number.
const (
	maxCopyBytes   = 256 << 30
	maxCopyEntries = 100_000
)

var errCopyTooLarge = errors.New("node directory too large to copy")

// copyInRoots copies file p of src to p in dst, durably.
func copyInRoots(src, dst *os.Root, p string, perm fs.FileMode) error {
	// The walk saw a regular file, but a node's process may have put a
	// FIFO or a link in its place since: confined.Open refuses those
	// without blocking.
	in, err := confined.Open(src, p)
	if err != nil {
		return err
	}
	defer in.Close()
	// A fresh temporary name, so a FIFO or link left in p's place is
	// replaced, never opened or followed.
	out, err := atomicfile.CreateIn(dst, p, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// pathlessErr is an error's text without the paths os errors carry.
func pathlessErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// copyNodeDir copies every regular file and directory of a node's
// directory into another node's of the same project (GNS3's compute
// duplicate: what labtap does not model travels with the copy, a VPCS's
// startup.vpc, a QEMU node's disks). Both directories are opened as roots,
// so nothing outside them is read or written; links, devices and FIFOs
// are skipped. Each file is written beside its name and renamed into
// place once whole.
func (p *project) copyNodeDir(fromID, toID string) error {
	from, err := p.node(fromID)
	if err != nil {
		return err
	}
	to, err := p.node(toID)
	if err != nil {
		return err
	}
	if fromID == toID {
		return proto.Errorf(proto.CodeInvalid, "a node cannot be copied onto itself")
	}
	if err := os.MkdirAll(to.dir, 0o755); err != nil {
		return proto.Errorf(proto.CodeConflict, "Cannot create the node's directory: %v", err)
	}
	src, err := os.OpenRoot(from.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing written yet
	}
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "Cannot read the node's directory: %v", err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(to.dir)
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "Cannot create the node's directory: %v", err)
	}
	defer dst.Close()
	var total int64
	entries := 0
	log, projectID := p.ag.log, p.id
	err = fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if entries++; entries > maxCopyEntries {
			return errCopyTooLarge
		}
		switch {
		case d.IsDir():
			return dst.MkdirAll(p, 0o755)
		case !d.Type().IsRegular():
			log.Warn("duplicate: skipped what is not a regular file", "project", projectID, "node", fromID, "path", p)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > maxCopyBytes {
			return errCopyTooLarge
		}
		return copyInRoots(src, dst, p, info.Mode().Perm())
	})
	if errors.Is(err, errCopyTooLarge) {
		return proto.Errorf(proto.CodeInvalid, "The node's directory is over %d files or %d bytes: not copied", maxCopyEntries, int64(maxCopyBytes))
	}
	if err != nil {
		return proto.Errorf(proto.CodeConflict, "Cannot copy the node's files: %s", pathlessErr(err))
	}
	return nil
}
