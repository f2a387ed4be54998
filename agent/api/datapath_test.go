package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"errors"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/proto"
)

var (
	macA = net.HardwareAddr{0x00, 0x50, 0x79, 0x66, 0x68, 0x01}
	macB = net.HardwareAddr{0x00, 0x50, 0x79, 0x66, 0x68, 0x02}
	ipA  = net.IP{10, 0, 0, 1}
	ipB  = net.IP{10, 0, 0, 2}
)

// icmpFrame builds an Ethernet/IPv4/ICMP echo frame (typ 8 request, 0 reply).
func icmpFrame(t *testing.T, src, dst net.HardwareAddr, sip, dip net.IP, typ uint8, seq uint16) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: sip, DstIP: dip}
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: 1, Seq: seq}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, icmp, gopacket.Payload(bytes.Repeat([]byte{0xab}, 56))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// arpFrame builds a broadcast ARP request.
func arpFrame(t *testing.T, src net.HardwareAddr, sip, dip net.IP) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: src, SourceProtAddress: sip, DstHwAddress: make([]byte, 6), DstProtAddress: dip}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, arp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// passes sends frame from one fake node across the link and reports
// whether the relay forwarded it to the other, which must then get it
// whole. The relay's counters of that direction say when it has forwarded
// or dropped the frame, so a dropped frame costs no fixed wait.
func (a *agent) passes(from, to string, frame []byte) bool {
	a.t.Helper()
	dir := 0 // from A to B
	if from == nodeB {
		dir = 1
	}
	before := a.counters(dir)
	if err := a.fake(from).Send(frame); err != nil {
		a.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	now := a.counters(dir)
	for now.Forwarded == before.Forwarded && now.Filtered == before.Filtered {
		if time.Now().After(deadline) {
			a.t.Fatalf("the relay neither forwarded nor dropped the frame: %+v", now)
		}
		time.Sleep(time.Millisecond)
		now = a.counters(dir)
	}
	if now.Forwarded == before.Forwarded {
		return false
	}
	got, err := a.fake(to).Recv(arrive)
	if err != nil {
		a.t.Fatalf("the relay forwarded a frame that did not arrive: %v", err)
	}
	if !bytes.Equal(got, frame) {
		a.t.Fatalf("a frame arrived changed, or late: %x, want %x", got, frame)
	}
	return true
}

// counters are the link's counters of one direction.
func (a *agent) counters(dir int) proto.LinkCounters {
	a.t.Helper()
	var st proto.LinkState
	a.must("GET", proto.LinkPath(projectID, linkID), nil, &st, 200)
	return st.Directions[dir]
}

// mustPass and mustDrop check that a frame crosses the link, or not.
func (a *agent) mustPass(from, to string, frame []byte, why string) {
	a.t.Helper()
	if !a.passes(from, to, frame) {
		a.t.Fatalf("%s: the frame was dropped", why)
	}
}

func (a *agent) mustDrop(from, to string, frame []byte, why string) {
	a.t.Helper()
	if a.passes(from, to, frame) {
		a.t.Fatalf("%s: the frame crossed the link", why)
	}
}

func (a *agent) putLink(spec proto.LinkSpec, want int) proto.Error {
	a.t.Helper()
	if spec.A.NodeID == "" {
		spec.A, spec.B = proto.Endpoint{NodeID: nodeA}, proto.Endpoint{NodeID: nodeB}
	}
	var e proto.Error
	if got := a.do("PUT", proto.LinkPath(projectID, linkID), spec, &e); got != want {
		a.t.Fatalf("PUT link %+v = %d %+v, want %d", spec.Filters, got, e, want)
	}
	return e
}

func intp(v int) *int { return &v }

func TestLinkFiltersAreSetByPUTAndAppliedAtOnce(t *testing.T) {
	a := linked(t)
	request := icmpFrame(t, macA, macB, ipA, ipB, 8, 1)
	reply := icmpFrame(t, macB, macA, ipB, ipA, 0, 1)
	arp := arpFrame(t, macA, ipA, ipB)

	// bpf, compiled by libpcap: echo requests are dropped, in both
	// directions; everything else passes.
	a.putLink(proto.LinkSpec{Filters: proto.Filters{BPF: []string{"icmp[icmptype] == 8"}}}, 204)
	a.mustDrop(nodeA, nodeB, request, "bpf icmp[icmptype] == 8, echo request")
	a.mustPass(nodeA, nodeB, arp, "bpf icmp[icmptype] == 8, ARP")
	a.mustPass(nodeB, nodeA, reply, "bpf icmp[icmptype] == 8, echo reply")
	a.mustDrop(nodeB, nodeA, icmpFrame(t, macB, macA, ipB, ipA, 8, 2), "bpf icmp[icmptype] == 8, echo request from B")
	// Lines are ORed; blank lines are ignored (they would drop everything).
	a.putLink(proto.LinkSpec{Filters: proto.Filters{BPF: []string{"icmp[icmptype] == 8\n\n  arp  \n"}}}, 204)
	a.mustDrop(nodeA, nodeB, arp, "two bpf lines, ARP")
	a.mustDrop(nodeA, nodeB, request, "two bpf lines, echo request")
	a.mustPass(nodeB, nodeA, reply, "two bpf lines, echo reply")

	// A bad expression is refused with libpcap's message, and the chain in
	// place stays.
	e := a.putLink(proto.LinkSpec{Filters: proto.Filters{BPF: []string{"icmp[icmptype] =="}}}, 400)
	if e.Code != proto.CodeInvalid || !strings.Contains(e.Message, "syntax error") {
		t.Fatalf("bad bpf: %+v, want libpcap's syntax error", e)
	}
	a.mustDrop(nodeA, nodeB, arp, "after a refused bpf update")
	// So are values out of range, checked again by the agent.
	for _, f := range []proto.Filters{
		{PacketLoss: intp(101)}, {PacketLoss: intp(-1)}, {Corrupt: intp(150)}, {FrequencyDrop: intp(-2)},
		{Delay: &proto.Delay{Latency: 40000}}, {Delay: &proto.Delay{Latency: 10, Jitter: -1}},
	} {
		if e := a.putLink(proto.LinkSpec{Filters: f}, 400); e.Code != proto.CodeInvalid {
			t.Fatalf("%+v: %+v", f, e)
		}
	}
	if e := a.putLink(proto.LinkSpec{DataLinkType: "DLT_BOGUS", Filters: proto.Filters{BPF: []string{"ip"}}}, 400); e.Code != proto.CodeInvalid {
		t.Fatalf("unknown data link type: %+v", e)
	}
	a.mustDrop(nodeA, nodeB, arp, "after refused updates")

	// packet_loss 100, then no filter: each takes effect on the next frame.
	a.putLink(proto.LinkSpec{Filters: proto.Filters{PacketLoss: intp(100)}}, 204)
	a.mustDrop(nodeA, nodeB, arp, "packet_loss 100")
	a.mustDrop(nodeB, nodeA, reply, "packet_loss 100")
	a.putLink(proto.LinkSpec{}, 204)
	a.mustPass(nodeA, nodeB, request, "no filter")
	// Suspend drops everything, and the filters come back after it.
	a.putLink(proto.LinkSpec{Suspend: true, Filters: proto.Filters{BPF: []string{"arp"}}}, 204)
	a.mustDrop(nodeA, nodeB, request, "suspended")
	a.putLink(proto.LinkSpec{Filters: proto.Filters{BPF: []string{"arp"}}}, 204)
	a.mustPass(nodeA, nodeB, request, "resumed with bpf arp")
	a.mustDrop(nodeA, nodeB, arp, "resumed with bpf arp")

	// Serial link types compile too; ATM (DLT 11 in libpcap, 100 in files).
	for _, dlt := range []string{"DLT_C_HDLC", "DLT_PPP_SERIAL", "DLT_FRELAY", "DLT_ATM_RFC1483"} {
		a.putLink(proto.LinkSpec{DataLinkType: dlt, Filters: proto.Filters{BPF: []string{"ip"}}}, 204)
	}

	// Every PUT above changed the running relay: its counters went on.
	var st proto.LinkState
	a.must("GET", proto.LinkPath(projectID, linkID), nil, &st, 200)
	if st.LinkID != linkID || st.Directions[0].Filtered < 8 || st.Directions[0].Forwarded < 3 ||
		st.Ends[0].Kind != "udp" || st.Ends[0].RecvBuffer == 0 {
		t.Fatalf("link state %+v", st)
	}
	if got := a.do("GET", proto.LinkPath(projectID, "dddddddd-0000-4000-8000-000000000009"), nil, &e); got != 404 {
		t.Fatalf("unknown link: %d %+v", got, e)
	}
}

func TestDelayFilterDelaysEachWay(t *testing.T) {
	a := linked(t)
	a.putLink(proto.LinkSpec{Filters: proto.Filters{Delay: &proto.Delay{Latency: 100}}}, 204)
	start := time.Now()
	a.exchange("delayed") // A to B, then B to A: 100 ms each way
	if rtt := time.Since(start); rtt < 200*time.Millisecond {
		t.Fatalf("round trip %v through a 100 ms delay", rtt)
	}
}

// udpEnd is a socket outside the lab: another emulator, a remote host.
type udpEnd struct {
	t    *testing.T
	conn *net.UDPConn
}

func newUDPEnd(t *testing.T) *udpEnd {
	t.Helper()
	return &udpEnd{t: t, conn: testenv.LoopbackUDP(t)}
}

func (u *udpEnd) port() int { return u.conn.LocalAddr().(*net.UDPAddr).Port }

func (u *udpEnd) recv(d time.Duration) ([]byte, netip.AddrPort) {
	buf := make([]byte, 65536)
	u.conn.SetReadDeadline(time.Now().Add(d))
	n, from, err := u.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, netip.AddrPort{}
	}
	return buf[:n], from
}

const (
	cloud1 = "eeeeeeee-0000-4000-8000-000000000005"
	cloud2 = "ffffffff-0000-4000-8000-000000000006"
)

func TestCloudNodesJoinSocketsOutsideTheLab(t *testing.T) {
	a := newAgent(t)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	x, y := newUDPEnd(t), newUDPEnd(t)
	l1, l2 := testenv.UnusedUDPPort(t), testenv.UnusedUDPPort(t)
	for _, c := range []struct {
		id, name     string
		lport, rport int
	}{{cloud1, "Cloud1", l1, x.port()}, {cloud2, "Cloud2", l2, y.port()}} {
		var st proto.NodeState
		a.must("PUT", proto.NodePath(projectID, c.id), proto.NodeSpec{NodeType: host.TypeCloud, Name: c.name, Ports: []proto.PortMapping{
			{Name: "UDP tunnel 1", Type: proto.PortUDP, LocalPort: c.lport, RemoteHost: "127.0.0.1", RemotePort: c.rport},
		}}, &st, 200)
		if st.Status != proto.StatusStarted || st.ConsoleType != "none" {
			t.Fatalf("cloud state %+v: always started, no console", st)
		}
	}
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: cloud1}, B: proto.Endpoint{NodeID: cloud2},
	}, nil, 204)
	// x sends into cloud 1; the frame leaves cloud 2 from its lport, to y.
	if _, err := x.conn.WriteToUDPAddrPort([]byte("out of x"), netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", l1))); err != nil {
		t.Fatal(err)
	}
	got, from := y.recv(arrive)
	if string(got) != "out of x" || from.Port() != uint16(l2) {
		t.Fatalf("y got %q from %v, want it from port %d", got, from, l2)
	}
	y.conn.WriteToUDPAddrPort([]byte("back"), netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", l2)))
	if got, from := x.recv(arrive); string(got) != "back" || from.Port() != uint16(l1) {
		t.Fatalf("x got %q from %v", got, from)
	}
	// Creating cloud 1 again with the same ports changes nothing; with other
	// ports it is a conflict.
	cloudSpec := func(rport int) proto.NodeSpec {
		return proto.NodeSpec{NodeType: host.TypeCloud, Name: "Cloud1", Ports: []proto.PortMapping{
			{Name: "UDP tunnel 1", Type: proto.PortUDP, LocalPort: l1, RemoteHost: "127.0.0.1", RemotePort: rport},
		}}
	}
	a.must("PUT", proto.NodePath(projectID, cloud1), cloudSpec(x.port()), nil, 200)
	var e0 proto.Error
	if got := a.do("PUT", proto.NodePath(projectID, cloud1), cloudSpec(x.port()+1), &e0); got != 409 {
		t.Fatalf("cloud with other ports: %d %+v", got, e0)
	}
	// A connected socket hears only its remote end.
	newUDPEnd(t).conn.WriteToUDPAddrPort([]byte("stranger"), netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", l1)))
	if got, _ := y.recv(200 * time.Millisecond); got != nil {
		t.Fatalf("a stranger's datagram crossed the cloud: %q", got)
	}

	var e proto.Error
	other := "abababab-0000-4000-8000-000000000007"
	bad := []proto.NodeSpec{
		{NodeType: host.TypeCloud, Ports: []proto.PortMapping{{Type: "ethernet", Name: "eth0"}}},
		{NodeType: host.TypeCloud, Ports: []proto.PortMapping{{Type: proto.PortUDP, LocalPort: 0, RemoteHost: "127.0.0.1", RemotePort: 1}}},
		{NodeType: host.TypeSwitch, Ports: []proto.PortMapping{{Type: "isl", VLAN: 1}}},
		{NodeType: host.TypeSwitch, Ports: []proto.PortMapping{{Type: proto.PortAccess, VLAN: 5000}}},
		{NodeType: host.TypeHub, Ports: []proto.PortMapping{{Type: proto.PortAccess}}},
	}
	for _, spec := range bad {
		if got := a.do("PUT", proto.NodePath(projectID, other), spec, &e); got != 400 {
			t.Errorf("%+v: %d %+v, want 400", spec, got, e)
		}
	}
	// The lport of cloud 1 is taken.
	if got := a.do("PUT", proto.NodePath(projectID, other), proto.NodeSpec{NodeType: host.TypeCloud, Ports: []proto.PortMapping{
		{Type: proto.PortUDP, LocalPort: l1, RemoteHost: "127.0.0.1", RemotePort: 9},
	}}, &e); got != 409 {
		t.Fatalf("lport in use: %d %+v", got, e)
	}
	// Cloud 1 has one port: 0/1 does not exist.
	if got := a.do("PUT", proto.LinkPath(projectID, "abababab-0000-4000-8000-000000000008"), proto.LinkSpec{
		A: proto.Endpoint{NodeID: cloud1, Port: 1}, B: proto.Endpoint{Tunnel: &proto.Tunnel{RemoteHost: "127.0.0.1", RemotePort: 9}},
	}, &e); got != 404 {
		t.Fatalf("link to a missing port: %d %+v", got, e)
	}
	// Deleting the cloud frees its ports.
	a.must("DELETE", proto.NodePath(projectID, cloud1), nil, nil, 204)
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l1})
	if err != nil {
		t.Fatalf("lport %d still held after the cloud was deleted: %v", l1, err)
	}
	c.Close()
}

// fakeNodes creates started fake VPCS nodes.
func (a *agent) fakeNodes(ids ...string) {
	a.t.Helper()
	for _, id := range ids {
		a.must("PUT", proto.NodePath(projectID, id), proto.NodeSpec{NodeType: "vpcs", Name: id[:4]}, nil, 200)
		a.must("PUT", proto.NodeStatusPath(projectID, id), proto.NodeStatusSpec{Status: "started"}, nil, 200)
	}
}

func TestSwitchAndHubNodesJoinFakeNodes(t *testing.T) {
	a := newAgent(t)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	n := []string{
		"10000000-0000-4000-8000-000000000001", "20000000-0000-4000-8000-000000000002",
		"30000000-0000-4000-8000-000000000003",
	}
	a.fakeNodes(n...)
	const sw = "40000000-0000-4000-8000-000000000004"
	ports := []proto.PortMapping{{Name: "e0", Type: "access", VLAN: 1}, {Name: "e1", Type: "access"}, {Name: "e2", Type: "access", VLAN: 2}}
	var st proto.NodeState
	a.must("PUT", proto.NodePath(projectID, sw), proto.NodeSpec{NodeType: host.TypeSwitch, Name: "SW1", Ports: ports}, &st, 200)
	if st.Status != proto.StatusStarted {
		t.Fatalf("switch %+v", st)
	}
	for i, id := range n {
		a.must("PUT", proto.LinkPath(projectID, fmt.Sprintf("50000000-0000-4000-8000-00000000000%d", i)), proto.LinkSpec{
			A: proto.Endpoint{NodeID: id}, B: proto.Endpoint{NodeID: sw, Port: i},
		}, nil, 204)
	}
	// Stopping a switch changes nothing: it runs while the project is open.
	a.must("PUT", proto.NodeStatusPath(projectID, sw), proto.NodeStatusSpec{Status: "stopped"}, &st, 200)
	if st.Status != proto.StatusStarted {
		t.Fatalf("switch after stop: %+v", st)
	}
	bcast := arpFrame(t, macA, ipA, ipB)
	a.fake(n[0]).Send(bcast)
	if got, err := a.fake(n[1]).Recv(arrive); err != nil || !bytes.Equal(got, bcast) {
		t.Fatalf("node 2 (same VLAN) got %x, %v", got, err)
	}
	if got, err := a.fake(n[2]).Recv(300 * time.Millisecond); err == nil {
		t.Fatalf("node 3 (VLAN 2) got %x", got)
	}
	// Moving port 2 to VLAN 1 takes effect in place.
	ports[2].VLAN = 1
	a.must("PUT", proto.NodePath(projectID, sw), proto.NodeSpec{NodeType: host.TypeSwitch, Name: "SW1", Ports: ports}, &st, 200)
	a.fake(n[0]).Send(bcast)
	for _, id := range n[1:] {
		if _, err := a.fake(id).Recv(arrive); err != nil {
			t.Fatalf("node %s (VLAN 1) got nothing: %v", id, err)
		}
	}
	var e proto.Error
	if got := a.do("PUT", proto.NodePath(projectID, sw), proto.NodeSpec{NodeType: host.TypeSwitch, Ports: ports[:2]}, &e); got != 409 {
		t.Fatalf("shrinking a switch: %d %+v", got, e)
	}

	// A hub floods: delete the switch (its links go), link the nodes to a hub.
	a.must("DELETE", proto.NodePath(projectID, sw), nil, nil, 204)
	const hub = "60000000-0000-4000-8000-000000000006"
	a.must("PUT", proto.NodePath(projectID, hub), proto.NodeSpec{NodeType: host.TypeHub, Name: "HUB1",
		Ports: []proto.PortMapping{{Name: "p0"}, {Name: "p1"}, {Name: "p2"}}}, nil, 200)
	for i, id := range n {
		a.must("PUT", proto.LinkPath(projectID, fmt.Sprintf("70000000-0000-4000-8000-00000000000%d", i)), proto.LinkSpec{
			A: proto.Endpoint{NodeID: hub, Port: i}, B: proto.Endpoint{NodeID: id},
		}, nil, 204)
	}
	unicast := icmpFrame(t, macA, macB, ipA, ipB, 8, 1)
	a.fake(n[0]).Send(unicast)
	for _, id := range n[1:] {
		if got, err := a.fake(id).Recv(arrive); err != nil || !bytes.Equal(got, unicast) {
			t.Fatalf("hub: node %s got %x, %v", id, got, err)
		}
	}
}

func TestAStreamThatIsNotReadSlowsNeitherTheRelayNorOtherReaders(t *testing.T) {
	a := linked(t)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "slow.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", a.url+proto.CaptureStreamPath(projectID, linkID), nil)
		req.Header.Set(proto.SecretHeader, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		return resp
	}
	stuck := open() // never read: its handler blocks once TCP buffers fill
	defer stuck.Body.Close()
	reader := open()
	body := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(reader.Body)
		body <- b
	}()
	// 40 MB of frames, far more than the stuck stream's socket buffers.
	const n = 30000
	frame := bytes.Repeat([]byte{0x5a}, 1400)
	fa, fb := a.fake(nodeA), a.fake(nodeB)
	// A window at a time: 32 frames (45 KB) overflow no socket buffer, and
	// a loaded machine is not made to wake for each frame.
	const window = 32
	for sent := 0; sent < n; sent += window {
		w := min(window, n-sent)
		for range w {
			if err := fa.Send(frame); err != nil {
				t.Fatal(err)
			}
		}
		// The deadline is generous (a loaded machine is slow, not wrong);
		// only a lost frame reaches it.
		for i := range w {
			if _, err := fb.Recv(time.Minute); err != nil {
				t.Fatalf("frame %d not forwarded: %v", sent+i, err)
			}
		}
	}
	// The relay counts a frame once it has passed it on: the count may
	// trail the last frame's arrival by a moment.
	var ls proto.LinkState
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		a.must("GET", proto.LinkPath(projectID, linkID), nil, &ls, 200)
		if ls.Directions[0].Forwarded == n {
			break
		}
		if ls.Directions[0].Forwarded > n || time.Now().After(deadline) {
			t.Fatalf("relay forwarded %d of %d frames", ls.Directions[0].Forwarded, n)
		}
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	if st.Frames != n || st.Dropped != 0 {
		t.Fatalf("capture %+v, want all %d frames", st, n)
	}
	file, _ := os.ReadFile(st.FilePath)
	select {
	case b := <-body:
		if !bytes.Equal(b, file) {
			t.Fatalf("the reading stream got %d bytes, the file has %d", len(b), len(file))
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the reading stream did not end after the capture stopped")
	}
}

func TestPcapngCaptureNamesWhoSentEachFrame(t *testing.T) {
	testenv.RequireTools(t, "tshark", "capinfos")
	a := linked(t)
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA, Name: "PC1 Ethernet0"}, B: proto.Endpoint{NodeID: nodeB, Name: "PC2 Ethernet0"},
	}, nil, 204)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "dir.pcapng", DataLinkType: "DLT_EN10MB", Format: "pcapng"}, &st, 200)
	for i := range 3 {
		a.mustPass(nodeA, nodeB, icmpFrame(t, macA, macB, ipA, ipB, 8, uint16(i)), "request")
	}
	for i := range 2 {
		a.mustPass(nodeB, nodeA, icmpFrame(t, macB, macA, ipB, ipA, 0, uint16(i)), "reply")
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	out, err := exec.Command("tshark", "-r", st.FilePath, "-T", "fields", "-e", "frame.interface_id", "-e", "frame.interface_name", "-e", "icmp.type").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		counts[line]++
	}
	want := map[string]int{"0\tPC1 Ethernet0\t8": 3, "1\tPC2 Ethernet0\t0": 2}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("tshark sees %v, want %v", counts, want)
	}
	info, err := exec.Command("capinfos", st.FilePath).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Number of interfaces in file: 2`).Match(info) {
		t.Fatalf("capinfos: %v\n%s", err, info)
	}
}

// vpcsAgent is an agent API that runs real VPCS.
func vpcsAgent(t *testing.T) *agent {
	t.Helper()
	testenv.RequireTools(t, "vpcs")
	a := &agent{t: t, data: t.TempDir(), fakes: map[string]*node.Fake{}}
	a.serve(host.Config{DataDir: a.data})
	return a
}

func TestThreeVPCSOnASwitchPingEachOtherAndVLANsIsolateThem(t *testing.T) {
	testenv.Long(t, "a whole lab: three VPCS on a switch pinging each other")
	a := vpcsAgent(t)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "switched"}, nil, 204)
	pcs := []string{
		"a1000000-0000-4000-8000-000000000001", "a2000000-0000-4000-8000-000000000002",
		"a3000000-0000-4000-8000-000000000003",
	}
	const sw = "a4000000-0000-4000-8000-000000000004"
	ports := []proto.PortMapping{{Name: "e0", Type: "access", VLAN: 1}, {Name: "e1", Type: "access", VLAN: 1}, {Name: "e2", Type: "access", VLAN: 1}}
	a.must("PUT", proto.NodePath(projectID, sw), proto.NodeSpec{NodeType: host.TypeSwitch, Name: "SW1", Ports: ports}, nil, 200)
	cons := make([]*node.Console, len(pcs))
	var wg sync.WaitGroup
	for i, id := range pcs {
		var st proto.NodeState
		a.must("PUT", proto.NodePath(projectID, id), proto.NodeSpec{NodeType: "vpcs", Name: fmt.Sprint("PC", i+1), MACIndex: i + 1}, &st, 200)
		a.must("PUT", proto.LinkPath(projectID, fmt.Sprintf("b%d000000-0000-4000-8000-000000000000", i)), proto.LinkSpec{
			A: proto.Endpoint{NodeID: id}, B: proto.Endpoint{NodeID: sw, Port: i},
		}, nil, 204)
		a.must("PUT", proto.NodeStatusPath(projectID, id), proto.NodeStatusSpec{Status: "started"}, &st, 200)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(st.ConsoleHost, fmt.Sprint(st.Console)))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		cons[i] = con
		wg.Go(func() { run(t, con, fmt.Sprintf("ip 10.0.0.%d/24", i+1)) }) // ~3 s: duplicate address check
	}
	wg.Wait()
	for _, p := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
		if n := ping(t, cons[p[0]], fmt.Sprintf("10.0.0.%d", p[1]+1), 2); n == 0 {
			t.Fatalf("PC%d cannot ping PC%d across the switch", p[0]+1, p[1]+1)
		}
	}
	// PC3's port moves to VLAN 2: it is cut off from the others.
	ports[2].VLAN = 2
	a.must("PUT", proto.NodePath(projectID, sw), proto.NodeSpec{NodeType: host.TypeSwitch, Name: "SW1", Ports: ports}, nil, 200)
	run(t, cons[0], "clear arp")
	if n := ping(t, cons[0], "10.0.0.3", 2); n != 0 {
		t.Fatalf("PC1 pinged PC3 across VLANs (%d replies)", n)
	}
	if n := ping(t, cons[0], "10.0.0.2", 1); n == 0 {
		t.Fatal("PC1 lost PC2, in its own VLAN")
	}
}

var pingOK = regexp.MustCompile(`icmp_seq=\d+ ttl=\d+ time=`)

func ping(t *testing.T, con *node.Console, ip string, count int) int {
	t.Helper()
	return len(pingOK.FindAllString(run(t, con, fmt.Sprintf("ping %s -c %d", ip, count)), -1))
}

func run(t *testing.T, con *node.Console, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := con.Run(ctx, cmd)
	if err != nil {
		t.Errorf("%s: %v (%q)", cmd, err, out)
	}
	return out
}

func TestCaptureFilterWritesOnlyWhatItMatchesAndForwardsEverything(t *testing.T) {
	a := linked(t)
	var e proto.Error
	if got := a.do("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "bad.pcap", Filter: "icmp and and"}, &e); got != 400 || !strings.Contains(e.Message, "syntax error") {
		t.Fatalf("a filter libpcap refuses: %d %+v, want 400 with libpcap's message", got, e)
	}
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "icmp.pcap", Filter: "icmp"}, &st, 200)
	// A ping, and an ARP storm between its requests: the peer gets every
	// frame, the file only the ping.
	const storm = 50
	for i := range 3 {
		a.mustPass(nodeA, nodeB, icmpFrame(t, macA, macB, ipA, ipB, 8, uint16(i)), "echo request")
		for range storm {
			a.mustPass(nodeA, nodeB, arpFrame(t, macA, ipA, ipB), "ARP request")
		}
		a.mustPass(nodeB, nodeA, icmpFrame(t, macB, macA, ipB, ipA, 0, uint16(i)), "echo reply")
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	if st.Frames != 6 || st.Filtered != 3*storm || st.Spec.Filter != "icmp" {
		t.Fatalf("capture state %+v, want 6 frames written and %d filtered", st, 3*storm)
	}
	f, err := os.Open(st.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if p.Layer(layers.LayerTypeICMPv4) == nil {
			t.Fatalf("record %d is not ICMP: %v", n, p)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("the file holds %d frames, want the 6 of the ping", n)
	}
	// The peer can read the last frame before the relay counts it (it
	// counts after its send returns): wait for the count, not a moment.
	var got uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var ls proto.LinkState
		a.must("GET", proto.LinkPath(projectID, linkID), nil, &ls, 200)
		if got = ls.Directions[0].Forwarded + ls.Directions[1].Forwarded; got >= 6+3*storm || time.Now().After(deadline) {
			break
		}
	}
	if got != 6+3*storm {
		t.Fatalf("the link forwarded %d frames, want %d", got, 6+3*storm)
	}
}
