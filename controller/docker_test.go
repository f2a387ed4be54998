package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// These tests run docker nodes for real: the controller (or agent
// processes) drive the local Docker Engine, with images that
// scripts/node-images builds from the local Debian base (nothing pulled).

const (
	frrImage  = "labtap/frr:bookworm"
	hostImage = "labtap/host:bookworm"
)

var initOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "labtap-init-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "labtap-init")
	cmd := exec.Command("go", "build", "-o", bin, "../agent/node/docker/init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build labtap-init: %v: %s", err, out)
	}
	return bin, nil
})

// dockerInit returns the environment that gives agents the static init.
func dockerInit(t *testing.T) []string {
	t.Helper()
	bin, err := initOnce()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"LABTAP_DOCKER_INIT=" + bin}
}

// dockerNode creates a docker node and returns it.
func (c *controller) dockerNode(base, name, image, compute string, adapters int) nodeReply {
	c.t.Helper()
	var n nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "docker", "compute_id": compute,
		"properties": map[string]any{"image": image, "adapters": adapters}}, 201, &n)
	return n
}

// container is the name of a docker node's container.
func container(n nodeReply) string { return "labtap-" + n.NodeID }

// inNode runs a command in a docker node's container.
func inNode(t *testing.T, n nodeReply, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", container(n)}, args...)...).CombinedOutput()
	return string(out), err
}

// waitIn runs a command in a container until its output contains want.
func waitIn(t *testing.T, n nodeReply, within time.Duration, want string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, _ := inNode(t, n, args...)
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v in %s: no %q within %v; last output:\n%s", args, container(n), want, within, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *controller) link(base string, a nodeReply, aAdapter int, b nodeReply, bAdapter, bPort int) linkReply {
	c.t.Helper()
	var l linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a.NodeID, "adapter_number": aAdapter, "port_number": 0},
		{"node_id": b.NodeID, "adapter_number": bAdapter, "port_number": bPort},
	}}, 201, &l)
	return l
}

func newProject(c *controller, name string) string {
	var p struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": name}, 201, &p)
	return "/v2/projects/" + p.ProjectID
}

func TestTwoFRRRoutersRunOSPFAndBGPThroughACapturedLink(t *testing.T) {
	testenv.Docker(t, frrImage)
	testenv.RequireTools(t, "tshark")
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	var computes []struct {
		Capabilities struct {
			NodeTypes []string `json:"node_types"`
		} `json:"capabilities"`
	}
	c.call("GET", "/v2/computes", nil, 200, &computes)
	if len(computes) == 0 || !strings.Contains(strings.Join(computes[0].Capabilities.NodeTypes, " "), "docker") {
		t.Fatalf("compute local does not offer docker: %+v", computes)
	}
	base := newProject(c, "frr")
	r1 := c.dockerNode(base, "r1", frrImage, "local", 1)
	r2 := c.dockerNode(base, "r2", frrImage, "local", 1)
	l := c.link(base, r1, 0, r2, 0, 0)
	linkPath := base + "/links/" + l.LinkID
	for _, r := range []*nodeReply{&r1, &r2} {
		c.call("POST", base+"/nodes/"+r.NodeID+"/start", nil, 200, r)
		if r.Status != "started" {
			t.Fatalf("started: %+v", r)
		}
	}
	var started linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, &started)

	// OSPF (point-to-point, 1 s hellos) and an eBGP session, as an
	// operator would type them in vtysh.
	conf := func(me, peer, lo string, as, peerAS int) []string {
		args := []string{"vtysh"}
		for _, line := range []string{
			"configure terminal",
			"interface lo", "ip address " + lo + "/32",
			"interface eth0", "ip address " + me + "/24", "ip ospf network point-to-point",
			"ip ospf hello-interval 1", "ip ospf dead-interval 4",
			"router ospf", "ospf router-id " + lo, "network 10.0.12.0/24 area 0", "network " + lo + "/32 area 0",
			fmt.Sprintf("router bgp %d", as), "bgp router-id " + lo, "no bgp ebgp-requires-policy",
			fmt.Sprintf("neighbor %s remote-as %d", peer, peerAS), "neighbor " + peer + " timers connect 1",
			"end",
		} {
			args = append(args, "-c", line)
		}
		return args
	}
	for _, r := range []nodeReply{r1, r2} {
		waitIn(t, r, 60*time.Second, "ospfd", "vtysh", "-c", "show daemons")
	}
	t0 := time.Now()
	if out, err := inNode(t, r1, conf("10.0.12.1", "10.0.12.2", "10.255.0.1", 65001, 65002)...); err != nil {
		t.Fatalf("configure r1: %v %s", err, out)
	}
	if out, err := inNode(t, r2, conf("10.0.12.2", "10.0.12.1", "10.255.0.2", 65002, 65001)...); err != nil {
		t.Fatalf("configure r2: %v %s", err, out)
	}
	waitIn(t, r1, 30*time.Second, "Full/", "vtysh", "-c", "show ip ospf neighbor")
	full := time.Since(t0)
	waitIn(t, r1, 30*time.Second, "Established", "vtysh", "-c", "show bgp neighbor 10.0.12.2")
	established := time.Since(t0)
	t.Logf("OSPF Full %v and BGP Established %v after configuration", full.Round(time.Millisecond), established.Round(time.Millisecond))
	// Each router needs the other's loopback for a ping and its reply: r2
	// may learn r1's a moment after r1 learns r2's.
	waitIn(t, r1, 20*time.Second, "10.255.0.2/32", "vtysh", "-c", "show ip route ospf")
	waitIn(t, r2, 20*time.Second, "10.255.0.1/32", "vtysh", "-c", "show ip route ospf")
	// zebra lists a route before the kernel has it: a few tries, each of
	// two pings, until one is answered.
	for try := 1; ; try++ {
		out, err := inNode(t, r1, "ping", "-c", "2", "-W", "2", "-I", "10.255.0.1", "10.255.0.2")
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("ping between the loopbacks, %d tries: %v %s", try, err, out)
		}
	}

	var stopped linkReply
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	pcap := deref(stopped.CaptureFilePath)
	hellos := tsharkCount(t, pcap, "ospf.msg == 1")
	bgp := tsharkCount(t, pcap, "bgp")
	tcp := tsharkCount(t, pcap, "tcp.port == 179")
	out, err := exec.Command("tshark", "-o", "tcp.check_checksum:TRUE", "-r", pcap, "-Y", "tcp.checksum.status == 0 || ip.checksum.status == 0").Output()
	if err != nil {
		t.Fatal(err)
	}
	good, err := exec.Command("tshark", "-o", "tcp.check_checksum:TRUE", "-r", pcap, "-Y", "tcp.checksum.status == 1").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capture: %d OSPF Hellos, %d BGP messages, %d TCP frames of BGP, %d frames with a verified TCP checksum", hellos, bgp, tcp, strings.Count(string(good), "\n"))
	if hellos < 4 || bgp < 4 || tcp < 6 {
		t.Fatalf("the capture lacks OSPF Hellos (%d), BGP (%d) or its TCP (%d)", hellos, bgp, tcp)
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("frames with bad checksums in the capture:\n%s", out)
	}
	if strings.Count(string(good), "\n") < tcp/2 {
		t.Fatalf("tshark verified only %d TCP checksums of %d frames", strings.Count(string(good), "\n"), tcp)
	}
	// Both routers' Hellos are there.
	for _, src := range []string{"10.0.12.1", "10.0.12.2"} {
		if n := tsharkCount(t, pcap, "ospf.msg == 1 && ip.src == "+src); n < 2 {
			t.Fatalf("%d Hellos from %s", n, src)
		}
	}

	// Filters and suspend act on a docker link as on any other.
	ping := func() bool {
		_, err := inNode(t, r1, "ping", "-c", "2", "-W", "1", "10.0.12.2")
		return err == nil
	}
	c.call("PUT", linkPath, map[string]any{"filters": map[string]any{"frequency_drop": []int{-1}}}, 201, nil)
	if ping() {
		t.Fatal("ping passed a link that drops every frame")
	}
	c.call("PUT", linkPath, map[string]any{"filters": map[string]any{}}, 201, nil)
	if !ping() {
		t.Fatal("no ping once the filter is gone")
	}
	c.call("PUT", linkPath, map[string]any{"suspend": true}, 201, nil)
	if ping() {
		t.Fatal("ping passed a suspended link")
	}
	c.call("PUT", linkPath, map[string]any{"suspend": false}, 201, nil)
	if !ping() {
		t.Fatal("no ping once the link is resumed")
	}

	// Deleting the project removes the containers and their veths.
	c.call("DELETE", base, nil, 204, nil)
	for _, r := range []nodeReply{r1, r2} {
		if err := exec.Command("docker", "inspect", container(r)).Run(); err == nil {
			t.Fatalf("container %s still there after the project was deleted", container(r))
		}
	}
}

func TestVPCSPingsAContainerThroughASwitchAndTheCaptureHoldsIt(t *testing.T) {
	testenv.Docker(t, hostImage)
	testenv.RequireTools(t, "vpcs", "tshark")
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "mixed")
	h := c.dockerNode(base, "host", hostImage, "local", 1)
	var pc1, sw nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, &pc1)
	c.call("POST", base+"/nodes", map[string]any{"name": "SW1", "node_type": "ethernet_switch", "compute_id": "local"}, 201, &sw)
	l := c.link(base, h, 0, sw, 0, 0)
	c.link(base, pc1, 0, sw, 0, 1)
	for _, n := range []*nodeReply{&h, &pc1} {
		c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, n)
	}
	linkPath := base + "/links/" + l.LinkID
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	if out, err := inNode(t, h, "ip", "addr", "add", "10.0.0.2/24", "dev", "eth0"); err != nil {
		t.Fatalf("address the container: %v %s", err, out)
	}
	con, err := node.DialConsole(t.Context(), net.JoinHostPort(pc1.ConsoleHost, fmt.Sprint(pc1.Console)))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	p := &pc{node: pc1, con: con, ip: "10.0.0.1"}
	p.run(t, "ip 10.0.0.1/24")
	if got := p.ping(t, "10.0.0.2", 3); got == 0 {
		t.Fatal("VPCS got no reply from the container")
	}
	// And the other way.
	if out, err := inNode(t, h, "ping", "-c", "2", "-W", "2", "10.0.0.1"); err != nil {
		t.Fatalf("container → VPCS: %v %s", err, out)
	}
	var stopped linkReply
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	pcap := deref(stopped.CaptureFilePath)
	req := tsharkCount(t, pcap, "icmp.type == 8 && ip.src == 10.0.0.1")
	rep := tsharkCount(t, pcap, "icmp.type == 0 && ip.src == 10.0.0.2")
	if req == 0 || rep == 0 {
		t.Fatalf("the container's link capture holds %d echo requests from VPCS and %d replies", req, rep)
	}
}

func TestContainersOnTwoAgentsPingAcrossTheirLink(t *testing.T) {
	testenv.Docker(t, hostImage)
	secret := "s3cret-docker"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret})
	env := append(dockerInit(t), "LABTAP_SECRET="+secret)
	var agents []*agentProc
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		a := &agentProc{t: t, id: fmt.Sprintf("dock%d", i+1), listen: ip + ":0", data: t.TempDir(), env: env, ctl: c.url}
		a.start()
		t.Cleanup(func() { a.kill(15) })
		agents = append(agents, a)
		c.waitCompute(a.id, true, 30*time.Second)
	}
	base := newProject(c, "across")
	h1 := c.dockerNode(base, "h1", hostImage, "dock1", 1)
	h2 := c.dockerNode(base, "h2", hostImage, "dock2", 1)
	c.link(base, h1, 0, h2, 0, 0)
	for _, n := range []*nodeReply{&h1, &h2} {
		c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, n)
	}
	for i, n := range []nodeReply{h1, h2} {
		if out, err := inNode(t, n, "ip", "addr", "add", fmt.Sprintf("10.0.9.%d/24", i+1), "dev", "eth0"); err != nil {
			t.Fatalf("address: %v %s", err, out)
		}
	}
	waitIn(t, h1, 20*time.Second, " 0% packet loss", "ping", "-c", "2", "-W", "1", "10.0.9.2")
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerImagesAreListedAndAMissingImageIsAClear409(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	var images []struct {
		Image string `json:"image"`
	}
	c.call("GET", "/v2/computes/local/docker/images", nil, 200, &images)
	found := false
	for i, im := range images {
		found = found || im.Image == hostImage
		if i > 0 && images[i-1].Image > im.Image {
			t.Fatalf("images not sorted: %v", images)
		}
	}
	if !found {
		t.Fatalf("%s not listed: %v", hostImage, images)
	}
	c.call("GET", "/v2/computes/nosuch/docker/images", nil, 404, nil)
	base := newProject(c, "missing")
	var e struct {
		Message string `json:"message"`
	}
	c.call("POST", base+"/nodes", map[string]any{"name": "x", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": "labtap/no-such-image:1"}}, 409, &e)
	if !strings.Contains(e.Message, "The image labtap/no-such-image:1 is missing") || !strings.Contains(e.Message, "scripts/node-images") {
		t.Fatalf("message %q", e.Message)
	}
	c.call("POST", base+"/nodes", map[string]any{"name": "y", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"adapters": 1}}, 400, nil)
	var nodes []json.RawMessage
	c.call("GET", base+"/nodes", nil, 200, &nodes)
	if len(nodes) != 0 {
		t.Fatalf("a refused node was kept: %s", nodes)
	}
}

func TestAnAgentRestartKeepsTheContainersAndTheirLink(t *testing.T) {
	testenv.Docker(t, hostImage)
	secret := "s3cret-restart"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret})
	a := &agentProc{t: t, id: "dockr", listen: "127.0.0.2:0", data: t.TempDir(), env: append(dockerInit(t), "LABTAP_SECRET="+secret), ctl: c.url}
	a.start()
	t.Cleanup(func() { a.kill(15) })
	c.waitCompute(a.id, true, 30*time.Second)
	base := newProject(c, "restart")
	h1 := c.dockerNode(base, "h1", hostImage, a.id, 1)
	h2 := c.dockerNode(base, "h2", hostImage, a.id, 1)
	c.link(base, h1, 0, h2, 0, 0)
	for _, n := range []*nodeReply{&h1, &h2} {
		c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, n)
	}
	for i, n := range []nodeReply{h1, h2} {
		if out, err := inNode(t, n, "ip", "addr", "add", fmt.Sprintf("10.0.8.%d/24", i+1), "dev", "eth0"); err != nil {
			t.Fatalf("address: %v %s", err, out)
		}
	}
	waitIn(t, h1, 20*time.Second, " 0% packet loss", "ping", "-c", "2", "-W", "1", "10.0.8.2")
	id := func(n nodeReply) string {
		out, err := exec.Command("docker", "inspect", "-f", "{{.Id}}", container(n)).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	before := id(h1)

	a.kill(9) // no chance to clean anything up
	c.waitCompute(a.id, false, 30*time.Second)
	if out, _ := inNode(t, h1, "ping", "-c", "1", "-W", "1", "10.0.8.2"); strings.Contains(out, " 0% packet loss") {
		t.Fatal("ping passed with no agent relaying the link")
	}
	a.start()
	c.waitCompute(a.id, true, 30*time.Second)
	// The containers kept their addresses (nothing was re-made), and the
	// link works again.
	waitIn(t, h1, 60*time.Second, " 0% packet loss", "ping", "-c", "2", "-W", "1", "10.0.8.2")
	if after := id(h1); after != before {
		t.Fatalf("the container was replaced: %s → %s", before, after)
	}
	var n nodeReply
	c.call("GET", base+"/nodes/"+h1.NodeID, nil, 200, &n)
	if n.Status != "started" {
		t.Fatalf("node after the agent restart: %+v", n)
	}
	c.call("DELETE", base, nil, 204, nil)
}

func TestADockerNodeUpdateRemakesItsContainerOnlyWhileStopped(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "update")
	h := c.dockerNode(base, "h", hostImage, "local", 2)
	var n struct {
		Properties map[string]any `json:"properties"`
		Ports      []struct {
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
		} `json:"ports"`
	}
	c.call("GET", base+"/nodes/"+h.NodeID, nil, 200, &n)
	before, _ := n.Properties["container_id"].(string)
	if before == "" || len(n.Ports) != 2 || n.Ports[1].Name != "eth1" || n.Properties["mac_address"] != n.Ports[0].MACAddress {
		t.Fatalf("node %+v", n)
	}
	c.call("PUT", base+"/nodes/"+h.NodeID, map[string]any{"properties": map[string]any{"environment": "FOO=bar"}}, 200, &n)
	after, _ := n.Properties["container_id"].(string)
	if after == before || n.Properties["environment"] != "FOO=bar" {
		t.Fatalf("after the update: container %s (was %s), properties %v", after, before, n.Properties)
	}
	c.call("POST", base+"/nodes/"+h.NodeID+"/start", nil, 200, &h)
	if out, _ := inNode(t, h, "sh", "-c", "echo $FOO"); strings.TrimSpace(out) != "bar" {
		t.Fatalf("FOO in the container: %q", out)
	}
	// The two adapters are there with the ports' MACs.
	out, _ := inNode(t, h, "ip", "-o", "link")
	for _, p := range n.Ports {
		if !strings.Contains(out, p.Name+"@") || !strings.Contains(out, p.MACAddress) {
			t.Fatalf("%s %s not in the container:\n%s", p.Name, p.MACAddress, out)
		}
	}
	var e struct {
		Message string `json:"message"`
	}
	c.call("PUT", base+"/nodes/"+h.NodeID, map[string]any{"properties": map[string]any{"environment": "FOO=baz"}}, 409, &e)
	if !strings.Contains(e.Message, "must be stopped") {
		t.Fatalf("message %q", e.Message)
	}
	c.call("DELETE", base, nil, 204, nil)
}

// dockerReply is a docker node as the controller shows it.
type dockerReply struct {
	nodeReply
	Name        string         `json:"name"`
	ConsoleType string         `json:"console_type"`
	Properties  map[string]any `json:"properties"`
	Ports       []struct {
		Name       string `json:"name"`
		MACAddress string `json:"mac_address"`
	} `json:"ports"`
}

func TestDockerHTTPConsoleReachesTheWebServerInsideTheContainer(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "http")
	// A template with an http console, as the GUI's wizard makes one; the
	// web server listens on the container's loopback only, so the console
	// can reach it only from inside the container's network namespace.
	var tpl struct {
		TemplateID string `json:"template_id"`
	}
	c.call("POST", "/v2/templates", map[string]any{"name": "web", "template_type": "docker", "compute_id": "local",
		"image": hostImage, "console_type": "http", "console_http_port": 8080, "console_http_path": "/index.html",
		"start_command": `sh -c "mkdir -p /srv && echo hello from $(hostname) > /srv/index.html && exec busybox httpd -f -p 127.0.0.1:8080 -h /srv"`,
	}, 201, &tpl)
	var n dockerReply
	c.call("POST", base+"/templates/"+tpl.TemplateID, map[string]any{"x": 0, "y": 0}, 201, &n)
	if n.ConsoleType != "http" || n.Properties["console_http_port"] != float64(8080) || n.Properties["console_http_path"] != "/index.html" || n.Console == 0 {
		t.Fatalf("node from the template: console %d %q, properties %v", n.Console, n.ConsoleType, n.Properties)
	}
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(n.ConsoleHost, fmt.Sprint(n.Console)), n.Properties["console_http_path"])
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v %q", url, err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.TrimSpace(body) != "hello from "+n.Name {
		t.Fatalf("the console's page: %q", body)
	}

	// The console type is the node's to change, while it is stopped.
	var e struct {
		Message string `json:"message"`
	}
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"console_type": "telnet"}, 409, &e)
	if !strings.Contains(e.Message, "must be stopped to change console_type") {
		t.Fatalf("message %q", e.Message)
	}
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"console_type": "bogus"}, 400, nil)
	c.call("POST", base+"/nodes/"+n.NodeID+"/stop", nil, 200, nil)
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("the http console answers while the node is stopped")
	}
	var none dockerReply
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"console_type": "none"}, 200, &none)
	if none.ConsoleType != "none" || none.Console != 0 {
		t.Fatalf("after console_type none: console %d %q", none.Console, none.ConsoleType)
	}
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerContainerThatExitsIsReportedStoppedOnTheNotificationStream(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "exits")
	follow := c.follow(strings.TrimPrefix(base, "/v2/projects/"))
	var n dockerReply
	c.call("POST", base+"/nodes", map[string]any{"name": "h", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "start_command": "sleep infinity"}}, 201, &n)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	event := func(what, status string) {
		t.Helper()
		err := follow.waitFor("node.updated", 30*time.Second, func(ev json.RawMessage) (bool, error) {
			var got nodeReply
			if err := json.Unmarshal(ev, &got); err != nil {
				return false, err
			}
			return got.NodeID == n.NodeID && got.Status == status, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	stoppedEvent := func(what string) {
		t.Helper()
		event(what, "stopped")
		var now nodeReply
		c.call("GET", base+"/nodes/"+n.NodeID, nil, 200, &now)
		if now.Status != "stopped" {
			t.Fatalf("%s: the node is %s", what, now.Status)
		}
	}
	// Killed behind labtap's back.
	if out, err := exec.Command("docker", "kill", container(n.nodeReply)).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	stoppedEvent("docker kill")

	// Its command ends by itself; it starts again afterwards.
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"start_command": "sleep 2"}}, 200, nil)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	if n.Status != "started" {
		t.Fatalf("start: %+v", n.nodeReply)
	}
	event("start", "started") // what came before (the PUT's node.updated) is behind
	stoppedEvent("the command ended")
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	if n.Status != "started" {
		t.Fatalf("start again: %+v", n.nodeReply)
	}
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerPersistentVolumesAndTheNetworkConfigurationOutliveTheContainer(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "volumes")
	var e struct {
		Message string `json:"message"`
	}
	for _, bad := range []string{"data", "/data/../../etc", "/", "/proc/x", "/a:b"} {
		c.call("POST", base+"/nodes", map[string]any{"name": "bad", "node_type": "docker", "compute_id": "local",
			"properties": map[string]any{"image": hostImage, "extra_volumes": []string{bad}}}, 409, &e)
		if !strings.Contains(e.Message, "Persistent volume '"+bad+"' has invalid format") {
			t.Fatalf("%q: message %q", bad, e.Message)
		}
	}
	var n dockerReply
	c.call("POST", base+"/nodes", map[string]any{"name": "h", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "extra_volumes": []string{"/data/"}, "start_command": "sleep infinity"}}, 201, &n)
	files := base + "/nodes/" + n.NodeID + "/files/etc/network/interfaces"
	// The GUI's "Edit network configuration" reads the file first: a new
	// node has one that configures nothing.
	resp, err := http.Get(c.url + files)
	if err != nil {
		t.Fatal(err)
	}
	sample, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(sample), "#iface eth0 inet static") {
		t.Fatalf("interfaces of a new node: %d %q", resp.StatusCode, sample)
	}
	conf := "auto eth0\niface eth0 inet static\n\taddress 10.0.77.5/24\n"
	req, _ := http.NewRequest("POST", c.url+files, strings.NewReader(conf))
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("write interfaces: %d", resp.StatusCode)
	}
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	waitIn(t, n.nodeReply, 20*time.Second, "10.0.77.5/24", "ip", "-o", "addr", "show", "dev", "eth0")
	// The image's own files of /etc/network (its if-up.d/resolved) were
	// copied in beside it.
	if out, err := inNode(t, n.nodeReply, "sh", "-c", "ls /etc/network /etc/network/if-up.d; cat /etc/network/interfaces"); err != nil ||
		!strings.Contains(out, "resolved") || !strings.Contains(out, "10.0.77.5/24") {
		t.Fatalf("/etc/network in the container: %v\n%s", err, out)
	}
	if out, err := inNode(t, n.nodeReply, "sh", "-c", "echo kept > /etc/network/mine && echo kept > /data/mine && echo lost > /root/mine"); err != nil {
		t.Fatalf("write: %v %s", err, out)
	}
	read := func(what string) string {
		out, _ := inNode(t, n.nodeReply, "sh", "-c", "cat /etc/network/mine /data/mine /root/mine 2>&1")
		return out
	}
	c.call("POST", base+"/nodes/"+n.NodeID+"/stop", nil, 200, nil)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	if out := read("restart"); strings.Count(out, "kept") != 2 || !strings.Contains(out, "lost") {
		t.Fatalf("after stop and start:\n%s", out)
	}
	// A new container (a changed environment) keeps the volumes only.
	c.call("POST", base+"/nodes/"+n.NodeID+"/stop", nil, 200, nil)
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"environment": "A=b"}}, 200, nil)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	if out := read("new container"); strings.Count(out, "kept") != 2 || strings.Contains(out, "lost") {
		t.Fatalf("in the new container:\n%s", out)
	}
	waitIn(t, n.nodeReply, 20*time.Second, "10.0.77.5/24", "ip", "-o", "addr", "show", "dev", "eth0")
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerProjectVariablesAndNodeNamesReachTheEnvironment(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "vars")
	c.call("PUT", base, map[string]any{"variables": []map[string]any{{"name": "SITE", "value": "lab-${ROOM}"}, {"name": "ROOM", "value": "7"}}}, 200, nil)
	follow := c.follow(strings.TrimPrefix(base, "/v2/projects/"))
	var n dockerReply
	c.call("POST", base+"/nodes", map[string]any{"name": "r1", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "start_command": "sleep infinity",
			"environment": "WHERE=${SITE}/${ROOM}\nNAME=%vm-name%\nID=%vm-id%\nPROJECT=%project-id%\nGNS3_X=dropped\n=nameless\n"}}, 201, &n)
	follow.logWarning(t, 10*time.Second, "r1 has invalid environment variable: =nameless")
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	out, err := inNode(t, n.nodeReply, "sh", "-c", `echo "$SITE|$ROOM|$WHERE|$NAME|$ID|$PROJECT|${GNS3_X-unset}"`)
	if err != nil {
		t.Fatal(err)
	}
	// ${name}s are replaced in the variables' order, so SITE's own ${ROOM}
	// is replaced too (GNS3 does the same).
	want := fmt.Sprintf(`lab-7|7|lab-7/7|"r1"|%s|%s|unset`, n.NodeID, strings.TrimPrefix(base, "/v2/projects/"))
	if strings.TrimSpace(out) != want {
		t.Fatalf("environment %q, want %q", strings.TrimSpace(out), want)
	}
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerAdaptersOfARunningContainerAreRefusedAndOfAStoppedOneRemakeIt(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "adapters")
	h := c.dockerNode(base, "h", hostImage, "local", 1)
	peer := c.dockerNode(base, "peer", hostImage, "local", 1)
	c.call("POST", base+"/nodes/"+h.NodeID+"/start", nil, 200, &h)
	var e struct {
		Message string `json:"message"`
	}
	c.call("PUT", base+"/nodes/"+h.NodeID, map[string]any{"properties": map[string]any{"adapters": 3}}, 409, &e)
	if !strings.Contains(e.Message, "h must be stopped to change its number of adapters (1 to 3)") {
		t.Fatalf("message %q", e.Message)
	}
	var n dockerReply
	c.call("GET", base+"/nodes/"+h.NodeID, nil, 200, &n)
	if len(n.Ports) != 1 || n.Properties["adapters"] != float64(1) {
		t.Fatalf("a refused change changed the node: %+v", n)
	}
	c.call("POST", base+"/nodes/"+h.NodeID+"/stop", nil, 200, nil)
	c.call("PUT", base+"/nodes/"+h.NodeID, map[string]any{"properties": map[string]any{"adapters": 3}}, 200, &n)
	if len(n.Ports) != 3 || n.Ports[2].Name != "eth2" {
		t.Fatalf("ports after the change: %+v", n.Ports)
	}
	// The new adapter carries a link like any other.
	c.link(base, h, 2, peer, 0, 0)
	for _, x := range []*nodeReply{&h, &peer} {
		c.call("POST", base+"/nodes/"+x.NodeID+"/start", nil, 200, x)
	}
	if out, err := inNode(t, h, "ip", "addr", "add", "10.0.6.1/24", "dev", "eth2"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := inNode(t, peer, "ip", "addr", "add", "10.0.6.2/24", "dev", "eth0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	waitIn(t, h, 20*time.Second, " 0% packet loss", "ping", "-c", "2", "-W", "1", "10.0.6.2")
	c.call("DELETE", base, nil, 204, nil)
}

func TestDockerStaleContainersOfAKilledAgentAreRemovedAtTheNextOpenAndNobodyElsesAre(t *testing.T) {
	testenv.Docker(t, hostImage)
	secret := "s3cret-stale"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret})
	a := &agentProc{t: t, id: "dockst", listen: "127.0.0.2:0", data: t.TempDir(), env: append(dockerInit(t), "LABTAP_SECRET="+secret), ctl: c.url}
	a.start()
	t.Cleanup(func() { a.kill(15) })
	c.waitCompute(a.id, true, 30*time.Second)
	base := newProject(c, "stale")
	projectID := strings.TrimPrefix(base, "/v2/projects/")
	h := c.dockerNode(base, "h", hostImage, a.id, 1)
	c.call("POST", base+"/nodes/"+h.NodeID+"/start", nil, 200, &h)
	inspect := func(name string) (string, bool) {
		out, err := exec.Command("docker", "inspect", "-f", "{{.Id}}", name).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	old, _ := inspect(container(h))

	// Containers that look like labtap's: one of this project and agent
	// whose node is gone (deleted while the agent was down), and others of
	// another agent, another project, or nobody's (no labels).
	mk := func(name string, labels ...string) string {
		args := []string{"create", "--name", name, "--network", "none"}
		for _, l := range labels {
			args = append(args, "--label", l)
		}
		out, err := exec.Command("docker", append(append(args, hostImage), "sleep", "1")...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker create: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
		return name
	}
	id := func() string { return fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()) }
	orphan := mk("labtap-stale-"+id(), "labtap.project_id="+projectID, "labtap.compute_id="+a.id, "labtap.node_id="+id())
	others := []string{
		mk("labtap-other-agent-"+id(), "labtap.project_id="+projectID, "labtap.compute_id=someone-else", "labtap.node_id="+id()),
		mk("labtap-other-project-"+id(), "labtap.project_id=c0ffee00-0000-4000-8000-000000000000", "labtap.compute_id="+a.id, "labtap.node_id="+id()),
		mk("labtap-" + id()),
	}

	a.kill(9) // leaves its container behind, which then dies too
	c.waitCompute(a.id, false, 30*time.Second)
	if out, err := exec.Command("docker", "stop", "-t", "0", container(h)).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v %s", err, out)
	}
	a.start()
	c.waitCompute(a.id, true, 30*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, orphanThere := inspect(orphan)
		now, nodeThere := inspect(container(h))
		if !orphanThere && nodeThere && now != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the agent came back: stale container there %v, node's container %s (was %s)", orphanThere, now, old)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, o := range others {
		if _, ok := inspect(o); !ok {
			t.Fatalf("%s, not the agent's, was removed", o)
		}
	}
	// The node works with its new container.
	c.call("POST", base+"/nodes/"+h.NodeID+"/start", nil, 200, &h)
	if h.Status != "started" {
		t.Fatalf("node %+v", h)
	}
	c.call("DELETE", base, nil, 204, nil)
	for _, o := range others {
		if _, ok := inspect(o); !ok {
			t.Fatalf("%s, not the project's, was removed with it", o)
		}
	}
}

func TestDockerQemuGuestAndAContainerPingThroughACapturedLink(t *testing.T) {
	guest := tinyGuest(t)
	testenv.Docker(t, hostImage)
	testenv.RequireTools(t, "tshark")
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	copyImages(t, c, guest)
	base := newProject(c, "guest-container")
	var g nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "g1", "node_type": "qemu", "compute_id": "local", "properties": map[string]any{
		"kernel_image": "vmlinuz", "initrd": "initrd.img", "ram": 128, "adapters": 1,
		"kernel_command_line": "console=ttyS0 no_timer_check labtap.name=g1 labtap.ip=10.0.5.1/24",
	}}, 201, &g)
	h := c.dockerNode(base, "h", hostImage, "local", 1)
	l := c.link(base, g, 0, h, 0, 0)
	for _, n := range []*nodeReply{&g, &h} {
		c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, n)
	}
	if out, err := inNode(t, h, "ip", "addr", "add", "10.0.5.2/24", "dev", "eth0"); err != nil {
		t.Fatalf("address the container: %v %s", err, out)
	}
	con := dialGuest(t, g.ConsoleHost, g.Console)
	con.expect(t, 0, regexp.MustCompile(`labtap-guest ready g1`), 3*time.Minute)
	linkPath := base + "/links/" + l.LinkID
	var started linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, &started)
	out := con.run(t, "ping -c 3 -W 5 10.0.5.2", 2*time.Minute)
	if got := regexp.MustCompile(`(\d+) packets received`).FindStringSubmatch(out); got == nil || got[1] == "0" {
		t.Fatalf("guest → container: %s", out)
	}
	if out, err := inNode(t, h, "ping", "-c", "2", "-W", "5", "10.0.5.1"); err != nil {
		t.Fatalf("container → guest: %v %s", err, out)
	}
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)
	pcap := deref(started.CaptureFilePath)
	for _, f := range []string{
		"icmp.type == 8 && ip.src == 10.0.5.1", "icmp.type == 0 && ip.src == 10.0.5.2",
		"icmp.type == 8 && ip.src == 10.0.5.2", "icmp.type == 0 && ip.src == 10.0.5.1",
	} {
		if n := tsharkCount(t, pcap, f); n < 2 {
			t.Fatalf("the link's capture holds %d frames of %s", n, f)
		}
	}
	c.call("DELETE", base, nil, 204, nil)
}
