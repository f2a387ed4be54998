// Package confined reads and writes files that clients name by a relative
// path, inside one directory and nowhere else: ".." and symbolic links
// cannot lead out of it (os.Root), whatever the path says. Only regular
// files are read: a FIFO, device or link in a file's place is refused
// without blocking, and reads end by a deadline. Writes are atomic: a
// crash leaves the old file or the new one.
package confined

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/labtap/labtap/internal/atomicfile"
)

// Errors a caller maps to replies.
var (
	ErrBadPath  = errors.New("bad path")
	ErrIsDir    = errors.New("is a directory")
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular is a FIFO, socket, device or symbolic link where a
	// file is read or written.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTimeout is a read that did not end by its deadline.
	ErrTimeout = errors.New("read timed out")
)

// Clean turns a client's relative path ("a/b.txt") into the name used
// inside the directory, refusing what cannot name a file in it.
func Clean(p string) (string, error) {
	if p == "" || strings.ContainsAny(p, "\x00\\") {
		return "", fmt.Errorf("%w: %q", ErrBadPath, p)
	}
	c := path.Clean("/" + p)[1:]
	if c == "" {
		return "", fmt.Errorf("%w: %q", ErrBadPath, p)
	}
	return c, nil
}

// ReadTimeout bounds one Read when its context has no sooner deadline.
const ReadTimeout = 10 * time.Second

// Read returns the content of name inside dir, at most max bytes. It
// never follows a symbolic link in the last element of name and reads
// only regular files: a FIFO, a socket or a device (which a node's
// process can make in its directory) is refused with ErrNotRegular
// without blocking. It answers by ctx's deadline, or ReadTimeout, with an
// error wrapping ErrTimeout; the read then goes on in the background only
// while the kernel holds it (a hung network file system) and its file is
// closed when it returns.
func Read(ctx context.Context, dir, name string, max int64) ([]byte, error) {
	name, err := Clean(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1) // the reader never blocks on it
	go func() {
		data, err := read(ctx, dir, name, max)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", name, ErrTimeout)
	}
}

// readChunk is how much read reads between two looks at its deadline.
const readChunk = 64 << 10

func read(ctx context.Context, dir, name string, max int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := Open(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s: %w", name, ErrTimeout)
		}
		n, err := buf.ReadFrom(io.LimitReader(f, readChunk))
		if err != nil {
			return nil, err
		}
		if int64(buf.Len()) > max {
			return nil, ErrTooLarge
		}
		if n == 0 {
			return buf.Bytes(), nil
		}
	}
}

// Open opens name inside root for reading, as a regular file only: the
// last element of name is opened with O_NOFOLLOW (a symbolic link is
// refused, even one that stays inside root) and O_NONBLOCK (a FIFO cannot
// block the open), and what the opened descriptor is (fstat) decides:
// anything but a regular file is closed and refused with ErrNotRegular, a
// directory with ErrIsDir. The caller closes the file.
func Open(root *os.Root, name string) (*os.File, error) {
	return OpenFile(root, name, os.O_RDONLY, 0)
}

// OpenFile is Open with flag (os.O_WRONLY, os.O_CREATE...) and perm for a
// file it creates. A write never opens a FIFO or a device, nor follows a
// link: O_NOFOLLOW and O_NONBLOCK apply to every open, and what is not a
// regular file once open is refused. Elements before the last one are
// resolved by root, which never leaves its directory.
func OpenFile(root *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	parent, base := path.Split(name)
	if parent == "" {
		parent = "."
	}
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%w: %q", ErrBadPath, name)
	}
	// O_DIRECTORY: a FIFO in the parent's place fails at once too.
	d, err := root.OpenFile(parent, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	if err := rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = syscall.Openat(int(dfd), base, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, uint32(perm.Perm()))
			if oerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	switch {
	case oerr == syscall.ELOOP:
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: a symbolic link", ErrNotRegular)}
	case oerr == syscall.ENXIO: // a FIFO without a reader, opened to write
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: a FIFO", ErrNotRegular)}
	case oerr != nil:
		return nil, &os.PathError{Op: "open", Path: name, Err: oerr}
	}
	f := os.NewFile(uintptr(fd), name)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case st.IsDir():
		f.Close()
		return nil, ErrIsDir
	case !st.Mode().IsRegular():
		f.Close()
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(st.Mode()))}
	}
	return f, nil
}

// kind names what a file that is not regular is.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Write replaces name inside dir with data (making its parent directories
// inside dir), durably (atomicfile.WriteIn).
func Write(dir, name string, data []byte, perm os.FileMode) error {
	name, err := Clean(name)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	parent := path.Dir(name)
	if err := root.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	// Lstat: a link in name's place is replaced by the file, never
	// followed; so is a FIFO or a device (the rename opens nothing).
	if st, err := root.Lstat(name); err == nil && st.IsDir() {
		return ErrIsDir
	}
	return atomicfile.WriteIn(root, name, data, perm)
}
