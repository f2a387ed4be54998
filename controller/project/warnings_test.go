package project

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
)

// dockerComputes are fakeComputes that run docker nodes and derive their
// MACs as a compute does: base + adapter, base 02:42:<id[2:8]>:00.
type dockerComputes struct{ *fakeComputes }

func (dockerComputes) NodeTypes(string) []string { return []string{"vpcs", TypeDocker} }

func (dockerComputes) AdapterMACs(_, nodeID, base string, count int) ([]string, error) {
	if base == "" {
		base = "02:42:" + nodeID[2:4] + ":" + nodeID[4:6] + ":" + nodeID[6:8] + ":00"
	}
	mac, err := net.ParseMAC(base)
	if err != nil {
		return nil, err
	}
	out := make([]string, count)
	for i := range out {
		m := slices.Clone(mac)
		m[5] += byte(i)
		out[i] = m.String()
	}
	return out, nil
}

func (dockerComputes) CreateNode(context.Context, string, string, NodeSpec) (NodeRuntime, error) {
	return NodeRuntime{Status: Stopped, ConsoleType: "telnet"}, nil
}

func warnings(f *fixture) []string {
	f.events.mu.Lock()
	defer f.events.mu.Unlock()
	var out []string
	for _, e := range f.events.events {
		if e.Action == LogWarning {
			out = append(out, e.Message)
		}
	}
	return out
}

func TestDuplicateMACsAndSkippedEnvironmentLinesAreWarnedAbout(t *testing.T) {
	f := &fixture{computes: newFakeComputes(), store: &failingStore{}, events: &recorder{}}
	f.svc = NewService(Config{ProjectsDir: t.TempDir(), Computes: dockerComputes{f.computes}, Store: f.store, Events: f.events})
	p, err := f.svc.CreateProject(t.Context(), ProjectCreate{Name: "lab", Settings: DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	f.project = p
	docker := func(name string, props map[string]any) Node {
		props["image"] = "x:1"
		return f.nodeOf(t, TypeDocker, name, props)
	}
	a := docker("a", map[string]any{"adapters": 2.0, "environment": "OK=1\n=nameless\n"})
	if got := warnings(f); len(got) != 1 || got[0] != "a has invalid environment variable: =nameless" {
		t.Fatalf("warnings %q", got)
	}
	b := docker("b", map[string]any{"adapters": 1.0})
	if got := warnings(f); len(got) != 1 {
		t.Fatalf("distinct MACs warned about: %q", got)
	}
	// b's base is a's second adapter.
	if _, err := f.svc.Nodes.Update(t.Context(), p.ID, b.ID, NodeUpdate{Properties: map[string]any{"mac_address": a.Adapters[1].MACAddress}}); err != nil {
		t.Fatal(err)
	}
	got := warnings(f)
	want := fmt.Sprintf("Node b eth0 has the MAC address %s of node a eth1", a.Adapters[1].MACAddress)
	if len(got) != 2 || !strings.HasPrefix(got[1], want) {
		t.Fatalf("warnings %q, want one starting %q", got, want)
	}
	// Two custom adapters of one node with one MAC.
	c := docker("c", map[string]any{"adapters": 2.0})
	_, err = f.svc.Nodes.Update(t.Context(), p.ID, c.ID, NodeUpdate{CustomAdapters: rawList(t,
		`{"adapter_number": 0, "mac_address": "02:00:00:00:00:07"}`, `{"adapter_number": 1, "mac_address": "02:00:00:00:00:07"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := warnings(f); len(got) != 3 || !strings.HasPrefix(got[2], "Node c eth1 has the MAC address 02:00:00:00:00:07 of node c eth0") {
		t.Fatalf("warnings %q", got)
	}
}

func rawList(t *testing.T, items ...string) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}
