package project

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
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

// NodeFile reads a file of a node's directory (VPCS: startup.vpc) from
// its compute.
func (s *Service) NodeFile(ctx context.Context, projectID, nodeID, name string) ([]byte, error) {
	n, err := s.Nodes.Get(projectID, nodeID)
	if err != nil {
		return nil, err
	}
	if name, err = nodeFileName(name); err != nil {
		return nil, err
	}
	return s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, projectID, nodeID, name)
}

// WriteNodeFile replaces a file of a node's directory on its compute; a
// VPCS reads startup.vpc at its next start.
func (s *Service) WriteNodeFile(ctx context.Context, projectID, nodeID, name string, data []byte) error {
	n, err := s.Nodes.Get(projectID, nodeID)
	if err != nil {
		return err
	}
	if name, err = nodeFileName(name); err != nil {
		return err
	}
	return s.core.cfg.Computes.WriteNodeFile(ctx, n.ComputeID, projectID, nodeID, name, data)
}

// ResetConsole disconnects every client of a started node's console (a
// stuck session); a node without a console is left as it is.
func (s *Service) ResetConsole(ctx context.Context, projectID, nodeID string) error {
	n, err := s.Nodes.Get(projectID, nodeID)
	if err != nil {
		return err
	}
	if n.Status != Started || n.Console == 0 || n.ConsoleType != "telnet" {
		return nil
	}
	return s.core.cfg.Computes.ResetConsole(ctx, n.ComputeID, projectID, nodeID)
}

// ResetConsoles resets the console of every started node of a project.
func (s *Service) ResetConsoles(ctx context.Context, projectID string) error {
	nodes, err := s.Nodes.List(projectID)
	if err != nil {
		return err
	}
	if p, _ := s.Project(projectID); p.Status != Opened {
		return errNotOpened
	}
	var errs []error
	for _, n := range nodes {
		if err := s.ResetConsole(ctx, projectID, n.ID); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DuplicateNode copies a stopped node (switches, hubs and clouds may run)
// next to it: the same settings and the original's name through the
// naming rules, a new id and MAC, unlocked, at x, y, z; a VPCS's
// startup.vpc comes along. Links are not copied (GNS3).
func (s *Service) DuplicateNode(ctx context.Context, projectID, nodeID string, x, y, z int) (Node, error) {
	n, err := s.Nodes.Get(projectID, nodeID)
	if err != nil {
		return Node{}, err
	}
	if n.Status != Stopped && !isAlwaysRunning(n.Type) {
		return Node{}, errorf(ErrConflict, "Cannot duplicate node data while the node is running")
	}
	nc := NewNodeCreate()
	nc.ComputeID, nc.Type, nc.Name, nc.TemplateID = n.ComputeID, n.Type, n.Name, n.TemplateID
	nc.Symbol, nc.X, nc.Y, nc.Z = n.Symbol, x, y, z
	nc.ConsoleAutoStart, nc.PortNameFormat, nc.PortSegmentSize = n.ConsoleAutoStart, n.PortNameFormat, n.PortSegmentSize
	nc.FirstPortName, nc.CustomAdapters, nc.ConsoleType = n.FirstPortName, n.CustomAdapters, n.ConsoleType
	// Everything the node's entry holds but what names this one node
	// (GNS3's list), members labtap does not model included.
	notCopied := func(k string) bool {
		return k == "mac_address" || k == "mac_addr" || k == "application_id" || k == "dynamips_id"
	}
	for k, v := range n.Properties {
		if !notCopied(k) {
			nc.Properties[k] = v
		}
	}
	nc.Extra = maps.Clone(n.Extra)
	maps.DeleteFunc(nc.Extra, func(k string, _ json.RawMessage) bool { return notCopied(k) })
	dup, err := s.Nodes.Create(ctx, projectID, nc)
	if err != nil {
		return Node{}, err
	}
	// The node's files go with it: what it holds that labtap does not
	// model too (an agent without the copy route gets startup.vpc).
	if c, ok := s.core.cfg.Computes.(nodeCopier); ok {
		err = c.CopyNodeDir(ctx, n.ComputeID, projectID, nodeID, dup.ID)
	} else if n.Type == "vpcs" {
		var data []byte
		data, err = s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, projectID, nodeID, "startup.vpc")
		if err == nil {
			err = s.core.cfg.Computes.WriteNodeFile(ctx, dup.ComputeID, projectID, dup.ID, "startup.vpc", data)
		} else if isNotFound(err) {
			err = nil
		}
	}
	if err != nil {
		if derr := s.Nodes.Delete(context.WithoutCancel(ctx), projectID, dup.ID); derr != nil {
			s.core.log.Warn("remove a failed duplicate", "node", dup.ID, "err", derr)
		}
		return Node{}, err
	}
	return dup, nil
}

// nodeCopier is what Computes adds to copy a node's directory on its
// compute. *compute.Registry satisfies it.
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
	if writing && (clean == p.Filename || !strings.Contains(clean, "/") && strings.HasSuffix(clean, ".gns3")) {
		return "", errorf(ErrForbidden, "The project file is written by the server only")
	}
	return clean, nil
}

// ProjectFile reads a file of a project's directory (README.txt, ...).
func (s *Service) ProjectFile(projectID, name string) ([]byte, error) {
	p, err := s.Project(projectID)
	if err != nil {
		return nil, err
	}
	clean, err := projectFileName(p, name, false)
	if err != nil {
		return nil, err
	}
	data, err := confined.Read(p.Path, clean, MaxProjectFile)
	return data, projectFileError(name, err)
}

// WriteProjectFile replaces a file of a project's directory, atomically.
func (s *Service) WriteProjectFile(projectID, name string, data []byte) error {
	p, err := s.Project(projectID)
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
	case errors.Is(err, confined.ErrBadPath):
		return &Error{Kind: ErrInvalid, Msg: "Invalid file path " + name, Err: err}
	}
	return &Error{Kind: ErrForbidden, Msg: "Cannot access " + name + ": outside the project's directory or unreadable", Err: err}
}
