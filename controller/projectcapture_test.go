package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// projectCaptureReply is the reply of the project capture routes.
type projectCaptureReply struct {
	Capturing  bool   `json:"capturing"`
	FileName   string `json:"capture_file_name"`
	FilePath   string `json:"capture_file_path"`
	Links      int    `json:"links"`
	Interfaces int    `json:"interfaces"`
	Frames     uint64 `json:"frames"`
}

func TestAProjectCaptureOnTwoAgentsHoldsEveryLinkAndDirection(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark")
	const secret = "project-capture-secret"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret})
	startAgent(t, "agent1", "127.0.0.2", secret, c.url)
	startAgent(t, "agent2", "127.0.0.3", secret, c.url)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)

	// PC1 and SW1 on agent1, PC2 on agent2: PC1 - SW1 - PC2.
	var proj struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "three nodes"}, 201, &proj)
	base := "/v2/projects/" + proj.ProjectID
	pcs := []*pc{{ip: "10.0.0.1"}, {ip: "10.0.0.2"}}
	for i, compute := range []string{"agent1", "agent2"} {
		c.call("POST", base+"/nodes", map[string]any{"name": fmt.Sprint("PC", i+1), "node_type": "vpcs", "compute_id": compute}, 201, &pcs[i].node)
	}
	var sw nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "SW1", "node_type": "ethernet_switch", "compute_id": "agent1"}, 201, &sw)
	link := func(a string, aport int, b string, bport int) linkReply {
		var l linkReply
		c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
			{"node_id": a, "adapter_number": 0, "port_number": aport},
			{"node_id": b, "adapter_number": 0, "port_number": bport},
		}}, 201, &l)
		return l
	}
	first := link(pcs[0].node.NodeID, 0, sw.NodeID, 1)
	for i, p := range pcs {
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		if p.node.ConsoleHost != fmt.Sprint("127.0.0.", i+2) {
			t.Fatalf("PC%d runs on %s", i+1, p.node.ConsoleHost)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}

	// The capture starts with one link; the other, across the agents,
	// joins it when it is made.
	var started projectCaptureReply
	c.call("POST", base+"/start_capture", map[string]any{}, 201, &started)
	if !started.Capturing || started.FileName != "threenodes_all.pcapng" || started.Links != 1 {
		t.Fatalf("start_capture: %+v", started)
	}
	c.call("POST", base+"/start_capture", map[string]any{}, 409, nil)
	resp, err := http.Get(c.url + base + "/pcap")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-pcapng" {
		t.Fatalf("project stream: %v %v", err, resp)
	}
	streamed := make(chan []byte, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		streamed <- b
	}()
	link(sw.NodeID, 2, pcs[1].node.NodeID, 0)
	var joined projectCaptureReply
	for deadline := time.Now().Add(30 * time.Second); joined.Links < 2; {
		c.call("POST", base+"/start_capture", map[string]any{}, 409, nil)
		var links []linkReply
		c.call("GET", base+"/links", nil, 200, &links)
		capturing := 0
		for _, l := range links {
			if l.Capturing {
				capturing++
			}
		}
		if capturing == 2 {
			joined.Links = 2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new link did not join the capture: %+v", links)
		}
		time.Sleep(100 * time.Millisecond)
	}
	setAddresses(t, pcs)
	if n := pcs[0].ping(t, pcs[1].ip, 3); n < 2 {
		t.Fatalf("%d of 3 pings answered", n)
	}

	// While it runs, a link reports what its capture wrote so far.
	var counted struct {
		Capture struct {
			Frames uint64 `json:"frames"`
			Spec   struct {
				Format string `json:"capture_format"`
			} `json:"spec"`
		} `json:"capture"`
	}
	c.call("GET", base+"/links/"+first.LinkID, nil, 200, &counted)
	if counted.Capture.Frames == 0 || counted.Capture.Spec.Format != "pcapng" {
		t.Fatalf("the first link's capture while it runs: %+v", counted.Capture)
	}

	var stopped projectCaptureReply
	c.call("POST", base+"/stop_capture", nil, 201, &stopped)
	if stopped.Capturing || stopped.Interfaces != 4 || stopped.Frames == 0 {
		t.Fatalf("stop_capture: %+v", stopped)
	}
	c.call("POST", base+"/stop_capture", nil, 409, nil)
	var live []byte
	select {
	case live = <-streamed:
	case <-time.After(30 * time.Second):
		t.Fatal("the project stream did not end with the capture")
	}
	file := mustRead(t, stopped.FilePath)
	if !bytes.Equal(live, file) {
		t.Fatalf("the stream (%d bytes) is not the file (%d bytes)", len(live), len(file))
	}

	// tshark: every link and direction is an interface with its frames.
	out, err := exec.Command("tshark", "-r", stopped.FilePath, "-Y", "icmp", "-T", "fields",
		"-e", "frame.interface_name", "-e", "icmp.type").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		counts[line]++
	}
	for _, want := range []string{
		"PC1 Ethernet0 → SW1 Ethernet1\t8", "SW1 Ethernet2 → PC2 Ethernet0\t8",
		"PC2 Ethernet0 → SW1 Ethernet2\t0", "SW1 Ethernet1 → PC1 Ethernet0\t0",
	} {
		if counts[want] < 2 {
			t.Errorf("tshark finds %d frames %q; all: %v", counts[want], want, counts)
		}
	}
	// The links' streams are merged in timestamp order: the agents share
	// this machine's clock, so the whole file is in time order (each
	// echo crosses both links, request and reply in opposite orders).
	out, err = exec.Command("tshark", "-r", stopped.FilePath, "-T", "fields", "-e", "frame.time_epoch").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	prev := ""
	for i, line := range strings.Fields(string(out)) {
		if prev != "" && !epochNotBefore(line, prev) {
			t.Fatalf("frame %d at %s, before the frame ahead of it (%s)", i+1, line, prev)
		}
		prev = line
	}
}

// epochNotBefore compares two of tshark's frame.time_epoch values
// ("1700000000.123456789"): a is not earlier than b.
func epochNotBefore(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) > len(bs)
	}
	pad := func(f string) string { return (f + "000000000")[:9] }
	return as+pad(af) >= bs+pad(bf)
}

// A whole-project capture of a project that is deleted or closed ends: it
// went on with its file open (a deleted file, for a deleted project) and
// its goroutines asking for the links of a project that was gone.
func TestAProjectCaptureEndsWithItsProject(t *testing.T) {
	testenv.RequireTools(t, "vpcs")
	if testing.Short() {
		t.Skip("starts a controller and VPCS")
	}
	c := startController(t)
	c.waitCompute("local", true, 20*time.Second)
	held := func(project string) []string {
		var open []string
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.cmd.Process.Pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c.cmd.Process.Pid, fd.Name())); err == nil && strings.Contains(target, project+"/project-files/captures/") {
				open = append(open, target)
			}
		}
		return open
	}
	for _, end := range []struct{ method, suffix string }{{"DELETE", ""}, {"POST", "/close"}} {
		lab := c.twoPCs("ends"+strings.TrimPrefix(end.suffix, "/"), "local", "local", "10.0.0.1", "10.0.0.2")
		c.call("POST", lab.base+"/nodes/start", nil, 204, nil)
		c.call("POST", lab.base+"/start_capture", map[string]any{}, 201, nil)
		if len(held(lab.projectID)) == 0 {
			t.Fatalf("the project capture holds no file of project %s", lab.projectID)
		}
		c.call(end.method, lab.base+end.suffix, nil, 204, nil)
		deadline := time.Now().Add(30 * time.Second) // a bound for a loaded machine, not a speed
		for len(held(lab.projectID)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if open := held(lab.projectID); len(open) > 0 {
			t.Errorf("%s %s: the controller still holds %q", end.method, lab.base+end.suffix, open)
		}
	}
}
