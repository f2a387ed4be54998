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

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// A cloud's ethernet port relays a host interface. These tests give it
// one end of a veth pair they make, the other end in a network namespace
// of their own with an address: nothing they send leaves that pair.

// cloudLab is a namespace wired to the host by a veth pair: Host is the
// host end (no address unless a test gives it one), the namespace's end
// holds Subnet+"2".
type cloudLab struct {
	t      *testing.T
	prefix string
	Host   string // the veth end in the test's (and the controller's) namespace
	NS     string
	Subnet string // "10.x.y."
}

func newCloudLab(t *testing.T) *cloudLab {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "ip (iproute2) is not installed")
	}
	var r [3]byte
	rand.Read(r[:])
	l := &cloudLab{t: t, prefix: "ltc" + hex.EncodeToString(r[:2])}
	l.Host, l.NS = l.prefix+"h", l.prefix+"n"
	// A /24 in 10.200.0.0–10.249.255.0 that no interface here uses.
	for i := 0; ; i++ {
		l.Subnet = fmt.Sprintf("10.%d.%d.", 200+int(r[2])%50, (int(r[0])+i)%256)
		out, _ := exec.Command("ip", "-4", "-o", "addr").Output()
		if !strings.Contains(string(out), " "+l.Subnet) {
			break
		}
	}
	t.Cleanup(l.remove)
	// Root in a container without CAP_NET_ADMIN cannot.
	if out, err := exec.Command("ip", "netns", "add", l.NS).CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", fmt.Sprintf("cannot make a network namespace here: %v: %s", err, out))
	}
	l.ip("-n", l.NS, "link", "set", "lo", "up")
	l.ip("link", "add", l.Host, "type", "veth", "peer", "name", "eth0", "netns", l.NS)
	l.ip("-n", l.NS, "addr", "add", l.Subnet+"2/24", "dev", "eth0")
	l.ip("-n", l.NS, "link", "set", "eth0", "up")
	l.ip("link", "set", l.Host, "up")
	return l
}

func (l *cloudLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the namespace and the veth pair (deleting either end
// deletes both), whatever the test reached.
func (l *cloudLab) remove() {
	exec.Command("ip", "link", "del", l.Host).Run()
	exec.Command("ip", "netns", "del", l.NS).Run()
}

// ethernetCloud is the body of a cloud whose one port is host interface
// iface, as GNS3's cloud dialog sends it.
func ethernetCloud(name, iface string) map[string]any {
	return map[string]any{"name": name, "node_type": "cloud", "compute_id": "local", "properties": map[string]any{
		"ports_mapping": []any{map[string]any{"name": iface, "port_number": 0, "type": "ethernet", "interface": iface}},
	}}
}

func TestVPCSPingsANamespaceThroughACloudOnAHostInterfaceAndTheCaptureHoldsIt(t *testing.T) {
	testenv.Long(t, "network namespaces and labtap's binaries")
	testenv.RequireTools(t, "vpcs", "tshark")
	lab := newCloudLab(t)
	c := startController(t)
	base := newProject(c, "cloud-eth")
	var pc1, cloud nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, &pc1)
	var created struct {
		NodeID     string `json:"node_id"`
		Properties struct {
			Interfaces []struct {
				Name    string `json:"name"`
				Type    string `json:"type"`
				Special bool   `json:"special"`
			} `json:"interfaces"`
		} `json:"properties"`
	}
	c.call("POST", base+"/nodes", ethernetCloud("Cloud1", lab.Host), 201, &created)
	// GNS3's cloud lists the host's interfaces in its properties: the
	// GUI's cloud dialog offers them.
	found := false
	for _, hi := range created.Properties.Interfaces {
		found = found || hi.Name == lab.Host && hi.Type == "ethernet" && !hi.Special
	}
	if !found {
		t.Fatalf("the cloud's properties.interfaces %+v lack %s", created.Properties.Interfaces, lab.Host)
	}
	cloud.NodeID = created.NodeID
	l := c.link(base, pc1, 0, cloud, 0, 0)
	c.call("POST", base+"/nodes/"+pc1.NodeID+"/start", nil, 200, &pc1)
	linkPath := base + "/links/" + l.LinkID
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	con, err := node.DialConsole(t.Context(), net.JoinHostPort(pc1.ConsoleHost, fmt.Sprint(pc1.Console)))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	p := &pc{node: pc1, con: con, ip: lab.Subnet + "1"}
	p.run(t, "ip "+lab.Subnet+"1/24")
	if got := p.ping(t, lab.Subnet+"2", 3); got == 0 {
		t.Fatal("VPCS got no reply from the namespace behind the cloud's interface")
	}
	var stopped linkReply
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	pcap := deref(stopped.CaptureFilePath)
	req := tsharkCount(t, pcap, "icmp.type == 8 && ip.src == "+lab.Subnet+"1")
	rep := tsharkCount(t, pcap, "icmp.type == 0 && ip.src == "+lab.Subnet+"2")
	if req == 0 || rep == 0 {
		t.Fatalf("the cloud link's capture holds %d echo requests from VPCS and %d replies", req, rep)
	}
	// The interface is the cloud's while it exists: a second cloud on it
	// is refused, and takes it once the first is gone.
	if code, body := c.rawCall("POST", base+"/nodes", ethernetCloud("Cloud2", lab.Host)); code != 409 || !strings.Contains(body, lab.Host) {
		t.Fatalf("a second cloud on %s: %d %s, want 409 naming it", lab.Host, code, body)
	}
	c.call("DELETE", base+"/nodes/"+cloud.NodeID, nil, 204, nil)
	c.call("POST", base+"/nodes", ethernetCloud("Cloud3", lab.Host), 201, nil)
}

// TestACloudRefusesTheAgentsUplinkUnlessAllowedAndWhatIsNoInterface: the
// interface holding the default route, or the address the agent is
// reached at (--advertise), is refused with a 409 naming the flag that
// allows it; a name that is no interface here, too long, or the loopback
// is refused too, and nothing is created.
func TestACloudRefusesTheAgentsUplinkUnlessAllowedAndWhatIsNoInterface(t *testing.T) {
	testenv.Long(t, "network namespaces and labtap's binaries")
	lab := newCloudLab(t)
	lab.ip("addr", "add", lab.Subnet+"1/24", "dev", lab.Host)
	c := startControllerWith(t, t.TempDir(), nil, "--advertise", lab.Subnet+"1")
	base := newProject(c, "cloud-uplink")
	refused := []struct {
		iface string
		code  int
		want  []string
	}{
		{lab.Host, 409, []string{lab.Host, "--cloud-allow-uplink", "LABTAP_CLOUD_ALLOW_UPLINK", lab.Subnet + "1"}},
		{"ltcnosuch0", 404, []string{"ltcnosuch0"}},
		{"lo", 400, []string{"loopback"}},
		{"a-name-longer-than-ifnamsiz", 400, []string{"interface"}},
	}
	if out, err := exec.Command("ip", "-o", "route", "show", "default").Output(); err == nil {
		// The default route's interface (only asked for, never opened).
		if f := strings.Fields(string(out)); len(f) > 0 {
			for i := range len(f) - 1 {
				if f[i] == "dev" {
					refused = append(refused, struct {
						iface string
						code  int
						want  []string
					}{f[i+1], 409, []string{f[i+1], "default route", "--cloud-allow-uplink"}})
					break
				}
			}
		}
	}
	for _, r := range refused {
		code, body := c.rawCall("POST", base+"/nodes", ethernetCloud("Cloud", r.iface))
		if code != r.code {
			t.Errorf("a cloud on %q: %d %s, want %d", r.iface, code, body, r.code)
			continue
		}
		for _, w := range r.want {
			if !strings.Contains(body, w) {
				t.Errorf("a cloud on %q: %s, want it to say %q", r.iface, body, w)
			}
		}
	}
	var nodes []nodeReply
	c.call("GET", base+"/nodes", nil, 200, &nodes)
	if len(nodes) != 0 {
		t.Fatalf("refused clouds were created: %+v", nodes)
	}
	c.stop()
	// Allowed: the same interface (the test's own veth) is taken.
	c = startControllerWith(t, t.TempDir(), nil, "--advertise", lab.Subnet+"1", "--cloud-allow-uplink")
	base = newProject(c, "cloud-uplink-allowed")
	c.call("POST", base+"/nodes", ethernetCloud("Cloud", lab.Host), 201, nil)
}
