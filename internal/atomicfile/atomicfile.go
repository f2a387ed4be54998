// Package atomicfile writes a file so that a crash, a power cut or a full
// disk leaves either the old file or the new one, never a torn mix, and so
// that two writers of the same file never trip over each other's temporary
// file.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TempPattern is the name pattern of the temporary files Write makes beside
// path; a caller may sweep the ones a crash left behind.
func TempPattern(path string) string { return filepath.Base(path) + ".*.tmp" }

// Write writes data to a new temporary file in path's directory (making the
// directory if needed), syncs it, renames it over path and syncs the
// directory so that the rename itself survives a power cut. Each call has a
// temporary file of its own: concurrent writers of one path each succeed and
// the last rename wins, so callers that need the newest data to win must
// serialise their writes themselves. On error path is left as it was.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, TempPattern(path))
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
