package main

import (
	"bufio"
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// These tests run a controller and agents as separate processes, each
// agent on its own loopback address (127.0.0.2, 127.0.0.3) as if on its
// own host, with the shared secret, real VPCS on each and a link across.

// agentBinary builds the agent once per test run.
func agentBinary(t *testing.T) string { return built(t, "agent", "../agent") }

// agentProc is a running agent process.
type agentProc struct {
	t      *testing.T
	id     string
	listen string // as asked; "127.0.0.2:0" at first, its real address to restart
	addr   string // where it listens
	data   string
	env    []string
	ctl    string
	wrap   []string // a command the agent runs under, e.g. ip netns exec NAME
	args   []string // more flags (--join ...)
	cmd    *exec.Cmd
	log    *syncBuffer
	done   chan error
}

var agentListenLine = regexp.MustCompile(`msg="agent listening" addr=(\S+)`)

func startAgent(t *testing.T, id, ip, secret, controllerURL string) *agentProc {
	t.Helper()
	return startAgentUnder(t, nil, id, ip, secret, controllerURL)
}

// startAgentUnder starts an agent as the last argument of wrap.
func startAgentUnder(t *testing.T, wrap []string, id, ip, secret, controllerURL string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, id: id, listen: ip + ":0", data: t.TempDir(), env: []string{"LABTAP_SECRET=" + secret}, ctl: controllerURL, wrap: wrap}
	a.start()
	t.Cleanup(func() {
		a.kill(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent %s log:\n%s", a.id, a.log.String())
		}
	})
	return a
}

// start runs the agent (again, on the address it had, if it ran before).
func (a *agentProc) start() {
	a.t.Helper()
	a.log, a.done = &syncBuffer{}, make(chan error, 1)
	listen := a.listen
	if a.addr != "" {
		listen = a.addr
	}
	args := []string{"--listen", listen, "--data-dir", a.data, "--compute-id", a.id, "--log-level", "debug"}
	if a.ctl != "" {
		args = append(args, "--controller", a.ctl)
	}
	args = append(args, a.args...)
	argv := append(append(a.wrap[:len(a.wrap):len(a.wrap)], agentBinary(a.t)), args...)
	a.cmd = exec.Command(argv[0], argv[1:]...)
	a.cmd.Env = append(os.Environ(), a.env...)
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	addr := make(chan string, 1)
	log, done := a.log, a.done
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := agentListenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		done <- a.cmd.Wait()
	}()
	select {
	case a.addr = <-addr:
	case err := <-done:
		a.t.Fatalf("agent %s exited at start: %v\n%s", a.id, err, log.String())
	case <-time.After(20 * time.Second):
		a.t.Fatalf("agent %s did not start:\n%s", a.id, log.String())
	}
}

// kill ends the agent with sig and waits for it.
func (a *agentProc) kill(sig syscall.Signal) {
	if a.cmd.ProcessState != nil {
		return
	}
	a.cmd.Process.Signal(sig)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
}

// compute is the part of a GNS3 compute the tests read.
type computeReply struct {
	ComputeID string   `json:"compute_id"`
	Connected bool     `json:"connected"`
	Host      string   `json:"host"`
	CPU       *float64 `json:"cpu_usage_percent"`
}

// waitCompute waits until the controller reports compute id connected (or
// not), and returns it.
func (c *controller) waitCompute(id string, connected bool, within time.Duration) computeReply {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var list []computeReply
		c.call("GET", "/v2/computes", nil, 200, &list)
		for _, cp := range list {
			if cp.ComputeID == id && cp.Connected == connected {
				return cp
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("compute %s not connected=%v after %v: %+v", id, connected, within, list)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// notifications reads a project's notification stream in the background.
type notifications struct {
	msgs chan map[string]json.RawMessage
	body io.Closer
}

func (c *controller) follow(projectID string) *notifications {
	c.t.Helper()
	client := http.DefaultClient
	if c.client != nil {
		client = c.client
	}
	resp, err := client.Get(c.url + "/v2/projects/" + projectID + "/notifications")
	if err != nil {
		c.t.Fatal(err)
	}
	n := &notifications{msgs: make(chan map[string]json.RawMessage, 1024), body: resp.Body}
	go func() {
		defer close(n.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				n.msgs <- m
			}
		}
	}()
	c.t.Cleanup(func() { resp.Body.Close() })
	return n
}

// linkUpdated waits for a link.updated notification of link that ok
// accepts.
func (n *notifications) linkUpdated(t *testing.T, linkID string, within time.Duration, ok func(linkReply) bool) linkReply {
	t.Helper()
	l, err := n.waitLink(linkID, within, ok)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitLink is linkUpdated for any goroutine: it returns an error instead
// of failing the test.
func (n *notifications) waitLink(linkID string, within time.Duration, ok func(linkReply) bool) (l linkReply, err error) {
	err = n.waitFor("link.updated", within, func(event json.RawMessage) (bool, error) {
		l = linkReply{}
		if err := json.Unmarshal(event, &l); err != nil {
			return false, err
		}
		return l.LinkID == linkID && ok(l), nil
	})
	if err != nil {
		err = fmt.Errorf("link %s: %w", linkID, err)
	}
	return l, err
}

// waitFor reads notifications until one of action that accept takes.
func (n *notifications) waitFor(action string, within time.Duration, accept func(event json.RawMessage) (bool, error)) error {
	deadline := time.After(within)
	for {
		select {
		case m, open := <-n.msgs:
			if !open {
				return fmt.Errorf("the notification stream ended")
			}
			if string(m["action"]) != `"`+action+`"` {
				continue
			}
			if ok, err := accept(m["event"]); ok || err != nil {
				return err
			}
		case <-deadline:
			return fmt.Errorf("no matching %s within %v", action, within)
		}
	}
}

func TestALinkAcrossTwoAgentsCapturesThroughAControllerRestartAnAgentCutOffAndAnAgentDeath(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark", "capinfos")
	// Joined agents, called over mutual TLS (LABTAP_SECRET's agents are
	// TestAgentsRefuseCallsWithoutTheSharedSecret's and the console tests').
	ctlData := t.TempDir()
	c, _ := startTLSControllerIn(t, ctlData, nil)
	caSHA := caLine.FindStringSubmatch(c.log.String())[1]
	a1 := startJoinedAgent(t, c, "agent1", "127.0.0.2", c.joinToken(), caSHA)
	startJoinedAgent(t, c, "agent2", "127.0.0.3", c.joinToken(), caSHA)
	// They registered themselves, and the controller follows them.
	if cp := c.waitCompute("agent1", true, 20*time.Second); cp.Host != "127.0.0.2" {
		t.Fatalf("agent1 registered as %+v", cp)
	}
	c.waitCompute("agent2", true, 20*time.Second)

	lab := c.twoPCs("two-hosts", "agent1", "agent2", "10.0.0.1", "10.0.0.2")
	base, pcs, link := lab.base, lab.pcs, lab.link
	linkPath := base + "/links/" + link.LinkID

	startPC := func(p *pc, wantHost string) {
		t.Helper()
		c.call("POST", base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		if p.node.Status != "started" || p.node.ConsoleHost != wantHost {
			t.Fatalf("started node: %+v, want its console on %s", p.node, wantHost)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { con.Close() })
		p.con = con
	}
	for i, p := range pcs {
		startPC(p, fmt.Sprint("127.0.0.", i+2))
	}
	setAddresses(t, pcs)
	if n := pcs[0].ping(t, pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply across the two agents")
	}

	// The capture runs on agent1 (the first started endpoint, as GNS3 picks).
	var started linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, &started)
	if !started.Capturing || deref(started.CaptureComputeID) != "agent1" ||
		!strings.HasPrefix(deref(started.CaptureFilePath), a1.data+string(filepath.Separator)) {
		t.Fatalf("start_capture: %+v (agent1's data is %s)", started, a1.data)
	}
	pcapPath := deref(started.CaptureFilePath)
	before := pcs[0].ping(t, pcs[1].ip, 3)
	if before < 2 {
		t.Fatalf("%d of 3 pings answered during the capture", before)
	}

	// The controller restarts; the agents go on. It finds the lab and the
	// running capture again.
	c.stop()
	c, _ = startTLSControllerIn(t, ctlData, nil)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)
	var got linkReply
	c.call("GET", linkPath, nil, 200, &got)
	if !got.Capturing || deref(got.CaptureComputeID) != "agent1" || deref(got.CaptureFilePath) != pcapPath {
		t.Fatalf("after a controller restart the link says %+v", got)
	}
	var nodes []nodeReply
	c.call("GET", base+"/nodes", nil, 200, &nodes)
	for _, n := range nodes {
		if n.Status != "started" {
			t.Fatalf("after a controller restart node %+v", n)
		}
	}
	during := pcs[1].ping(t, pcs[0].ip, 2)

	// agent1 is cut off (frozen: its connections stay open and silent).
	// Three missed pings later, nobody can tell the capture still runs, and
	// the link says so; when agent1 answers again, it is found still
	// writing the same file, and the link says so too.
	notes := c.follow(lab.projectID)
	a1.cmd.Process.Signal(syscall.SIGSTOP)
	cut := notes.linkUpdated(t, link.LinkID, 20*time.Second, func(l linkReply) bool { return !l.Capturing })
	if deref(cut.CaptureFilePath) != pcapPath {
		t.Fatalf("link while agent1 is cut off: %+v", cut)
	}
	c.waitCompute("agent1", false, 5*time.Second)
	a1.cmd.Process.Signal(syscall.SIGCONT)
	back := notes.linkUpdated(t, link.LinkID, 20*time.Second, func(l linkReply) bool { return l.Capturing })
	if deref(back.CaptureComputeID) != "agent1" || deref(back.CaptureFilePath) != pcapPath {
		t.Fatalf("link once agent1 answers again: %+v", back)
	}
	during += pcs[1].ping(t, pcs[0].ip, 2)

	// agent1 dies mid-capture.
	a1.kill(syscall.SIGKILL)
	lost := notes.linkUpdated(t, link.LinkID, 10*time.Second, func(l linkReply) bool { return !l.Capturing })
	if lost.CaptureComputeID != nil || deref(lost.CaptureFilePath) != pcapPath {
		t.Fatalf("link after its capturing agent died: %+v", lost)
	}
	notes.logWarning(t, 5*time.Second, "compute agent1 cannot be reached")
	c.call("GET", linkPath, nil, 200, &got)
	if got.Capturing {
		t.Fatalf("GET link still says capturing: %+v", got)
	}
	c.waitCompute("agent1", false, 10*time.Second)
	// Every whole frame written before the kill is there; at most the last
	// one is torn.
	icmp, torn := readWholeRecords(t, pcapPath)
	if icmp < 2*(before+during) {
		t.Fatalf("capture holds %d ICMP frames, the PCs saw %d replies", icmp, before+during)
	}
	t.Logf("after kill -9: %d ICMP frames, %d bytes torn", icmp, torn)

	// The project stays usable while agent1 is away.
	c.call("PUT", base+"/nodes/"+pcs[1].node.NodeID, map[string]any{"name": "PC2-renamed"}, 200, nil)

	// agent1 comes back on its address: the controller reconciles it.
	// Its VPCS died with it, so PC1 is stopped; the torn capture is cut
	// back to its last whole frame.
	a1.start()
	c.waitCompute("agent1", true, 20*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n nodeReply
		c.call("GET", base+"/nodes/"+pcs[0].node.NodeID, nil, 200, &n)
		if n.Status == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PC1 on the restarted agent: %+v, want stopped", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(pcapPath + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("the capture was not repaired: %v", err)
	}
	if out, err := exec.Command("capinfos", pcapPath).CombinedOutput(); err != nil || strings.Contains(string(out), "cut short") {
		t.Fatalf("capinfos after repair: %v\n%s", err, out)
	}
	if n := tsharkCount(t, pcapPath, "icmp"); n != icmp {
		t.Fatalf("tshark reads %d ICMP frames after repair, %d whole ones were written", n, icmp)
	}
	// PC1 starts again and the link across works again, through new tunnel
	// ports on both sides.
	pcs[0].con.Close()
	startPC(pcs[0], "127.0.0.2")
	pcs[0].run(t, "ip "+pcs[0].ip+"/24")
	if n := pcs[0].ping(t, pcs[1].ip, 3); n == 0 {
		t.Fatal("no ping reply across the agents after agent1 came back")
	}
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "again"}, 201, &started)
	pcs[1].ping(t, pcs[0].ip, 1)
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)
	if n := tsharkCount(t, deref(started.CaptureFilePath), "icmp"); n < 2 {
		t.Fatalf("the capture after the agent came back holds %d ICMP frames", n)
	}

	// PC1's VPCS dies by itself on agent1: the node says stopped, and the
	// capture on its side ends, both announced.
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "last"}, 201, &started)
	pid := vpcsPID(t, a1, pcs[0].node.NodeID)
	notes = c.follow(lab.projectID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	notes.linkUpdated(t, link.LinkID, 10*time.Second, func(l linkReply) bool { return !l.Capturing })
	notes.nodeUpdated(t, pcs[0].node.NodeID, 10*time.Second, func(n nodeReply) bool { return n.Status == "stopped" })
}

// logWarning waits for a log.warning notification whose message holds
// every one of words, and returns the message.
func (n *notifications) logWarning(t *testing.T, within time.Duration, words ...string) string {
	t.Helper()
	return n.logMessage(t, "log.warning", within, words...)
}

// logMessage waits for a notification of action (log.info, log.warning,
// ...) whose message holds every one of words, and returns the message.
func (n *notifications) logMessage(t *testing.T, action string, within time.Duration, words ...string) string {
	t.Helper()
	var ev struct {
		Message string `json:"message"`
	}
	err := n.waitFor(action, within, func(event json.RawMessage) (bool, error) {
		if err := json.Unmarshal(event, &ev); err != nil {
			return false, err
		}
		for _, w := range words {
			if !strings.Contains(ev.Message, w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("a %s saying %q: %v", action, words, err)
	}
	return ev.Message
}

// nodeUpdated waits for a node.updated notification of node that ok
// accepts.
func (n *notifications) nodeUpdated(t *testing.T, nodeID string, within time.Duration, ok func(nodeReply) bool) nodeReply {
	t.Helper()
	var nr nodeReply
	err := n.waitFor("node.updated", within, func(event json.RawMessage) (bool, error) {
		nr = nodeReply{}
		if err := json.Unmarshal(event, &nr); err != nil {
			return false, err
		}
		return nr.NodeID == nodeID && ok(nr), nil
	})
	if err != nil {
		t.Fatalf("node %s: %v", nodeID, err)
	}
	return nr
}

var vpcsStarted = regexp.MustCompile(`msg="vpcs started" node=(\S+) pid=(\d+)`)

// vpcsPID finds the pid of a node's VPCS in its agent's log.
func vpcsPID(t *testing.T, a *agentProc, nodeID string) int {
	t.Helper()
	pid := 0
	for _, m := range vpcsStarted.FindAllStringSubmatch(a.log.String(), -1) {
		if m[1] == nodeID {
			pid = atoi(t, m[2])
		}
	}
	if pid == 0 {
		t.Fatalf("no VPCS started for node %s in agent %s's log", nodeID, a.id)
	}
	return pid
}

func TestAgentsRefuseCallsWithoutTheSharedSecret(t *testing.T) {
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=right"})
	a := startAgent(t, "agent9", "127.0.0.2", "other", "")
	for _, s := range []string{"", "wrong", "righ"} {
		req, _ := http.NewRequest("GET", "http://"+a.addr+"/v1/info", nil)
		if s != "" {
			req.Header.Set("X-Labtap-Secret", s)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("secret %q: %d, want 401", s, resp.StatusCode)
		}
	}
	// Added with another secret than the controller's, it stays
	// disconnected, and nothing can be created on it.
	host, port, _ := net.SplitHostPort(a.addr)
	c.call("POST", "/v2/computes", map[string]any{"compute_id": "agent9", "protocol": "http", "host": host, "port": atoi(t, port)}, 201, nil)
	time.Sleep(time.Second)
	c.waitCompute("agent9", false, time.Second)
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "refused"}, 201, &project)
	var e struct {
		Message string `json:"message"`
	}
	c.call("POST", "/v2/projects/"+project.ProjectID+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "agent9"}, 409, &e)
	if e.Message != "Invalid authentication for compute agent9" {
		t.Fatalf("refusal message %q does not say why", e.Message)
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readWholeRecords reads a pcap a crash may have torn: it counts the ICMP
// frames of every whole record, and how many bytes follow the last one.
func readWholeRecords(t *testing.T, path string) (icmp int, torn int64) {
	t.Helper()
	data := mustRead(t, path)
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	read := int64(24)
	for {
		frame, ci, err := r.ReadPacketData()
		if err != nil { // the end, or a torn last record
			break
		}
		read += 16 + int64(ci.CaptureLength)
		if gopacket.NewPacket(frame, layers.LinkTypeEthernet, gopacket.Default).Layer(layers.LayerTypeICMPv4) != nil {
			icmp++
		}
	}
	return icmp, int64(len(data)) - read
}
