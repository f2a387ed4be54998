package project

import "testing"

// TestAVPCSWithoutAConsoleHasNoPort: the compute runs a VPCS with its
// telnet console whatever the node's console_type; a VPCS set to none
// shows no port (GNS3), gets it back when set to telnet, and keeps the
// type its file or client gave through every report of its compute.
func TestAVPCSWithoutAConsoleHasNoPort(t *testing.T) {
	rt := NodeRuntime{Status: Started, Console: 5004, ConsoleType: "telnet"}
	n := Node{Type: "vpcs", ConsoleType: "none"}
	n.applyRuntime(rt)
	if n.ConsoleType != "none" || n.Console != 0 {
		t.Fatalf("VPCS with console none after its compute's report: %q port %d", n.ConsoleType, n.Console)
	}
	plan, err := planNodeUpdate(n, NodeUpdate{ConsoleType: new("telnet")}, nodePlanEnv{})
	if err != nil || plan.next.ConsoleType != "telnet" || plan.next.Console != 5004 {
		t.Fatalf("back to telnet: %+v %v", plan.next, err)
	}
	sw := Node{Type: TypeSwitch, ConsoleType: "telnet"}
	sw.applyRuntime(NodeRuntime{Status: Started, ConsoleType: "none"})
	if sw.ConsoleType != "telnet" {
		t.Fatalf("switch with a telnet console after its compute's report: %q", sw.ConsoleType)
	}
	fresh := Node{Type: "vpcs"} // none asked for: the compute's
	fresh.applyRuntime(rt)
	if fresh.ConsoleType != "telnet" || fresh.Console != 5004 {
		t.Fatalf("new VPCS: %q port %d", fresh.ConsoleType, fresh.Console)
	}
}
