package project

import (
	"context"
	"github.com/labtap/labtap/capspec"
)

// Running is what one compute reports it still runs for a project, for a
// controller that restarted while its agents kept going.
type Running struct {
	ComputeID string
	ProjectID string
	Links     []RunningLink
}

// RunningLink is a link relay a compute still runs.
type RunningLink struct {
	ID string
	// Tunnel is this side's tunnel end, for a link across computes.
	Tunnel *TunnelEnd
	// Capture is the capture the relay writes, nil if none.
	Capture *capspec.State
}

// Adopt opens the closed projects that computes report they still run, and
// takes over what runs as it is: nodes keep running (creating a node that
// exists returns it), relays stay (links across computes keep their tunnel
// ports), and captures go on, the links saying so. It is how a controller
// that restarted finds its labs and their captures again. Projects it
// cannot open stay closed, and the error is returned with the others.
func (s *Service) Adopt(ctx context.Context, reports []Running) []error {
	byProject := map[string][]Running{}
	for _, r := range reports {
		byProject[r.ProjectID] = append(byProject[r.ProjectID], r)
	}
	var errs []error
	for pid, rs := range byProject {
		p, err := s.Project(pid)
		if err != nil {
			continue // not ours (any more): the agent keeps it until told
		}
		if p.Status == Opened {
			continue
		}
		if _, err := s.openProject(ctx, pid, rs); err != nil {
			errs = append(errs, err)
			continue
		}
		s.core.log.Info("project adopted from its computes", "project", pid)
	}
	return errs
}

// adoptedTunnel returns the tunnel of a link across computes as the
// computes still run it, nil unless both sides report it.
func adoptedTunnel(linkID string, nodes []*Node, running []Running) *TunnelPorts {
	var t TunnelPorts
	found := 0
	for side, n := range nodes {
		for _, r := range running {
			if r.ComputeID != n.ComputeID {
				continue
			}
			for _, rl := range r.Links {
				if rl.ID == linkID && rl.Tunnel != nil {
					t.Ports[side] = rl.Tunnel.LocalPort
					t.Hosts[1-side] = rl.Tunnel.RemoteHost
					found++
				}
			}
		}
	}
	if found != 2 {
		return nil
	}
	return &t
}

// adoptedCapture returns the capture a compute still writes on a link,
// with the side it depends on, or ok false.
func adoptedCapture(l *Link, nodes []*Node, running []Running) (Capture, bool) {
	for _, r := range running {
		for _, rl := range r.Links {
			if rl.ID != l.ID || rl.Capture == nil {
				continue
			}
			if c, ok := capturedOn(nodes, l.Tunnel != nil, r.ComputeID, *rl.Capture); ok {
				return c, true
			}
		}
	}
	return Capture{}, false
}

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}
