package api_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/proto"
)

// cloud3 is a third cloud node.
const cloud3 = "abababab-0000-4000-8000-0000000000c3"

// hostVeth makes a network namespace of the test's own whose eth0, with
// address subnet+"2", is wired by a veth pair to an interface of the
// test's namespace (the agent's), which it returns with subnet
// ("10.x.y."). Both are removed when the test ends, whatever it reached.
func hostVeth(t *testing.T) (iface, subnet string) {
	t.Helper()
	return hostVethNamed(t, "")
}

// hostVethNamed is hostVeth with the host end named iface ("": a name of
// the test's).
func hostVethNamed(t *testing.T, name string) (iface, subnet string) {
	t.Helper()
	testenv.Long(t, "network namespaces")
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "ip (iproute2) is not installed")
	}
	var r [3]byte
	rand.Read(r[:])
	prefix := "ltc" + hex.EncodeToString(r[:2])
	iface, ns := prefix+"h", prefix+"n"
	if name != "" {
		iface = name
	}
	for i := 0; ; i++ {
		subnet = fmt.Sprintf("10.%d.%d.", 200+int(r[2])%50, (int(r[0])+i)%256)
		out, _ := exec.Command("ip", "-4", "-o", "addr").Output()
		if !strings.Contains(string(out), " "+subnet) {
			break
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", iface).Run()
		exec.Command("ip", "netns", "del", ns).Run()
	})
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", fmt.Sprintf("cannot make a network namespace here: %v: %s", err, out))
	}
	for _, args := range [][]string{
		{"link", "add", iface, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", ns, "addr", "add", subnet + "2/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"link", "set", iface, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return iface, subnet
}

// arpRequest is who-has ip, from mac at from, broadcast.
func arpRequest(t *testing.T, mac net.HardwareAddr, from, ip string) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: mac, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: mac, SourceProtAddress: net.ParseIP(from).To4(),
			DstHwAddress: make([]byte, 6), DstProtAddress: net.ParseIP(ip).To4()},
	)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestACloudsEthernetPortRelaysAHostInterfaceToItsLink(t *testing.T) {
	iface, subnet := hostVeth(t)
	a := newAgent(t)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	eth := func(id, name string) proto.NodeSpec {
		return proto.NodeSpec{NodeID: id, NodeType: host.TypeCloud, Name: name, Ports: []proto.PortMapping{
			{Name: iface, Type: proto.PortEthernet, Interface: iface},
		}}
	}
	a.must("PUT", proto.NodePath(projectID, cloud1), eth(cloud1, "Cloud1"), nil, 200)
	// Cloud 2's UDP port is the test's end of the wire.
	y, l2 := newUDPEnd(t), testenv.UnusedUDPPort(t)
	a.must("PUT", proto.NodePath(projectID, cloud2), proto.NodeSpec{NodeType: host.TypeCloud, Name: "Cloud2", Ports: []proto.PortMapping{
		{Name: "UDP tunnel 1", Type: proto.PortUDP, LocalPort: l2, RemoteHost: "127.0.0.1", RemotePort: y.port()},
	}}, nil, 200)
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: cloud1}, B: proto.Endpoint{NodeID: cloud2},
	}, nil, 204)
	// An ARP request goes out of the interface; the namespace's reply
	// comes back through the link.
	mac := net.HardwareAddr{0x02, 0, 0x5e, 0x10, 0, 1}
	to := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", l2))
	deadline := time.Now().Add(arrive)
	for {
		if _, err := y.conn.WriteToUDPAddrPort(arpRequest(t, mac, subnet+"1", subnet+"2"), to); err != nil {
			t.Fatal(err)
		}
		got, _ := y.recv(time.Second)
		if got != nil {
			p := gopacket.NewPacket(got, layers.LayerTypeEthernet, gopacket.Default)
			if arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok && arp.Operation == layers.ARPReply &&
				net.IP(arp.SourceProtAddress).String() == subnet+"2" && net.HardwareAddr(arp.DstHwAddress).String() == mac.String() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ARP reply from %s2 through the cloud on %s", subnet, iface)
		}
	}
	// The interface is cloud 1's: another cloud is refused it until cloud
	// 1 is deleted.
	var e proto.Error
	if got := a.do("PUT", proto.NodePath(projectID, cloud3), eth(cloud3, "Cloud3"), &e); got != 409 || !strings.Contains(e.Message, iface) {
		t.Fatalf("a second cloud on %s: %d %+v, want 409 naming it", iface, got, e)
	}
	a.must("DELETE", proto.LinkPath(projectID, linkID), nil, nil, 204)
	a.must("DELETE", proto.NodePath(projectID, cloud1), nil, nil, 204)
	a.must("PUT", proto.NodePath(projectID, cloud3), eth(cloud3, "Cloud3"), nil, 200)
}

// TestACloudsEthernetPortIsRefusedTheAgentsAddressUnlessAllowed: an
// interface holding an address the agent is reached at is its uplink.
func TestACloudsEthernetPortIsRefusedTheAgentsAddressUnlessAllowed(t *testing.T) {
	iface, subnet := hostVeth(t)
	if out, err := exec.Command("ip", "addr", "add", subnet+"1/24", "dev", iface).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	spec := proto.NodeSpec{NodeType: host.TypeCloud, Name: "Cloud1", Ports: []proto.PortMapping{{Name: "e0", Type: proto.PortEthernet, Interface: iface}}}
	addr := netip.MustParseAddr(subnet + "1")
	a := newAgentWith(t, host.Config{AgentAddrs: []netip.Addr{addr}})
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	var e proto.Error
	if got := a.do("PUT", proto.NodePath(projectID, cloud1), spec, &e); got != 409 || !strings.Contains(e.Message, host.AllowUplinkFlag) || !strings.Contains(e.Message, iface) {
		t.Fatalf("a cloud on the agent's address: %d %+v, want 409 naming %s and %s", got, e, iface, host.AllowUplinkFlag)
	}
	b := newAgentWith(t, host.Config{AgentAddrs: []netip.Addr{addr}, CloudAllowUplink: true})
	b.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	b.must("PUT", proto.NodePath(projectID, cloud1), spec, nil, 200)
}

// TestACloudsEthernetPortIsRefusedADockerNodesVeth: the host end of a
// docker node's adapter (lt and twelve hex digits) belongs to the node.
func TestACloudsEthernetPortIsRefusedADockerNodesVeth(t *testing.T) {
	var r [6]byte
	rand.Read(r[:])
	iface, _ := hostVethNamed(t, "lt"+hex.EncodeToString(r[:]))
	a := newAgent(t)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	var e proto.Error
	spec := proto.NodeSpec{NodeType: host.TypeCloud, Name: "Cloud1", Ports: []proto.PortMapping{{Name: "e0", Type: proto.PortEthernet, Interface: iface}}}
	if got := a.do("PUT", proto.NodePath(projectID, cloud1), spec, &e); got != 409 || !strings.Contains(e.Message, "docker node") {
		t.Fatalf("a cloud on %s: %d %+v, want 409 naming the docker node", iface, got, e)
	}
}
