package project

import (
	"errors"
	"github.com/labtap/labtap/capspec"
	"strings"
	"testing"
)

func TestSwitchesAndHubsGetGNS3sDefaultPorts(t *testing.T) {
	f := newFixture(t)
	sw := f.nodeOf(t, TypeSwitch, "Switch1", nil)
	hub := f.nodeOf(t, TypeHub, "Hub1", nil)
	for _, n := range []Node{sw, hub} {
		ports := n.Ports()
		if len(ports) != 8 || ports[7].Name != "Ethernet7" || ports[7].PortNumber != 7 || ports[7].ShortName != "e7" {
			t.Fatalf("%s ports %+v", n.Type, ports)
		}
		if n.Status != Started {
			t.Fatalf("%s is always running, status %q", n.Type, n.Status)
		}
		if n.MACIndex != -1 {
			t.Fatalf("%s took a MAC index", n.Type)
		}
	}
	if got := f.computes.specs[sw.ID].Ports; len(got) != 8 || got[0].Type != "access" || got[0].VLAN != 1 {
		t.Fatalf("the agent got switch ports %+v", got)
	}
}

func TestPortsMappingIsChecked(t *testing.T) {
	f := newFixture(t)
	bad := []struct {
		typ     string
		mapping any
	}{
		{TypeSwitch, "eight"},
		{TypeSwitch, []any{map[string]any{"name": "e0", "port_number": 0, "type": "isl", "vlan": 1}}},
		{TypeSwitch, []any{map[string]any{"name": "e0", "port_number": 0, "type": "qinq", "vlan": 1, "ethertype": "0x0800"}}},
		{TypeSwitch, []any{map[string]any{"name": "e0", "port_number": 0, "type": "access", "vlan": 5000.0}}},
		{TypeSwitch, []any{map[string]any{"name": "e0", "type": "access"}, map[string]any{"name": "e0", "type": "access"}}},
		{TypeHub, []any{map[string]any{"name": "e0", "type": "access"}}},
		{TypeCloud, []any{map[string]any{"name": "eth0", "port_number": 0, "type": "tap", "interface": "eth0"}}},
		{TypeCloud, []any{map[string]any{"name": "eth0", "port_number": 0, "type": "ethernet"}}},
		{TypeCloud, []any{map[string]any{"name": "eth0", "port_number": 0, "type": "ethernet", "interface": "a-name-longer-than-ifnamsiz"}}},
		{TypeCloud, []any{map[string]any{"name": "eth0", "port_number": 0, "type": "ethernet", "interface": "../eth0"}}},
		{TypeCloud, []any{map[string]any{"name": "eth0", "port_number": 0, "type": "ethernet", "interface": 7.0}}},
		{TypeCloud, []any{map[string]any{"name": "u", "type": "udp", "lport": 0.0, "rhost": "127.0.0.1", "rport": 9.0}}},
		{TypeCloud, []any{map[string]any{"name": "u", "type": "udp", "lport": 9.0, "rport": 9.0}}},
	}
	for _, b := range bad {
		req := NewNodeCreate()
		req.ComputeID, req.Type, req.Name = "local", b.typ, "X"
		req.Properties = map[string]any{"ports_mapping": b.mapping}
		if _, err := f.svc.Nodes.Create(t.Context(), f.project.ID, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s with %v: %v, want invalid", b.typ, b.mapping, err)
		}
	}
	if nodes, _ := f.svc.Nodes.List(f.project.ID); len(nodes) != 0 {
		t.Fatalf("refused nodes were created: %d", len(nodes))
	}
}

// TestACloudsEthernetPortReachesTheAgentWithItsInterface: GNS3's cloud
// dialog sends ports of type "ethernet" naming a host interface.
func TestACloudsEthernetPortReachesTheAgentWithItsInterface(t *testing.T) {
	f := newFixture(t)
	n := f.nodeOf(t, TypeCloud, "Cloud1", map[string]any{"ports_mapping": []any{map[string]any{
		"name": "eth1", "port_number": 0.0, "type": "ethernet", "interface": "eth1",
	}}})
	if got := f.computes.specs[n.ID].Ports; len(got) != 1 || got[0].Type != "ethernet" || got[0].Interface != "eth1" {
		t.Fatalf("the agent got cloud ports %+v", got)
	}
}

func udpCloud(lport int) map[string]any {
	return map[string]any{"ports_mapping": []any{map[string]any{
		"name": "UDP tunnel 1", "port_number": 0.0, "type": "udp", "lport": float64(lport), "rhost": "127.0.0.1", "rport": float64(lport + 1),
	}}}
}

func TestTwoCloudsCanBeLinkedThroughTheirUDPPorts(t *testing.T) {
	// GNS3 refuses cloud↔cloud; labtap allows it between UDP ports.
	f := newFixture(t)
	a, b := f.nodeOf(t, TypeCloud, "Gen", udpCloud(40000)), f.nodeOf(t, TypeCloud, "Sink", udpCloud(40010))
	if p := a.Ports(); len(p) != 1 || p[0].ShortName != "UDP tunnel 1" {
		t.Fatalf("cloud ports %+v", p)
	}
	l := f.link(t, a, b)
	if !l.Wired {
		t.Fatal("cloud-cloud link not wired")
	}
	if got := f.computes.specs[a.ID].Ports[0]; got.LocalPort != 40000 || got.RemotePort != 40001 || got.Type != "udp" {
		t.Fatalf("the agent got cloud port %+v", got)
	}
}

// TestACloudOnAHostInterfaceCannotBeLinkedToACloud keeps GNS3's 409 for
// clouds where a port is a host interface: only UDP ports may be patched.
func TestACloudOnAHostInterfaceCannotBeLinkedToACloud(t *testing.T) {
	f := newFixture(t)
	eth := f.nodeOf(t, TypeCloud, "Eth", map[string]any{"ports_mapping": []any{map[string]any{
		"name": "eth1", "port_number": 0.0, "type": "ethernet", "interface": "eth1",
	}}})
	udp := f.nodeOf(t, TypeCloud, "Gen", udpCloud(40000))
	_, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: udp.ID}, {NodeID: eth.ID}}})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "Connecting a cloud to a cloud is not allowed") {
		t.Fatalf("udp cloud to ethernet cloud: %v, want GNS3's 409", err)
	}
	pc := f.node(t, "PC1")
	if l := f.link(t, pc, eth); !l.Wired {
		t.Fatal("PC to a host-interface cloud not wired")
	}
}

func TestCaptureOnASwitchLinkRunsOnTheSwitchSide(t *testing.T) {
	f := newFixture(t)
	pc, sw := f.node(t, "PC1"), f.nodeOf(t, TypeSwitch, "SW1", nil)
	l, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: pc.ID}, {NodeID: sw.ID, Port: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	// The PC is stopped, the switch always runs: it can capture.
	got, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{Format: capspec.FormatPcapng})
	if err != nil || got.Capture.Side != 1 || got.Capture.FileName != "PC1_0-0_to_SW1_0-3.pcapng" {
		t.Fatalf("capture %+v, %v", got.Capture, err)
	}
	if f.computes.captures[l.ID].Format != capspec.FormatPcapng {
		t.Fatalf("the agent got format %q", f.computes.captures[l.ID].Format)
	}
	// Stopping the PC does not stop a capture that depends on the switch.
	f.svc.Nodes.Start(t.Context(), f.project.ID, pc.ID)
	f.svc.Nodes.Stop(t.Context(), f.project.ID, pc.ID)
	if l, _ := f.svc.Links.Get(f.project.ID, l.ID); !l.Capture.Active {
		t.Fatal("the capture stopped with the PC")
	}
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, "nope", capspec.Spec{}); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

func TestChangingASwitchsPortsKeepsItsLinksWhenTheCountStays(t *testing.T) {
	f := newFixture(t)
	pc, sw := f.node(t, "PC1"), f.nodeOf(t, TypeSwitch, "SW1", nil)
	f.link(t, pc, sw)
	mapping := defaultPortsMapping(TypeSwitch)
	mapping[0].(map[string]any)["vlan"] = 10
	n, err := f.svc.Nodes.Update(t.Context(), f.project.ID, sw.ID, NodeUpdate{Properties: map[string]any{"ports_mapping": mapping}})
	if err != nil || f.computes.specs[sw.ID].Ports[0].VLAN != 10 {
		t.Fatalf("VLAN change: %v, agent %+v", err, f.computes.specs[sw.ID].Ports[0])
	}
	if len(n.Ports()) != 8 {
		t.Fatalf("ports after the change: %d", len(n.Ports()))
	}
	// Fewer ports while linked: refused, nothing changes.
	_, err = f.svc.Nodes.Update(t.Context(), f.project.ID, sw.ID, NodeUpdate{Properties: map[string]any{"ports_mapping": mapping[:4]}})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "links") {
		t.Fatalf("port count change with a link: %v", err)
	}
	if got, _ := f.svc.Nodes.Get(f.project.ID, sw.ID); len(got.Ports()) != 8 {
		t.Fatal("a refused change changed the ports")
	}
	// Without links it is rebuilt.
	hub := f.nodeOf(t, TypeHub, "HUB1", nil)
	n, err = f.svc.Nodes.Update(t.Context(), f.project.ID, hub.ID, NodeUpdate{Properties: map[string]any{"ports_mapping": defaultPortsMapping(TypeHub)[:2]}})
	if err != nil || len(n.Ports()) != 2 || len(f.computes.specs[hub.ID].Ports) != 2 {
		t.Fatalf("hub rebuilt: %v, %d ports", err, len(n.Ports()))
	}
}

func TestBuiltinTemplatesOfEveryTypeWeRun(t *testing.T) {
	want := map[string]string{ // GNS3 2.2's built-in template ids
		TypeCloud: "39e257dc-8412-3174-b6b3-0ee3ed6a43e9", "vpcs": "19021f99-e36f-394d-b4a1-8aaa902ab9cc",
		TypeSwitch: "1966b864-93e7-32d5-965f-001384eec461", TypeHub: "b4503ea9-d6b6-3695-9fe4-1db3b39290b0",
	}
	got := builtinTemplates()
	if len(got) != len(want) {
		t.Fatalf("%d templates, want %d", len(got), len(want))
	}
	for _, tpl := range got {
		if tpl.ID != want[tpl.Type] {
			t.Errorf("%s: id %s, want %s", tpl.Type, tpl.ID, want[tpl.Type])
		}
	}
	f := newFixture(t)
	n, err := f.svc.Templates.CreateNode(t.Context(), f.project.ID, want[TypeSwitch], FromTemplate{ComputeID: "local"})
	if err != nil || n.Name != "Switch1" || len(n.Ports()) != 8 || n.Symbol != ":/symbols/ethernet_switch.svg" {
		t.Fatalf("switch from template: %+v, %v", n, err)
	}
}

// TestACaptureStartCarriesItsProjectsDiskBudgetNotTheClients: the agent
// gets the project's capture_disk_budget with each capture's start, in
// place of whatever budget the client's body held.
func TestACaptureStartCarriesItsProjectsDiskBudgetNotTheClients(t *testing.T) {
	f := newFixture(t)
	pc, sw := f.node(t, "PC1"), f.nodeOf(t, TypeSwitch, "SW1", nil)
	l, err := f.svc.Links.Create(t.Context(), f.project.ID, LinkCreate{Endpoints: []Endpoint{{NodeID: pc.ID}, {NodeID: sw.ID, Port: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(5 << 20)
	if _, err := f.svc.UpdateProject(t.Context(), f.project.ID, ProjectUpdate{SettingsUpdate: SettingsUpdate{CaptureDiskBudget: &budget}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{ProjectBudget: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	if got := f.computes.captures[l.ID].ProjectBudget; got != budget {
		t.Fatalf("the agent got a project budget of %d, want the project's %d", got, budget)
	}
}
