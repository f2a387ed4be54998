package host

import (
	"github.com/labtap/labtap/proto"
)

// State lists what the agent runs: every open project, its nodes, its
// links with their specs, and the captures running on them.
func (h *Host) State() proto.AgentState {
	out := proto.AgentState{Projects: []proto.ProjectState{}}
	for _, p := range h.projects.openProjects() {
		select {
		case <-p.opened:
		default:
			continue // still opening: nothing runs in it yet
		}
		ps := proto.ProjectState{ProjectID: p.id, Nodes: []proto.NodeState{}, Links: []proto.LinkStatus{}}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			continue
		}
		for _, n := range p.nodes {
			ps.Nodes = append(ps.Nodes, h.shared.nodeState(n))
		}
		p.caps.mu.Lock()
		for _, l := range p.links {
			ls := proto.LinkStatus{LinkID: l.spec.LinkID, Spec: l.spec}
			if c := p.caps.byLink[l.spec.LinkID]; c != nil && !c.done && c.tap != nil {
				st := stateOf(c, true)
				ls.Capture = &st
			}
			ps.Links = append(ps.Links, ls)
		}
		p.caps.mu.Unlock()
		p.mu.Unlock()
		out.Projects = append(out.Projects, ps)
	}
	return out
}
