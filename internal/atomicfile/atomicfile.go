// Package atomicfile writes a file so that a crash, a power cut or a full
// disk leaves either the old file or the new one, never a torn mix, and so
// that two writers of the same file never trip over each other's temporary
// file.
//
// Every file labtap replaces goes through it: the project file and its
// sidecars, settings, computes, templates, snapshots, uploaded images and
// symbols, a node's copied files and disks, and the files clients write
// inside a project (through an os.Root).
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// TempPattern is the name pattern (filepath.Glob's) of the temporary files
// made beside path; a caller may sweep the ones a crash left behind. They
// are hidden (a leading "."), so listings of a folder skip them.
func TempPattern(path string) string { return "." + filepath.Base(path) + ".*.tmp" }

// File is the new content of a file, written to a temporary file of its
// own beside it; the file is replaced only by Commit. Write to it, Seek
// and read it back as any *os.File; do not Close it: Commit or Abort
// does. The zero value is not usable.
type File struct {
	*os.File
	root      *os.Root // nil: tmp and name are the OS's paths
	tmp, name string
	done      bool
}

// tempName is a fresh temporary name beside name (slash- or
// OS-separated, as join makes it).
func tempName(name string, join func(...string) string, dir func(string) string, base func(string) string) string {
	var b [8]byte
	rand.Read(b[:])
	return join(dir(name), "."+base(name)+"."+hex.EncodeToString(b[:])+".tmp")
}

// Create starts replacing the file at path with mode perm. path's
// directory must exist.
func Create(path string, perm os.FileMode) (*File, error) {
	for range 10 {
		tmp := tempName(path, filepath.Join, filepath.Dir, filepath.Base)
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return start(f, nil, tmp, path, perm)
	}
	return nil, os.ErrExist
}

// CreateIn starts replacing the file name (slash-separated, inside root)
// with mode perm. Nothing outside root is touched; a link, FIFO or device
// at name is replaced, never followed or opened. name's directory must
// exist.
func CreateIn(root *os.Root, name string, perm os.FileMode) (*File, error) {
	for range 10 {
		tmp := tempName(name, path.Join, path.Dir, path.Base)
		f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return start(f, root, tmp, name, perm)
	}
	return nil, os.ErrExist
}

func start(f *os.File, root *os.Root, tmp, name string, perm os.FileMode) (*File, error) {
	af := &File{File: f, root: root, tmp: tmp, name: name}
	// The umask must not narrow or widen what the caller asked for.
	if err := f.Chmod(perm); err != nil {
		af.Abort()
		return nil, err
	}
	return af, nil
}

// Commit makes what was written durable and puts it in place of the file:
// the data is synced, the temporary file renamed over the file and the
// folder synced, so the rename survives a power cut too. On error the file
// is left as it was and the temporary file is removed.
func (f *File) Commit() error {
	if f.done {
		return os.ErrClosed
	}
	err := f.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.rename()
	}
	f.done = true
	if err != nil {
		f.remove()
		return err
	}
	return f.syncDir()
}

// Abort drops what was written; the file stays as it was. It does nothing
// after Commit, so it may be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	f.remove()
}

func (f *File) rename() error {
	if f.root != nil {
		return f.root.Rename(f.tmp, f.name)
	}
	return os.Rename(f.tmp, f.name)
}

func (f *File) remove() {
	if f.root != nil {
		f.root.Remove(f.tmp)
		return
	}
	os.Remove(f.tmp)
}

func (f *File) syncDir() error {
	var d *os.File
	var err error
	if f.root != nil {
		d, err = f.root.OpenFile(path.Dir(f.name), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	} else {
		d, err = os.Open(filepath.Dir(f.name))
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Write replaces the file at path with data and mode perm, durably (see
// Commit), making path's directory if needed. Each call has a temporary
// file of its own: concurrent writers of one path each succeed and the
// last rename wins, so callers that need the newest data to win must
// serialise their writes themselves. On error path is left as it was.
func Write(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	return commitWith(f, data)
}

// WriteIn is Write inside root (see CreateIn); name's directory must
// exist.
func WriteIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	f, err := CreateIn(root, name, perm)
	if err != nil {
		return err
	}
	return commitWith(f, data)
}

func commitWith(f *File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
