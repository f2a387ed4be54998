package project

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestPlanNodeUpdate(t *testing.T) {
	svc := NewService(Config{ProjectsDir: t.TempDir(), Computes: newFakeComputes()})
	env := nodePlanEnv{
		nameTaken: func(name string) bool { return name == "PC1" || name == "PC2" },
		symbols:   func(string) (int, int) { return 100, 50 },
		spec:      func(n *Node) (NodeSpec, error) { return svc.Nodes.nodeSpec(n, nil) },
	}
	vpcs := Node{ID: "n1", Type: "vpcs", Name: "PC1", Console: 5000, ConsoleType: "telnet", Height: 59,
		Label: nodeLabel(nil, "PC1", 59), Properties: map[string]any{}}
	vpcs.Label["x"] = json.RawMessage("7")
	pc5 := vpcs
	pc5.Name = "PC5"
	sw := Node{ID: "n2", Type: TypeSwitch, Name: "SW1", Properties: map[string]any{"ports_mapping": defaultPortsMapping(TypeSwitch)}}
	docker := Node{ID: "n3", Type: TypeDocker, Name: "D1", Properties: map[string]any{"image": "alpine", "adapters": 1, "start_command": "sh"}}
	if err := svc.Nodes.resolveAdapters(&docker); err != nil {
		t.Fatal(err)
	}
	twoPorts := []any{
		map[string]any{"name": "Ethernet0", "port_number": 0, "type": "access", "vlan": 1},
		map[string]any{"name": "Ethernet1", "port_number": 1, "type": "access", "vlan": 1},
	}
	for _, tc := range []struct {
		name    string
		cur     Node
		u       NodeUpdate
		check   func(t *testing.T, p nodePlan)
		wantErr error
	}{
		{name: "a move changes the position and calls no compute", cur: vpcs, u: NodeUpdate{X: ptr(10), Y: ptr(-20)},
			check: func(t *testing.T, p nodePlan) {
				want := vpcs
				want.X, want.Y = 10, -20
				if !reflect.DeepEqual(p.next, want) || p.respec != nil || p.ports != nil {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a rename to a taken name takes the next free one and resets the label's x", cur: pc5, u: NodeUpdate{Name: ptr("PC2")},
			check: func(t *testing.T, p nodePlan) {
				if p.next.Name != "PC3" || string(p.next.Label["text"]) != `"PC3"` || string(p.next.Label["x"]) != "null" || p.respec != nil {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a rename to an invalid name is refused", cur: vpcs, u: NodeUpdate{Name: ptr("R{0}{x}")}, wantErr: ErrConflict},
		{name: "another console port is refused", cur: vpcs, u: NodeUpdate{Console: ptr(6000)}, wantErr: ErrConflict},
		{name: "the same console port is accepted", cur: vpcs, u: NodeUpdate{Console: ptr(5000)},
			check: func(t *testing.T, p nodePlan) {
				if !reflect.DeepEqual(p.next, vpcs) {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a console type VPCS has not is refused", cur: vpcs, u: NodeUpdate{ConsoleType: ptr("vnc")}, wantErr: ErrInvalid},
		{name: "a VPCS may have no console", cur: vpcs, u: NodeUpdate{ConsoleType: ptr("none")},
			check: func(t *testing.T, p nodePlan) {
				if p.next.ConsoleType != "none" || p.next.Console != 0 {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a new symbol takes its size", cur: vpcs, u: NodeUpdate{Symbol: ptr(":/symbols/router.svg")},
			check: func(t *testing.T, p nodePlan) {
				if p.next.Symbol != ":/symbols/router.svg" || p.next.Width != 100 || p.next.Height != 50 {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a switch's new ports_mapping goes to its compute", cur: sw, u: NodeUpdate{Properties: map[string]any{"ports_mapping": twoPorts}},
			check: func(t *testing.T, p nodePlan) {
				if len(p.ports) != 2 || p.respec != nil || !reflect.DeepEqual(p.next.Properties["ports_mapping"], twoPorts) {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a switch's unchanged ports_mapping calls no compute", cur: sw, u: NodeUpdate{Properties: map[string]any{"ports_mapping": defaultPortsMapping(TypeSwitch)}},
			check: func(t *testing.T, p nodePlan) {
				if p.ports != nil || p.respec != nil {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a bad ports_mapping is refused", cur: sw, u: NodeUpdate{Properties: map[string]any{"ports_mapping": "eight"}}, wantErr: ErrInvalid},
		{name: "a docker node's changed property goes to its compute, alone", cur: docker,
			u: NodeUpdate{Properties: map[string]any{"start_command": "ash", "image": "alpine"}},
			check: func(t *testing.T, p nodePlan) {
				if p.respec == nil || !reflect.DeepEqual(p.respec.Properties, map[string]any{"start_command": "ash"}) || p.next.Properties["start_command"] != "ash" {
					t.Fatalf("plan %+v", p)
				}
			}},
		{name: "a docker node's unchanged properties call no compute", cur: docker, u: NodeUpdate{Properties: map[string]any{"image": "alpine"}, X: ptr(3)},
			check: func(t *testing.T, p nodePlan) {
				if p.respec != nil || p.next.X != 3 {
					t.Fatalf("plan %+v", p)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.cur)
			p, err := planNodeUpdate(tc.cur, tc.u, env)
			if after, _ := json.Marshal(tc.cur); string(after) != string(before) {
				t.Fatal("planning changed the current node")
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

func TestPlanLinkUpdate(t *testing.T) {
	cur := Link{ID: "l1", Endpoints: []Endpoint{{NodeID: "a", Label: Label{"text": json.RawMessage(`"e0"`)}}, {NodeID: "b"}},
		Filters: map[string][]any{}, Style: json.RawMessage(`{"color":"#000"}`)}
	hasNode := func(id string) bool { return id == "a" || id == "b" || id == "c" }
	newLabel := Label{"text": json.RawMessage(`"uplink"`)}
	for _, tc := range []struct {
		name     string
		u        LinkUpdate
		relay    bool
		announce int
		wantErr  error
		check    func(t *testing.T, next Link)
	}{
		{name: "nothing asked changes nothing", u: LinkUpdate{}},
		{name: "the same style and suspend change nothing", u: LinkUpdate{Style: cur.Style, Suspend: ptr(false)}},
		{name: "a new style is announced and calls no relay", u: LinkUpdate{Style: json.RawMessage(`{"color":"#f00"}`)}, announce: 1,
			check: func(t *testing.T, next Link) {
				if string(next.Style) != `{"color":"#f00"}` {
					t.Fatalf("style %s", next.Style)
				}
			}},
		{name: "new filters go to the relay", u: LinkUpdate{Filters: map[string][]any{"packet_loss": {10}}}, relay: true, announce: 1},
		{name: "suspend goes to the relay", u: LinkUpdate{Suspend: ptr(true)}, relay: true, announce: 1,
			check: func(t *testing.T, next Link) {
				if !next.Suspend {
					t.Fatal("not suspended")
				}
			}},
		{name: "labels are announced even when unchanged", u: LinkUpdate{Labels: []Endpoint{{NodeID: "a", Label: cur.Endpoints[0].Label}}}, announce: 1},
		{name: "a label of another node is ignored", u: LinkUpdate{Labels: []Endpoint{{NodeID: "c", Label: newLabel}}}, announce: 1,
			check: func(t *testing.T, next Link) {
				if !reflect.DeepEqual(next.Endpoints, cur.Endpoints) {
					t.Fatalf("endpoints %+v", next.Endpoints)
				}
			}},
		{name: "every step is announced once", announce: 4, relay: true, u: LinkUpdate{
			Filters: map[string][]any{"delay": {5}}, Style: json.RawMessage(`{}`), Suspend: ptr(true),
			Labels: []Endpoint{{NodeID: "b", Label: newLabel}}},
			check: func(t *testing.T, next Link) {
				if !reflect.DeepEqual(next.Endpoints[1].Label, newLabel) || !reflect.DeepEqual(next.Endpoints[0], cur.Endpoints[0]) {
					t.Fatalf("endpoints %+v", next.Endpoints)
				}
			}},
		{name: "a label naming no node of the project is refused", u: LinkUpdate{Style: json.RawMessage(`{}`), Labels: []Endpoint{{NodeID: "z", Label: newLabel}}}, wantErr: ErrNotFound},
		{name: "an unknown filter is refused", u: LinkUpdate{Filters: map[string][]any{"nope": {1}}}, wantErr: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planLinkUpdate(cur, tc.u, hasNode)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.relay != tc.relay || p.announce != tc.announce {
				t.Fatalf("relay %v announce %d, want %v %d", p.relay, p.announce, tc.relay, tc.announce)
			}
			if tc.check != nil {
				tc.check(t, p.next)
			}
		})
	}
}
