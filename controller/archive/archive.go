// Package archive reads and writes GNS3 2.2 portable projects
// (.gns3project) and snapshots (.gns3snapshot): zip files holding
// project.gns3 (the project file), the project directory's files
// (project-files/<node type>/<node id>/..., README.txt, ...), optionally
// snapshots/ and images/. It knows files, zips and the project file's JSON;
// projects, locks and HTTP live elsewhere.
//
// Archives cannot hurt the host: only
// regular files and directories go in or come out, entry names are
// relative, clean and unique, sizes and counts are bounded, and extraction
// happens inside an os.Root on a fresh directory.
package archive

import (
	"archive/zip"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ProjectFile is the project file's name inside an archive.
const ProjectFile = "project.gns3"

// Compression is how entries are compressed (GNS3's compression query
// parameter).
type Compression uint16

// The compressions GNS3 2.2 offers; the values are zip method numbers.
const (
	Store   Compression = Compression(zip.Store)   // "none"
	Deflate Compression = Compression(zip.Deflate) // "zip", the default
	Bzip2   Compression = 12                       // "bzip2"
	LZMA    Compression = 14                       // "lzma"
)

// ErrCompression reports a compression name GNS3 does not offer.
var ErrCompression = errors.New("unknown compression")

// ParseCompression reads GNS3's compression parameter; "" is "zip".
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(s) {
	case "", "zip":
		return Deflate, nil
	case "none":
		return Store, nil
	case "bzip2":
		return Bzip2, nil
	case "lzma":
		return LZMA, nil
	}
	return 0, fmt.Errorf("%w %q: use none, zip, bzip2 or lzma", ErrCompression, s)
}

// Error is an archive refused for what it holds; Msg is meant for the API
// user (it names the entry, never a server path).
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func refuse(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// checkName refuses an entry name that could leave the directory it is
// unpacked into or that names one path two ways: absolute names, drive
// letters, backslashes, NUL, and empty, "." or ".." components. A
// directory entry ends with "/".
func checkName(name string) error {
	clean := strings.TrimSuffix(name, "/")
	switch {
	case clean == "", len(name) > 4096, !utf8.ValidString(name):
		return refuse("Archive entry %q has an invalid name", name)
	case strings.HasPrefix(name, "/"), strings.ContainsAny(name, "\\\x00"),
		len(name) >= 2 && name[1] == ':':
		return refuse("Archive entry %q is not a relative path", name)
	}
	for _, part := range strings.Split(clean, "/") {
		if part == "" || part == "." || part == ".." {
			return refuse("Archive entry %q is not a clean relative path", name)
		}
	}
	if path.Clean(clean) != clean {
		return refuse("Archive entry %q is not a clean relative path", name)
	}
	return nil
}
