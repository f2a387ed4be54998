package project

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/labtap/labtap/internal/confined"
)

// MaxProjectFile bounds a project file a client reads or writes through
// the API (a README.txt, a supplier logo).
const MaxProjectFile = 10 << 20

// MaxNodeFile bounds a node file (a VPCS startup.vpc, a configuration):
// what an agent takes (proto.MaxNodeFile).
const MaxNodeFile = 512 << 10

// nodeFileName checks a client's path of a node file: relative, inside
// the node's directory (GNS3 refuses names starting with ".").
func nodeFileName(name string) (string, error) {
	clean, err := confined.Clean(name)
	if err != nil || strings.HasPrefix(clean, ".") {
		return "", errorf(ErrForbidden, "Invalid file path %q", name)
	}
	return clean, nil
}

// Files are the files of nodes (on their computes) and of projects (in
// their directories) that clients read and write.
type Files struct {
	core  *core
	nodes *Nodes
}

// ReadNode reads a file of a node's directory (VPCS: startup.vpc) from
// its compute.
func (s *Files) ReadNode(ctx context.Context, projectID, nodeID, name string) ([]byte, error) {
	n, err := s.nodes.Get(projectID, nodeID)
	if err != nil {
		return nil, err
	}
	if name, err = nodeFileName(name); err != nil {
		return nil, err
	}
	return s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, projectID, nodeID, name)
}

// WriteNode replaces a file of a node's directory on its compute; a
// VPCS reads startup.vpc at its next start.
func (s *Files) WriteNode(ctx context.Context, projectID, nodeID, name string, data []byte) error {
	n, err := s.nodes.Get(projectID, nodeID)
	if err != nil {
		return err
	}
	if name, err = nodeFileName(name); err != nil {
		return err
	}
	return s.core.cfg.Computes.WriteNodeFile(ctx, n.ComputeID, projectID, nodeID, name, data)
}

// nodeCopier is what Computes adds to copy a node's directory on its
// compute. *compute.Agents satisfies it.
type nodeCopier interface {
	CopyNodeDir(ctx context.Context, computeID, projectID, fromID, toID string) error
}

// projectFileName checks a client's path of a project file; the project
// file itself is the server's.
func projectFileName(p Project, name string, writing bool) (string, error) {
	clean, err := confined.Clean(name)
	if err != nil {
		return "", errorf(ErrInvalid, "Invalid file path %q", name)
	}
	if writing && (clean == p.Filename || !strings.Contains(clean, "/") && (strings.HasSuffix(clean, ".gns3") || strings.HasSuffix(clean, ".gns3"+JournalSuffix))) {
		return "", errorf(ErrForbidden, "The project file is written by the server only")
	}
	if writing {
		// Captures and snapshots are the server's: a client's file would
		// replace one (a running capture then writes on into an unlinked
		// file, lost) or take a name a capture may want.
		for _, dir := range kept {
			if dir = filepath.ToSlash(dir); clean == dir || strings.HasPrefix(clean, dir+"/") {
				return "", errorf(ErrForbidden, "Files in %s are written by the server only", dir)
			}
		}
	}
	return clean, nil
}

// ReadProject reads a regular file of a project's directory (README.txt,
// ...): a link, FIFO or device there is refused at once, and the read
// answers by ctx's deadline or confined.ReadTimeout.
func (s *Files) ReadProject(ctx context.Context, projectID, name string) ([]byte, error) {
	p, err := s.core.project(projectID)
	if err != nil {
		return nil, err
	}
	clean, err := projectFileName(p, name, false)
	if err != nil {
		return nil, err
	}
	if clean == p.Filename {
		// The file with every change saved, as GNS3 serves it.
		data, err := s.core.fold(&p)
		if err != nil {
			return nil, &Error{Kind: ErrConflict, Msg: "Cannot read " + name + ": " + pathless(err), Err: err}
		}
		if data != nil && len(data) <= MaxProjectFile {
			return data, nil // as the fold wrote it
		}
	}
	data, err := confined.Read(ctx, p.Path, clean, MaxProjectFile)
	return data, projectFileError(name, err)
}

// WriteProject replaces a file of a project's directory, atomically.
func (s *Files) WriteProject(projectID, name string, data []byte) error {
	p, err := s.core.project(projectID)
	if err != nil {
		return err
	}
	clean, err := projectFileName(p, name, true)
	if err != nil {
		return err
	}
	if len(data) > MaxProjectFile {
		return errorf(ErrTooLarge, "File %s is over %d bytes", name, MaxProjectFile)
	}
	if err := os.MkdirAll(filepath.Clean(p.Path), 0o755); err != nil {
		return &Error{Kind: ErrConflict, Msg: "Cannot write " + name, Err: err}
	}
	return projectFileError(name, confined.Write(p.Path, clean, data, 0o644))
}

// projectFileError words a project file failure, naming the file as the
// client did and never the server's paths.
func projectFileError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return &Error{Kind: ErrNotFound, Msg: "File " + name + " doesn't exist", Err: err}
	case errors.Is(err, confined.ErrIsDir):
		return &Error{Kind: ErrInvalid, Msg: name + " is a directory", Err: err}
	case errors.Is(err, confined.ErrTooLarge):
		return &Error{Kind: ErrTooLarge, Msg: "File " + name + " is too large", Err: err}
	case errors.Is(err, confined.ErrNotRegular):
		return &Error{Kind: ErrConflict, Msg: name + " is not a regular file", Err: err}
	case errors.Is(err, confined.ErrTimeout):
		return &Error{Kind: ErrConflict, Msg: "File " + name + " could not be read in time", Err: err}
	case errors.Is(err, confined.ErrBadPath):
		return &Error{Kind: ErrInvalid, Msg: "Invalid file path " + name, Err: err}
	}
	return &Error{Kind: ErrForbidden, Msg: "Cannot access " + name + ": outside the project's directory or unreadable", Err: err}
}
