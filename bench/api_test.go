package main

import "testing"

// TestLabTopologyIsATreeWithinEachNodesPorts checks the lab of
// scripts/bench -api-lab: no loop (switches without STP would storm),
// every node reached, no port used twice, VPCS only on port 0 and
// switches within their ports.
func TestLabTopologyIsATreeWithinEachNodesPorts(t *testing.T) {
	for _, n := range []int{5, 100, 200, 301} {
		nsw := max(2, 2*n/5)
		nvpcs := n - nsw
		links := labTopology(nsw, nvpcs, 8)
		if len(links) != n-1 {
			t.Errorf("%d nodes: %d links, want %d (a spanning tree)", n, len(links), n-1)
		}
		parent := make([]int, n)
		for i := range parent {
			parent[i] = i
		}
		var root func(int) int
		root = func(i int) int {
			for parent[i] != i {
				parent[i] = parent[parent[i]]
				i = parent[i]
			}
			return i
		}
		type port struct{ node, port int }
		taken := map[port]bool{}
		for _, l := range links {
			for _, e := range []port{{l.a, l.aPort}, {l.b, l.bPort}} {
				if e.node < 0 || e.node >= n {
					t.Fatalf("%d nodes: link %v names node %d", n, l, e.node)
				}
				if taken[e] {
					t.Errorf("%d nodes: port %d of node %d used twice", n, e.port, e.node)
				}
				taken[e] = true
				if e.node >= nsw && e.port != 0 || e.port < 0 || e.port >= 8 {
					t.Errorf("%d nodes: link %v uses port %d of node %d, which it lacks", n, l, e.port, e.node)
				}
			}
			ra, rb := root(l.a), root(l.b)
			if ra == rb {
				t.Fatalf("%d nodes: link %v closes a loop", n, l)
			}
			parent[ra] = rb
		}
		for i := range n {
			if root(i) != root(0) {
				t.Errorf("%d nodes: node %d is not linked to the rest", n, i)
			}
		}
	}
}
