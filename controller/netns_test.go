package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// A lab across real network hosts: the test makes three network
// namespaces, a switch (a bridge) and two hosts wired to it with veth
// pairs, and joins the test's own namespace to the switch too. The
// controller runs here, one agent in each host. Cutting a host's cable
// is a real partition: nothing reaches it, not the controller's calls nor
// the other agent's tunnel frames.

// netLab is the namespaces and links of such a lab, removed when the
// test ends.
type netLab struct {
	t      *testing.T
	prefix string // of every name the lab makes, so nothing collides
	subnet string // "10.x.y."
}

func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "ip (iproute2) is not installed")
	}
	var r [3]byte
	rand.Read(r[:])
	l := &netLab{t: t, prefix: "lt" + hex.EncodeToString(r[:2])}
	// A /24 in 10.200.0.0–10.249.255.0 that no interface here uses.
	for i := 0; ; i++ {
		l.subnet = fmt.Sprintf("10.%d.%d.", 200+int(r[2])%50, (int(r[0])+i)%256)
		out, _ := exec.Command("ip", "-4", "-o", "addr").Output()
		if !strings.Contains(string(out), " "+l.subnet) {
			break
		}
	}
	t.Cleanup(l.remove)
	sw := l.ns("sw")
	// Root in a container without CAP_NET_ADMIN cannot.
	if out, err := exec.Command("ip", "netns", "add", sw).CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", fmt.Sprintf("cannot make a network namespace here: %v: %s", err, out))
	}
	l.ip("-n", sw, "link", "add", "br0", "type", "bridge")
	l.ip("-n", sw, "link", "set", "br0", "up")
	// This namespace's cable: the controller listens on .1.
	l.ip("link", "add", l.prefix+"h", "type", "veth", "peer", "name", l.prefix+"hp", "netns", sw)
	l.ip("addr", "add", l.subnet+"1/24", "dev", l.prefix+"h")
	l.ip("link", "set", l.prefix+"h", "up")
	l.plug(l.prefix + "hp")
	return l
}

func (l *netLab) ns(name string) string { return l.prefix + name }

// ip runs ip(8) and fails the test if it fails.
func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// plug attaches a switch-side port to the bridge and brings it up.
func (l *netLab) plug(port string) {
	l.t.Helper()
	l.ip("-n", l.ns("sw"), "link", "set", port, "master", "br0")
	l.ip("-n", l.ns("sw"), "link", "set", port, "up")
}

// host makes namespace name wired to the switch with address subnet+n,
// its switch port named prefix+name+"p", and returns the namespace.
func (l *netLab) host(name string, n int) string {
	l.t.Helper()
	ns := l.ns(name)
	l.ip("netns", "add", ns)
	l.ip("-n", ns, "link", "set", "lo", "up")
	l.ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", l.port(name), "netns", l.ns("sw"))
	l.ip("-n", ns, "addr", "add", fmt.Sprint(l.subnet, n, "/24"), "dev", "eth0")
	l.ip("-n", ns, "link", "set", "eth0", "up")
	l.plug(l.port(name))
	return ns
}

// port is the switch port of host name.
func (l *netLab) port(name string) string { return l.prefix + name + "p" }

// cable sets the switch port of host name up or down.
func (l *netLab) cable(name string, up bool) {
	l.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	l.ip("-n", l.ns("sw"), "link", "set", l.port(name), state)
}

// remove deletes what the lab made. Deleting a namespace deletes its
// links, and a veth goes with its peer.
func (l *netLab) remove() {
	exec.Command("ip", "link", "del", l.prefix+"h").Run()
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, l.prefix) {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

func TestALinkAcrossTwoHostsInNetworkNamespacesSurvivesAPartition(t *testing.T) {
	testenv.Long(t, "network namespaces and labtap's binaries")
	testenv.RequireTools(t, "vpcs", "tshark", "capinfos")
	lab := newNetLab(t)
	h1, h2 := lab.host("a1", 2), lab.host("a2", 3)
	// Agents joined over the hosts' network, called over mutual TLS.
	c, _ := startTLSController(t, nil, "--listen", lab.subnet+"1:0")
	caSHA := caLine.FindStringSubmatch(c.log.String())[1]
	a1 := startJoinedAgentUnder(t, []string{"ip", "netns", "exec", h1}, c, "agent1", lab.subnet+"2", c.joinToken(), caSHA)
	startJoinedAgentUnder(t, []string{"ip", "netns", "exec", h2}, c, "agent2", lab.subnet+"3", c.joinToken(), caSHA)
	if cp := c.waitCompute("agent1", true, 20*time.Second); cp.Host != lab.subnet+"2" {
		t.Fatalf("agent1 registered as %+v", cp)
	}
	c.waitCompute("agent2", true, 20*time.Second)

	pl := c.twoPCs("two-namespaces", "agent1", "agent2", "192.168.7.1", "192.168.7.2")
	base, pcs, link := pl.base, pl.pcs, pl.link
	linkPath := base + "/links/" + link.LinkID
	for i, p := range pcs {
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		if want := fmt.Sprint(lab.subnet, i+2); p.node.ConsoleHost != want {
			t.Fatalf("PC%d's console is on %q, want its host's address %s", i+1, p.node.ConsoleHost, want)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	setAddresses(t, pcs)

	var started linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, &started)
	if !started.Capturing || deref(started.CaptureComputeID) != "agent1" {
		t.Fatalf("start_capture: %+v", started)
	}
	pcapPath := deref(started.CaptureFilePath)
	before := pcs[0].ping(t, pcs[1].ip, 3)
	if before < 2 {
		t.Fatalf("%d of 3 pings answered across the namespaces", before)
	}

	// agent1's host loses its cable: the controller loses it, and the link
	// says nobody can tell the capture still runs. The PCs cannot reach
	// each other either: the tunnel crosses the same switch.
	notes := c.follow(pl.projectID)
	lab.cable("a1", false)
	cut := notes.linkUpdated(t, link.LinkID, 20*time.Second, func(l linkReply) bool { return !l.Capturing })
	if deref(cut.CaptureFilePath) != pcapPath {
		t.Fatalf("link while agent1 is cut off: %+v", cut)
	}
	c.waitCompute("agent1", false, 5*time.Second)
	if n := pcs[1].ping(t, pcs[0].ip, 1); n != 0 {
		t.Fatalf("%d pings answered through a cut cable", n)
	}

	// The cable is back: agent1 is found still writing the same file.
	lab.cable("a1", true)
	back := notes.linkUpdated(t, link.LinkID, 30*time.Second, func(l linkReply) bool { return l.Capturing })
	if deref(back.CaptureComputeID) != "agent1" || deref(back.CaptureFilePath) != pcapPath {
		t.Fatalf("link once agent1 is reachable again: %+v", back)
	}
	after := pcs[1].ping(t, pcs[0].ip, 3)
	if after < 2 {
		t.Fatalf("%d of 3 pings answered once the cable was back", after)
	}
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)

	// The agent wrote the file in its own namespace, on the shared file
	// system: tshark reads it here. Every request and reply that was
	// answered is in it.
	if _, err := os.Stat(pcapPath); err != nil || !strings.HasPrefix(pcapPath, a1.data) {
		t.Fatalf("capture file %s (agent1's data %s): %v", pcapPath, a1.data, err)
	}
	if n := tsharkCount(t, pcapPath, "icmp.type == 0"); n < before+after {
		t.Fatalf("capture holds %d ICMP replies, the PCs saw %d", n, before+after)
	}
	if out, err := exec.Command("capinfos", pcapPath).CombinedOutput(); err != nil || strings.Contains(string(out), "cut short") {
		t.Fatalf("capinfos: %v\n%s", err, out)
	}
}
