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

// TestLabAcrossAgentsIsOneTreeWithKMinus1CrossLinks checks the lab of
// scripts/bench -lab: one tree over every node (no loop, nothing left
// out), no port used twice, VPCS only on port 0, and exactly K-1 links
// between agents (each a UDP tunnel), joining consecutive agents; with a
// docker and a qemu node added on each agent (withOnEach), on that agent.
func TestLabAcrossAgentsIsOneTreeWithKMinus1CrossLinks(t *testing.T) {
	for _, c := range []struct{ n, k, docker int }{{12, 4, 0}, {200, 4, 0}, {1000, 4, 4}, {201, 3, 3}, {50, 1, 1}, {12, 4, 4}} {
		nodes, links, err := labAcross(c.n, c.k, 8)
		if err != nil {
			t.Fatalf("%d nodes over %d agents: %v", c.n, c.k, err)
		}
		nodes, links = withOnEach(nodes, links, c.k, c.docker, "docker", 8)
		nodes, links = withOnEach(nodes, links, c.k, c.docker, "qemu", 8)
		c.n += c.docker
		c.n += c.docker
		perAgent := map[string]map[int]int{}
		for _, n := range nodes {
			if n.typ == "docker" || n.typ == "qemu" {
				if perAgent[n.typ] == nil {
					perAgent[n.typ] = map[int]int{}
				}
				perAgent[n.typ][n.agent]++
			}
		}
		for _, typ := range []string{"docker", "qemu"} {
			if len(perAgent[typ]) != c.docker {
				t.Errorf("%d/%d: %s nodes on %d agents, want one on each of %d", c.n, c.k, typ, len(perAgent[typ]), c.docker)
			}
			for a, k := range perAgent[typ] {
				if k != 1 {
					t.Errorf("%d/%d: %d %s nodes on agent %d", c.n, c.k, k, typ, a)
				}
			}
		}
		if len(nodes) != c.n || len(links) != c.n-1 {
			t.Fatalf("%d nodes over %d agents: %d nodes, %d links", c.n, c.k, len(nodes), len(links))
		}
		parent := make([]int, c.n)
		for i := range parent {
			parent[i] = i
		}
		var root func(int) int
		root = func(i int) int {
			for parent[i] != i {
				i = parent[i]
			}
			return i
		}
		type port struct{ node, port int }
		taken := map[port]bool{}
		cross := 0
		for _, l := range links {
			for _, e := range []port{{l.a, l.aPort}, {l.b, l.bPort}} {
				if taken[e] {
					t.Errorf("%d/%d: port %d of node %d used twice", c.n, c.k, e.port, e.node)
				}
				taken[e] = true
				if nodes[e.node].typ != "ethernet_switch" && e.port != 0 || e.port < 0 || e.port >= 8 {
					t.Errorf("%d/%d: link %v uses port %d of %s", c.n, c.k, l, e.port, nodes[e.node].name)
				}
			}
			if nodes[l.a].agent != nodes[l.b].agent {
				cross++
				if d := nodes[l.b].agent - nodes[l.a].agent; d != 1 || nodes[l.a].typ != "ethernet_switch" || nodes[l.b].typ != "ethernet_switch" {
					t.Errorf("%d/%d: cross link %v joins %s to %s", c.n, c.k, l, nodes[l.a].name, nodes[l.b].name)
				}
			}
			ra, rb := root(l.a), root(l.b)
			if ra == rb {
				t.Fatalf("%d/%d: link %v closes a loop", c.n, c.k, l)
			}
			parent[ra] = rb
		}
		if cross != c.k-1 {
			t.Errorf("%d/%d: %d links across agents, want %d", c.n, c.k, cross, c.k-1)
		}
		for i := range c.n {
			if root(i) != root(0) {
				t.Errorf("%d/%d: node %d is not linked to the rest", c.n, c.k, i)
			}
		}
	}
	if _, _, err := labAcross(5, 4, 8); err == nil {
		t.Error("5 nodes over 4 agents: no error")
	}
}
