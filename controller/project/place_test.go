package project

import (
	"strings"
	"testing"
)

func room(cpus int, availGiB int64, nodes int, kvm bool) *Room {
	return &Room{CPUs: cpus, MemoryTotal: 16 << 30, MemoryAvailable: availGiB << 30, DiskFree: 100 << 30, Nodes: nodes, KVM: kvm}
}

func TestPlaceChoosesByPolicyRoomAndTheProjectsCompute(t *testing.T) {
	all := []string{"vpcs", TypeQemu, TypeDocker}
	c := func(id string, r *Room) ComputeRoom {
		return ComputeRoom{ID: id, Connected: true, NodeTypes: all, Room: r}
	}
	tests := []struct {
		name       string
		rooms      []ComputeRoom
		req        placeRequest
		want, why  string
		wantRefuse string
	}{
		{"spread: the fewest nodes per CPU", []ComputeRoom{c("a", room(2, 8, 4, false)), c("b", room(8, 8, 8, false))},
			placeRequest{nodeType: "vpcs"}, "b", "spread", ""},
		{"spread: the controller's count when the agent's report lags", []ComputeRoom{c("a", room(2, 8, 0, false)), c("b", room(2, 8, 0, false))},
			placeRequest{nodeType: "vpcs", held: map[string]int{"a": 3}}, "b", "spread", ""},
		{"spread: a tie goes to the most memory available", []ComputeRoom{c("a", room(2, 4, 0, false)), c("b", room(2, 8, 0, false))},
			placeRequest{nodeType: "vpcs"}, "b", "spread", ""},
		{"pack: the fullest with room", []ComputeRoom{c("a", room(2, 8, 0, false)), c("b", room(2, 8, 6, false))},
			placeRequest{policy: PlacePack, nodeType: "vpcs"}, "b", "pack", ""},
		{"pack: the first registered at first", []ComputeRoom{c("a", room(2, 8, 0, false)), c("b", room(2, 8, 0, false))},
			placeRequest{policy: PlacePack, nodeType: "vpcs"}, "a", "pack", ""},
		{"a project's nodes stay together (no tunnel between them)", []ComputeRoom{c("a", room(2, 8, 40, false)), c("b", room(2, 8, 0, false))},
			placeRequest{nodeType: "vpcs", mine: map[string]int{"a": 3}}, "a", "project's nodes", ""},
		{"a project's compute without room: the policy's", []ComputeRoom{c("a", room(2, 1, 40, false)), c("b", room(2, 8, 0, false)), c("c", room(2, 8, 2, false))},
			placeRequest{nodeType: TypeQemu, need: 1 << 30, mine: map[string]int{"a": 3}}, "b", "spread", ""},
		{"QEMU where KVM runs", []ComputeRoom{c("a", room(2, 8, 0, false)), c("b", room(2, 8, 9, true))},
			placeRequest{nodeType: TypeQemu, need: 256 << 20}, "b", "spread", ""},
		{"not connected, draining, not running the type: skipped; a busy CPU is a moment's, not a refusal", []ComputeRoom{
			{ID: "off", NodeTypes: all, Room: room(64, 8, 0, false)},
			{ID: "drain", Connected: true, Draining: true, NodeTypes: all, Room: room(64, 8, 0, false)},
			{ID: "novpcs", Connected: true, NodeTypes: []string{TypeQemu}, Room: room(64, 8, 0, false)},
			c("ok", room(1, 8, 50, false)),
			{ID: "busy", Connected: true, CPUPercent: 100, NodeTypes: all, Room: room(64, 8, 60, false)}},
			placeRequest{nodeType: "vpcs"}, "busy", "spread", ""},
		{"no room anywhere: refused with each reason", []ComputeRoom{c("a", room(2, 1, 0, false)), {ID: "b", NodeTypes: all}},
			placeRequest{nodeType: TypeQemu, need: 2 << 30}, "", "", "No compute can take a qemu node (a: 1.0 GiB of memory available, 2.0 GiB needed and a tenth kept; b: not connected)"},
		{"disk full: refused", []ComputeRoom{c("a", &Room{CPUs: 2, MemoryTotal: 8 << 30, MemoryAvailable: 8 << 30, DiskFree: 1 << 20})},
			placeRequest{nodeType: "vpcs"}, "", "", "a: 0.0 GiB of disk free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.held == nil {
				tt.req.held = map[string]int{}
			}
			if tt.req.mine == nil {
				tt.req.mine = map[string]int{}
			}
			d, err := place(tt.rooms, tt.req)
			if tt.wantRefuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantRefuse) {
					t.Fatalf("placed on %q (%v), want refused: %s", d.compute, err, tt.wantRefuse)
				}
				return
			}
			if err != nil || d.compute != tt.want || !strings.Contains(d.why, tt.why) {
				t.Fatalf("placed on %q (%s; %v), want %q (%s); considered %v", d.compute, d.why, err, tt.want, tt.why, d.considered)
			}
		})
	}
}
