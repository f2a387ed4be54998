package project

import (
	"fmt"
	"reflect"
	"strings"
)

// What GNS3 lets a node be but warns about, as log.warning notifications
// of its project, after the change that made it so is announced.

// warnNode announces what is wrong with n, created or changed from prev
// (nil for a new node): each environment line of a docker node that its
// compute skips, and each adapter whose MAC address another adapter of the
// project has too (derived MACs can collide, and
// custom_adapters may repeat one). st.ops must be held.
func (s *Nodes) warnNode(st *state, n, prev *Node) {
	var msgs []string
	if n.Type == TypeDocker {
		env, _ := n.Properties["environment"].(string)
		was := ""
		if prev != nil {
			was, _ = prev.Properties["environment"].(string)
		}
		if prev == nil || env != was {
			for _, line := range invalidEnvironment(env) {
				msgs = append(msgs, fmt.Sprintf("%s has invalid environment variable: %s", n.Name, line))
			}
		}
	}
	if prev == nil || !reflect.DeepEqual(n.Adapters, prev.Adapters) {
		msgs = append(msgs, st.duplicateMACs(n)...)
	}
	if prev == nil && usesMAC(n.Type) {
		st.mu.RLock()
		for _, id := range st.nodeOrder {
			if o := st.nodes[id]; o.ID != n.ID && o.MACIndex == n.MACIndex {
				msgs = append(msgs, fmt.Sprintf("%s has the MAC address of %s: a project's VPCS have %d between them", n.Name, o.Name, MACIndexes))
				break
			}
		}
		st.mu.RUnlock()
	}
	for _, m := range msgs {
		s.core.emitLog(st, m)
	}
}

// invalidEnvironment returns the lines of a docker node's environment that
// GNS3's compute skips: those with no name before '='.
func invalidEnvironment(env string) []string {
	var bad []string
	for line := range strings.SplitSeq(env, "\n") {
		line = strings.TrimSpace(line)
		if name, _, _ := strings.Cut(line, "="); line != "" && strings.TrimSpace(name) == "" {
			bad = append(bad, line)
		}
	}
	return bad
}

// duplicateMACs words each adapter of n whose MAC address an adapter of
// another node of the project, or another of n's own, has too.
func (st *state) duplicateMACs(n *Node) []string {
	type owner struct{ node, port string }
	st.mu.RLock()
	seen := map[string]owner{}
	for _, id := range st.nodeOrder {
		if o := st.nodes[id]; o.ID != n.ID {
			for _, a := range o.Adapters {
				if _, ok := seen[a.MACAddress]; !ok && a.MACAddress != "" {
					seen[a.MACAddress] = owner{o.Name, a.Name}
				}
			}
		}
	}
	st.mu.RUnlock()
	var out []string
	for _, a := range n.Adapters {
		if a.MACAddress == "" {
			continue
		}
		if o, ok := seen[a.MACAddress]; ok {
			out = append(out, fmt.Sprintf("Node %s %s has the MAC address %s of node %s %s: frames between them will go astray; give one of them another mac_address",
				n.Name, a.Name, a.MACAddress, o.node, o.port))
			continue
		}
		seen[a.MACAddress] = owner{n.Name, a.Name}
	}
	return out
}
