package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// These tests run the real controller binary, with its embedded agent, real
// vpcs processes making ARP and ICMP traffic, and tshark reading the
// captures. scripts/test installs vpcs and tshark and sets
// LABTAP_REQUIRE_TOOLS=1, so there a missing tool fails instead of skipping.

// builds holds the binaries the tests built, by package: each is built
// once per test run.
var builds sync.Map // package path → func() (string, error)

// built builds the command in package pkg (relative to this directory) as
// name, once per test run, and returns its path.
func built(t *testing.T, name, pkg string) string {
	t.Helper()
	testenv.Long(t, "builds and runs labtap's binaries")
	f, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "labtap-e2e-")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return bin, nil
	}))
	bin, err := f.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// controllerBinary builds the controller once per test run.
func controllerBinary(t *testing.T) string { return built(t, "controller", ".") }

// controller is a running controller process.
type controller struct {
	t    *testing.T
	url  string
	data string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
	// user and password, when set, go with every request of call.
	user, password string
	// client, when set, sends call's requests (an HTTPS controller's).
	client *http.Client
}

var listenLine = regexp.MustCompile(`msg="controller listening" addr=(\S+)`)

// startController runs the controller on an ephemeral loopback port with a
// fresh data directory, and stops it when the test ends.
func startController(t *testing.T) *controller {
	t.Helper()
	return startControllerIn(t, t.TempDir())
}

// startControllerIn runs the controller on a given data directory.
func startControllerIn(t *testing.T, data string) *controller {
	t.Helper()
	return startControllerWith(t, data, nil)
}

// startControllerWith runs the controller on a given data directory, with
// more environment and flags.
func startControllerWith(t *testing.T, data string, env []string, args ...string) *controller {
	t.Helper()
	return startControllerUnder(t, nil, data, env, args...)
}

// startControllerUnder runs the controller as the last argument of a
// wrapper command (e.g. unshare), or directly if wrapper is empty.
func startControllerUnder(t *testing.T, wrapper []string, data string, env []string, args ...string) *controller {
	t.Helper()
	c := &controller{t: t, data: data, log: &syncBuffer{}, done: make(chan error, 1)}
	argv := append(append(wrapper[:len(wrapper):len(wrapper)], controllerBinary(t), "--listen", "127.0.0.1:0", "--data-dir", c.data, "--log-level", "debug"), args...)
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = append(os.Environ(), env...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.log.WriteString(line + "\n")
			if m := listenLine.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		c.done <- c.cmd.Wait()
	}()
	select {
	case a := <-addr:
		c.url = "http://" + a
	case err := <-c.done:
		t.Fatalf("controller exited at start: %v\n%s", err, c.log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("controller did not start:\n%s", c.log.String())
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("controller log:\n%s", c.log.String())
		}
	})
	return c
}

// stop sends SIGTERM and waits; it reports an exit that is not clean.
func (c *controller) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			c.t.Errorf("controller exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		c.t.Error("controller did not stop within 20 s of SIGTERM")
	}
}

// call sends a JSON request and decodes the reply into out, failing the
// test unless the status is want.
func (c *controller) call(method, path string, body any, want int, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	client := http.DefaultClient
	if c.client != nil {
		client = c.client
	}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

type nodeReply struct {
	NodeID      string `json:"node_id"`
	Console     int    `json:"console"`
	ConsoleHost string `json:"console_host"`
	Status      string `json:"status"`
}

type linkReply struct {
	LinkID           string  `json:"link_id"`
	Capturing        bool    `json:"capturing"`
	CaptureComputeID *string `json:"capture_compute_id"`
	CaptureFileName  *string `json:"capture_file_name"`
	CaptureFilePath  *string `json:"capture_file_path"`
}

// pc is a VPCS node of the lab, with its console.
type pc struct {
	node nodeReply
	con  *node.Console
	ip   string
}

var pingOK = regexp.MustCompile(`icmp_seq=\d+ ttl=\d+ time=`)

// ping pings from p and returns how many replies VPCS printed.
func (p *pc) ping(t *testing.T, ip string, count int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := p.con.Run(ctx, fmt.Sprintf("ping %s -c %d", ip, count))
	if err != nil {
		t.Fatalf("ping: %v (%q)", err, out)
	}
	return len(pingOK.FindAllString(out, -1))
}

func (p *pc) run(t *testing.T, cmd string) string {
	t.Helper()
	out, err := p.try(t.Context(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// try runs a console command and returns its output; it may be called from
// any goroutine.
func (p *pc) try(ctx context.Context, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := p.con.Run(ctx, cmd)
	if err != nil {
		return out, fmt.Errorf("%s: %v (%q)", cmd, err, out)
	}
	return out, nil
}

// setAddresses gives every PC its address, all at once: VPCS spends about
// 3 s on each checking that the address is free.
func setAddresses(t *testing.T, pcs []*pc) {
	t.Helper()
	errs := make([]error, len(pcs))
	var wg sync.WaitGroup
	for i, p := range pcs {
		wg.Go(func() { _, errs[i] = p.try(t.Context(), "ip "+p.ip+"/24") })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// pcLab is a project with two VPCS, PC1 and PC2, linked by their
// Ethernet0 ports.
type pcLab struct {
	projectID string
	base      string // the project's API path
	pcs       []*pc
	link      linkReply
}

// twoPCs creates a pcLab named name, PC1 on compute1 and PC2 on compute2,
// with the addresses the PCs will be given.
func (c *controller) twoPCs(name, compute1, compute2, ip1, ip2 string) pcLab {
	c.t.Helper()
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": name}, 201, &project)
	lab := pcLab{projectID: project.ProjectID, base: "/v2/projects/" + project.ProjectID, pcs: []*pc{{ip: ip1}, {ip: ip2}}}
	for i, compute := range []string{compute1, compute2} {
		c.call("POST", lab.base+"/nodes", map[string]any{"name": fmt.Sprint("PC", i+1), "node_type": "vpcs", "compute_id": compute}, 201, &lab.pcs[i].node)
	}
	c.call("POST", lab.base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": lab.pcs[0].node.NodeID, "adapter_number": 0, "port_number": 0},
		{"node_id": lab.pcs[1].node.NodeID, "adapter_number": 0, "port_number": 0},
	}}, 201, &lab.link)
	return lab
}

func TestCaptureOnALinkBetweenTwoRunningVPCSHoldsTheirRealFrames(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark", "capinfos")
	c := startController(t)

	lab := c.twoPCs("e2e", "local", "local", "10.0.0.1", "10.0.0.2")
	base, pcs, link := lab.base, lab.pcs, lab.link
	linkPath := base + "/links/" + link.LinkID

	for _, p := range pcs {
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		if p.node.Status != "started" || p.node.ConsoleHost != "127.0.0.1" || p.node.Console == 0 {
			t.Fatalf("started node: %+v", p.node)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		p.con = con
	}
	setAddresses(t, pcs)
	if n := pcs[0].ping(t, pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply before the capture: the link does not carry frames")
	}
	// Forget the neighbours so the capture sees ARP as well as ICMP.
	for _, p := range pcs {
		p.run(t, "clear arp")
	}

	// A capture with an empty object as body: Ethernet, default name.
	var started linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, &started)
	wantName := "PC1_0-0_to_PC2_0-0.pcap"
	wantPath := filepath.Join(c.data, "projects", lab.projectID, "project-files", "captures", wantName)
	if !started.Capturing || deref(started.CaptureComputeID) != "local" || deref(started.CaptureFileName) != wantName ||
		deref(started.CaptureFilePath) != wantPath {
		t.Fatalf("start_capture reply: %+v", started)
	}
	stream := openStream(t, c.url+linkPath+"/pcap")

	replies := pcs[0].ping(t, pcs[1].ip, 3)
	if replies < 2 {
		t.Fatalf("%d of 3 pings answered during the capture", replies)
	}
	var stopped linkReply
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	if stopped.Capturing || stopped.CaptureComputeID != nil || deref(stopped.CaptureFileName) != wantName ||
		deref(stopped.CaptureFilePath) != wantPath {
		t.Fatalf("stop_capture reply: %+v", stopped)
	}

	got := readCapture(t, wantPath, layers.LinkTypeEthernet)
	if got.arpRequests == 0 || got.arpReplies == 0 {
		t.Fatalf("capture has %d ARP requests and %d replies between the PCs, want both", got.arpRequests, got.arpReplies)
	}
	if got.echoRequests < replies || got.echoReplies < replies {
		t.Fatalf("capture has %d echo requests and %d replies, the PCs saw %d replies", got.echoRequests, got.echoReplies, replies)
	}
	// tshark reads the file and finds the same ICMP frames.
	if n := tsharkCount(t, wantPath, "icmp"); n != got.icmp {
		t.Fatalf("tshark counts %d ICMP frames, gopacket %d", n, got.icmp)
	}
	if out, err := exec.Command("capinfos", wantPath).CombinedOutput(); err != nil {
		t.Fatalf("capinfos: %v\n%s", err, out)
	}
	// The live stream, opened after the start, holds the whole file and
	// ended cleanly when the capture stopped.
	if body := stream.wait(t); !bytes.Equal(body, mustRead(t, wantPath)) {
		t.Fatalf("stream has %d bytes, the file %d", len(body), len(mustRead(t, wantPath)))
	}

	// The same link captured as Cisco HDLC: the header says 104.
	c.call("POST", linkPath+"/start_capture", map[string]any{"data_link_type": "DLT_C_HDLC", "capture_file_name": "hdlc"}, 201, &started)
	if deref(started.CaptureFileName) != "hdlc.pcap" {
		t.Fatalf("HDLC capture name %q", deref(started.CaptureFileName))
	}
	pcs[1].ping(t, pcs[0].ip, 1)
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	readCapture(t, deref(started.CaptureFilePath), layers.LinkTypeC_HDLC)
	if out, err := exec.Command("tshark", "-r", deref(started.CaptureFilePath)).CombinedOutput(); err != nil {
		t.Fatalf("tshark on the HDLC capture: %v\n%s", err, out)
	}

	// Deleting the project stops its nodes: their consoles go away.
	c.call("DELETE", base, nil, 204, nil)
	for _, p := range pcs {
		addr := net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console))
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Fatalf("console %s still open after the project was deleted", addr)
		}
	}
}

func TestControllerShutdownLeavesAValidCaptureAndNoNodeRunning(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark")
	c := startController(t)
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "shutdown"}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	var a, b nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "A", "node_type": "vpcs", "compute_id": "local"}, 201, &a)
	c.call("POST", base+"/nodes", map[string]any{"name": "B", "node_type": "vpcs", "compute_id": "local"}, 201, &b)
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a.NodeID, "adapter_number": 0, "port_number": 0},
		{"node_id": b.NodeID, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	c.call("POST", base+"/nodes/"+a.NodeID+"/start", nil, 200, &a)
	var started linkReply
	c.call("POST", base+"/links/"+link.LinkID+"/start_capture", nil, 201, &started)
	stream := openStream(t, c.url+base+"/links/"+link.LinkID+"/pcap")
	con, err := node.DialConsole(t.Context(), net.JoinHostPort(a.ConsoleHost, fmt.Sprint(a.Console)))
	if err != nil {
		t.Fatal(err)
	}
	(&pc{con: con}).run(t, "ip 10.1.0.1/24") // gratuitous ARPs cross the link
	con.Close()

	c.stop() // SIGTERM while capturing and streaming
	path := deref(started.CaptureFilePath)
	got := readCapture(t, path, layers.LinkTypeEthernet)
	if got.frames == 0 {
		t.Fatal("no frame in the capture")
	}
	if out, err := exec.Command("tshark", "-r", path).CombinedOutput(); err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	stream.wait(t) // the stream ended with the controller
	addr := net.JoinHostPort(a.ConsoleHost, fmt.Sprint(a.Console))
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("node console %s still open after the controller stopped", addr)
	}
}

// capture summarises a pcap file.
type capture struct {
	frames, icmp                         int
	arpRequests, arpReplies              int
	echoRequests, echoReplies            int
	firstIP, secondIP                    string
	linkType                             layers.LinkType
	wholeRecords, nonDecreasingTimestamp bool
}

// readCapture reads a pcap with gopacket, checks its link type, that every
// record is whole and that time never goes back, and counts the ARP and
// ICMP echo frames between 10.0.0.1 and 10.0.0.2.
func readCapture(t *testing.T, path string, want layers.LinkType) capture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.LinkType() != want {
		t.Fatalf("%s: link type %d, want %d", path, r.LinkType(), want)
	}
	var c capture
	var last time.Time
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: record %d: %v", path, c.frames, err)
		}
		if ci.CaptureLength != ci.Length || len(data) != ci.Length {
			t.Fatalf("%s: record %d is not whole: %d of %d bytes", path, c.frames, ci.CaptureLength, ci.Length)
		}
		if ci.Timestamp.Before(last) {
			t.Fatalf("%s: record %d goes back in time", path, c.frames)
		}
		last = ci.Timestamp
		c.frames++
		if want != layers.LinkTypeEthernet {
			continue
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if arp, ok := pkt.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
			src, dst := net.IP(arp.SourceProtAddress).String(), net.IP(arp.DstProtAddress).String()
			switch {
			case arp.Operation == layers.ARPRequest && src == "10.0.0.1" && dst == "10.0.0.2":
				c.arpRequests++
			case arp.Operation == layers.ARPReply && src == "10.0.0.2" && dst == "10.0.0.1":
				c.arpReplies++
			}
		}
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		icmp, _ := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if ip == nil || icmp == nil {
			continue
		}
		c.icmp++
		switch {
		case icmp.TypeCode.Type() == layers.ICMPv4TypeEchoRequest && ip.SrcIP.String() == "10.0.0.1" && ip.DstIP.String() == "10.0.0.2":
			c.echoRequests++
		case icmp.TypeCode.Type() == layers.ICMPv4TypeEchoReply && ip.SrcIP.String() == "10.0.0.2" && ip.DstIP.String() == "10.0.0.1":
			c.echoReplies++
		}
	}
	return c
}

// tsharkCount runs tshark on a file with a display filter and counts the
// frames it prints; tshark must exit 0.
func tsharkCount(t *testing.T, path, filter string) int {
	t.Helper()
	out, err := exec.Command("tshark", "-r", path, "-Y", filter).Output()
	if err != nil {
		t.Fatalf("tshark -r %s -Y %s: %v", path, filter, err)
	}
	return len(strings.Split(strings.TrimSpace(string(out)), "\n")) - boolToInt(len(bytes.TrimSpace(out)) == 0)
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// liveStream reads a capture stream in the background.
type liveStream struct {
	done chan []byte
	err  chan error
}

// openStream starts reading a pcap stream and waits for its 24-byte header,
// which must arrive at once, before any frame.
func openStream(t *testing.T, url string) *liveStream {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.tcpdump.pcap" {
		resp.Body.Close()
		t.Fatalf("pcap stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	header := make([]byte, 24)
	if _, err := io.ReadFull(resp.Body, header); err != nil {
		t.Fatalf("stream header: %v", err)
	}
	s := &liveStream{done: make(chan []byte, 1), err: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		rest, err := io.ReadAll(resp.Body) // ends when the chunked body ends
		s.done <- append(header, rest...)
		s.err <- err
	}()
	return s
}

// wait returns the whole stream once it has ended, cleanly.
func (s *liveStream) wait(t *testing.T) []byte {
	t.Helper()
	select {
	case body := <-s.done:
		if err := <-s.err; err != nil {
			t.Fatalf("stream ended with %v, want a clean end", err)
		}
		return body
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end after the capture stopped")
		return nil
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
