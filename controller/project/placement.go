package project

import (
	"fmt"
	"slices"
	"strings"
)

// filterSide is the placement rule for the filters of a link across
// computes (one relay on each): which endpoint's relay applies them. Applied
// on both sides they would act twice.
//
// While the link captures, the filters run on the capture side, so the file
// holds what crossed the wire after the filters in both directions (GNS3
// chooses the two sides independently, and a capture can then show one
// direction before the filters and the other after them). Otherwise they
// run where a capture would start (captureSide), and on the first endpoint
// when no node is started.
func filterSide(nodes []*Node, c Capture) int {
	if c.Active {
		return c.Side
	}
	if side := captureSide(nodes); side >= 0 {
		return side
	}
	return 0
}

// ComputeAuto is the compute_id that asks the controller to place a node
// (as does none at all, as GNS3 3.x allocates one); GNS3 clients send
// "local", which is the local compute, exactly.
const ComputeAuto = "auto"

// Placement policies (Config.Placement).
const (
	// PlaceSpread starts each project on the agent least loaded (nodes per
	// CPU), so labs spread across agents.
	PlaceSpread = "spread"
	// PlacePack fills one agent while it has room before the next, in
	// registration order.
	PlacePack = "pack"
)

// Placement's rule of room: an agent takes a node while, after it, its
// host keeps a tenth of its memory and minDiskFree of disk free. Its CPU
// use is not a rule: it is a moment's (a host busy now refusing every
// node would be wrong the next), and nodes per CPU weigh its CPUs.
const minDiskFree = 1 << 30

// memoryNeed is what a node of a type is counted to take of its host's
// memory: a QEMU node its RAM, a docker node its memory limit (64 MiB
// without one), anything else 16 MiB.
func memoryNeed(nodeType string, props map[string]any) int64 {
	switch nodeType {
	case TypeQemu:
		if mb, err := intProp(props, "ram", 256); err == nil && mb > 0 {
			return int64(mb) << 20
		}
		return 256 << 20
	case TypeDocker:
		if mb, err := intProp(props, "memory", 0); err == nil && mb > 0 {
			return int64(mb) << 20
		}
		return 64 << 20
	}
	return 16 << 20
}

// placeRequest is what placement decides on.
type placeRequest struct {
	policy   string
	nodeType string
	need     int64 // bytes of memory
	// held counts the nodes this controller has on each compute (all open
	// projects); mine those of the node's own project.
	held, mine map[string]int
}

// placement is a decision: the compute and why, in words.
type placement struct {
	compute string
	why     string
	// considered says, compute by compute, what placement saw.
	considered []string
}

// place picks the compute for a node among rooms (registration order).
// A project's nodes stay together on the compute that holds most of them
// while it has room, since links between nodes of one agent need no
// tunnel; a project's first node, and one its compute has no room for,
// goes where the policy says. A QEMU node goes where KVM runs if any such
// compute can take it.
func place(rooms []ComputeRoom, r placeRequest) (placement, error) {
	var d placement
	var fit []ComputeRoom
	kvm := false
	for _, c := range rooms {
		if why := refuse(c, r); why != "" {
			d.considered = append(d.considered, c.ID+": "+why)
			continue
		}
		d.considered = append(d.considered, c.ID+": "+describe(c, r))
		fit = append(fit, c)
		kvm = kvm || (c.Room != nil && c.Room.KVM)
	}
	if r.nodeType == TypeQemu && kvm {
		fit = slices.DeleteFunc(fit, func(c ComputeRoom) bool { return c.Room == nil || !c.Room.KVM })
	}
	if len(fit) == 0 {
		return d, errorf(ErrConflict, "No compute can take a %s node (%s)", r.nodeType, strings.Join(d.considered, "; "))
	}
	best := -1
	for i, c := range fit {
		if r.mine[c.ID] > 0 && (best < 0 || r.mine[c.ID] > r.mine[fit[best].ID]) {
			best = i
		}
	}
	if best >= 0 {
		d.compute = fit[best].ID
		d.why = fmt.Sprintf("with %d of the project's nodes (links between them need no tunnel)", r.mine[d.compute])
		return d, nil
	}
	best = 0
	for i, c := range fit[1:] {
		b := fit[best]
		lc, lb := load(c, r), load(b, r)
		switch {
		case r.policy == PlacePack && lc > lb,
			r.policy != PlacePack && (lc < lb || lc == lb && avail(c) > avail(b)):
			best = i + 1
		}
	}
	d.compute = fit[best].ID
	if r.policy == PlacePack {
		d.why = fmt.Sprintf("pack: the fullest compute with room (%.2f nodes per CPU)", load(fit[best], r))
	} else {
		d.why = fmt.Sprintf("spread: the least loaded compute (%.2f nodes per CPU)", load(fit[best], r))
	}
	return d, nil
}

// refuse says why a compute cannot take the node ("" if it can).
func refuse(c ComputeRoom, r placeRequest) string {
	switch {
	case !c.Connected:
		return "not connected"
	case c.Draining:
		return "draining"
	case !slices.Contains(c.NodeTypes, r.nodeType):
		return "does not run " + r.nodeType
	}
	if m := c.Room; m != nil {
		if m.MemoryAvailable-r.need < m.MemoryTotal/10 {
			return fmt.Sprintf("%s of memory available, %s needed and a tenth kept", gib(m.MemoryAvailable), gib(r.need))
		}
		if m.DiskFree < minDiskFree {
			return fmt.Sprintf("%s of disk free", gib(m.DiskFree))
		}
	}
	return ""
}

// load is a compute's nodes per CPU: those this controller holds there,
// or those its agent reports if more (another controller's, or nodes
// not known here).
func load(c ComputeRoom, r placeRequest) float64 {
	n, cpus := r.held[c.ID], 1
	if c.Room != nil {
		n = max(n, c.Room.Nodes)
		cpus = max(cpus, c.Room.CPUs)
	}
	return float64(n) / float64(cpus)
}

func avail(c ComputeRoom) int64 {
	if c.Room == nil {
		return 0
	}
	return c.Room.MemoryAvailable
}

func describe(c ComputeRoom, r placeRequest) string {
	if c.Room == nil {
		return fmt.Sprintf("%d nodes, capacity not reported", r.held[c.ID])
	}
	return fmt.Sprintf("%.2f nodes per CPU, %s memory available, %s disk free, CPU %.0f%% busy", load(c, r), gib(c.Room.MemoryAvailable), gib(c.Room.DiskFree), c.CPUPercent)
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// placeNode picks the compute of a node created with no compute or
// ComputeAuto, and logs why. st.ops must be held.
func (s *core) placeNode(st *state, projectID, name, nodeType string, props map[string]any) (string, error) {
	return s.placeNodeOff(st, projectID, name, nodeType, props, "")
}

// placeNodeOff is placeNode for a node that must leave compute except (a
// move): that compute is not considered.
func (s *core) placeNodeOff(st *state, projectID, name, nodeType string, props map[string]any, except string) (string, error) {
	placer, ok := s.cfg.Computes.(Placer)
	if !ok {
		return "", errorf(ErrInvalid, "Node %s: compute_id is required here", name)
	}
	r := placeRequest{policy: s.cfg.Placement, nodeType: nodeType, need: memoryNeed(nodeType, props),
		held: map[string]int{}, mine: map[string]int{}}
	s.mu.RLock()
	for _, other := range s.projects {
		other.mu.RLock()
		for _, n := range other.nodes {
			r.held[n.ComputeID]++
			if other == st {
				r.mine[n.ComputeID]++
			}
		}
		other.mu.RUnlock()
	}
	s.mu.RUnlock()
	rooms := placer.Rooms()
	if except != "" {
		rooms = slices.DeleteFunc(rooms, func(c ComputeRoom) bool { return c.ID == except })
	}
	d, err := place(rooms, r)
	if err != nil {
		s.log.Info("node not placed", "project", projectID, "node", name, "type", nodeType, "policy", r.policy, "err", err)
		return "", err
	}
	s.log.Info("node placed", "project", projectID, "node", name, "type", nodeType, "compute", d.compute,
		"policy", r.policy, "why", d.why, "considered", strings.Join(d.considered, "; "))
	return d.compute, nil
}
