// Package confined reads and writes files that clients name by a relative
// path, inside one directory and nowhere else: ".." and symbolic links
// cannot lead out of it (os.Root), whatever the path says. Writes are
// atomic: a crash leaves the old file or the new one.
package confined

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Errors a caller maps to replies.
var (
	ErrBadPath  = errors.New("bad path")
	ErrIsDir    = errors.New("is a directory")
	ErrTooLarge = errors.New("file too large")
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

// Read returns the content of name inside dir, at most max bytes.
func Read(dir, name string, max int64) ([]byte, error) {
	name, err := Clean(name)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, ErrIsDir
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrBadPath)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	return data, nil
}

// Write replaces name inside dir with data (making its parent directories
// inside dir), through a synced temporary file renamed over it.
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
	if st, err := root.Stat(name); err == nil && st.IsDir() {
		return ErrIsDir
	}
	var tmp *os.File
	var tmpName string
	for i := 0; ; i++ {
		tmpName = path.Join(parent, fmt.Sprintf(".%s.%d.%d.tmp", path.Base(name), os.Getpid(), i))
		tmp, err = root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return err
		}
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			root.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmpName, name); err != nil {
		return err
	}
	ok = true
	if d, err := root.Open(parent); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
