package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/proto"
)

// events follows an agent's events stream.
type events struct {
	t     *testing.T
	lines chan proto.Event
	resp  *http.Response
}

func (a *agent) follow() *events {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.url+proto.EventsPath, nil)
	req.Header.Set(proto.SecretHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		a.t.Fatalf("GET %s: %s", proto.EventsPath, resp.Status)
	}
	e := &events{t: a.t, lines: make(chan proto.Event, 64), resp: resp}
	go func() {
		defer close(e.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev proto.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				a.t.Errorf("event line %q: %v", sc.Text(), err)
				return
			}
			e.lines <- ev
		}
	}()
	a.t.Cleanup(func() { resp.Body.Close() })
	return e
}

// next returns the next event of kind (skipping others), failing the test
// if none comes within d.
func (e *events) next(kind string, d time.Duration) proto.Event {
	e.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-e.lines:
			if !ok {
				e.t.Fatalf("events stream ended waiting for %s", kind)
			}
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			e.t.Fatalf("no %s event within %v", kind, d)
		}
	}
}

func TestEventsSayHelloPingAndReportANodeThatStopsByItself(t *testing.T) {
	const ping = 50 * time.Millisecond // not proto.PingInterval's 2 s
	a := linkedWith(t, host.Config{}, api.Config{PingInterval: ping})
	ev := a.follow()
	hello := ev.next(proto.EventHello, 5*time.Second)
	if hello.Info == nil || hello.Info.ComputeID != "local" || hello.Info.ProtocolVersion != proto.Version {
		t.Fatalf("hello %+v", hello.Info)
	}
	// The emulator dies: nobody asked.
	a.fake(nodeA).Stop(t.Context())
	got := ev.next(proto.EventNodeStatus, 5*time.Second)
	if got.ProjectID != projectID || got.NodeID != nodeA || got.Node == nil || got.Node.Status != proto.StatusStopped {
		t.Fatalf("node event %+v (node %+v)", got, got.Node)
	}
	// Silence would mean a lost agent: pings come.
	if p := ev.next(proto.EventPing, 5*time.Second); p.Info == nil {
		t.Fatalf("ping without the agent's info: %+v", p)
	}
}

func TestStateListsWhatRunsForARestartedController(t *testing.T) {
	a := linked(t)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "s.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)
	var s proto.AgentState
	a.must("GET", proto.StatePath, nil, &s, 200)
	if len(s.Projects) != 1 || s.Projects[0].ProjectID != projectID || len(s.Projects[0].Nodes) != 2 || len(s.Projects[0].Links) != 1 {
		t.Fatalf("state %+v", s)
	}
	l := s.Projects[0].Links[0]
	if l.LinkID != linkID || l.Spec.A.NodeID != nodeA || l.Spec.B.NodeID != nodeB || l.Capture == nil || !l.Capture.Active || l.Capture.FilePath != st.FilePath {
		t.Fatalf("link state %+v, capture %+v", l, l.Capture)
	}
	for _, n := range s.Projects[0].Nodes {
		if n.Status != proto.StatusStarted {
			t.Fatalf("node %+v", n)
		}
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	s = proto.AgentState{}
	a.must("GET", proto.StatePath, nil, &s, 200)
	if c := s.Projects[0].Links[0].Capture; c != nil {
		t.Fatalf("stopped capture still listed: %+v", c)
	}
}

// Two agents, as on two hosts (their tunnel ends on 127.0.0.2 and
// 127.0.0.3), each with a node; the link between them is a relay on each
// joined by a UDP tunnel through reserved ports.
func TestReservedTunnelPortsJoinTwoAgents(t *testing.T) {
	a := newAgentWith(t, host.Config{TunnelBind: "127.0.0.2"})
	b := newAgentWith(t, host.Config{TunnelBind: "127.0.0.3"})
	for _, x := range []struct {
		ag   *agent
		node string
	}{{a, nodeA}, {b, nodeB}} {
		x.ag.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
		x.ag.must("PUT", proto.NodePath(projectID, x.node), proto.NodeSpec{NodeType: "vpcs", Name: "PC"}, nil, 200)
		x.ag.must("PUT", proto.NodeStatusPath(projectID, x.node), proto.NodeStatusSpec{Status: "started"}, nil, 200)
	}
	var pa, pb, again proto.TunnelPort
	a.must("PUT", proto.TunnelPortPath(projectID, linkID+"-0"), nil, &pa, 200)
	b.must("PUT", proto.TunnelPortPath(projectID, linkID+"-1"), nil, &pb, 200)
	a.must("PUT", proto.TunnelPortPath(projectID, linkID+"-0"), nil, &again, 200)
	if pa.Port == 0 || pb.Port == 0 || again != pa {
		t.Fatalf("reservations %v %v, again %v", pa, pb, again)
	}
	// A reservation no link takes is released; releasing twice is fine.
	var spare proto.TunnelPort
	a.must("PUT", proto.TunnelPortPath(projectID, "spare"), nil, &spare, 200)
	a.must("DELETE", proto.TunnelPortPath(projectID, "spare"), nil, nil, 204)
	a.must("DELETE", proto.TunnelPortPath(projectID, "spare"), nil, nil, 204)
	a.must("PUT", proto.TunnelPortPath(projectID, "no\\good"), nil, nil, 400)
	a.must("PUT", proto.TunnelPortPath("99999999-2222-4333-8444-555555555555", "x"), nil, nil, 404)

	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA},
		B: proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: pa.Port, RemoteHost: "127.0.0.3", RemotePort: pb.Port}},
	}, nil, 204)
	b.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: pb.Port, RemoteHost: "127.0.0.2", RemotePort: pa.Port}},
		B: proto.Endpoint{NodeID: nodeB},
	}, nil, 204)
	for i := range 3 {
		tag := fmt.Sprint(i)
		a.fake(nodeA).Send([]byte("A>" + tag))
		if got, err := b.fake(nodeB).Recv(arrive); err != nil || string(got) != "A>"+tag {
			t.Fatalf("B got %q, %v", got, err)
		}
		b.fake(nodeB).Send([]byte("B>" + tag))
		if got, err := a.fake(nodeA).Recv(arrive); err != nil || string(got) != "B>"+tag {
			t.Fatalf("A got %q, %v", got, err)
		}
	}
	// The link took the reserved socket, bound where the agent was told.
	// The relay counts a frame once its send returns, which can be just
	// after the receiver has it: the last count may lag a moment.
	var ls proto.LinkState
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a.must("GET", proto.LinkPath(projectID, linkID), nil, &ls, 200)
		if ls.Directions[0].Forwarded == 3 && ls.Directions[1].Forwarded == 3 || time.Now().After(deadline) {
			break
		}
	}
	if ls.Ends[1].LocalPort != pa.Port || ls.Directions[0].Forwarded != 3 || ls.Directions[1].Forwarded != 3 {
		t.Fatalf("link state %+v", ls)
	}
	// A frame from anywhere but the other agent's tunnel end is not let in.
	stray := newUDPEnd(t)
	if _, err := stray.conn.WriteToUDP([]byte("stray"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: pa.Port}); err != nil {
		t.Fatal(err)
	}
	// Counted once the relay has read it (which a loaded machine can put
	// off past any fixed wait), then checked not to have reached node A.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a.must("GET", proto.LinkPath(projectID, linkID), nil, &ls, 200)
		if ls.Ends[1].Strays != 0 || time.Now().After(deadline) {
			break
		}
	}
	if ls.Ends[1].Strays != 1 {
		t.Fatalf("strays %d, want 1", ls.Ends[1].Strays)
	}
	if got, err := a.fake(nodeA).Recv(200 * time.Millisecond); err == nil {
		t.Fatalf("a stray reached node A: %q", got)
	}
}

// A capture whose agent died while writing it is cut back to its last
// whole record when its project is next opened.
func TestCapturesLeftByACrashAreRepairedWhenTheProjectOpens(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "projects", projectID, "project-files", "captures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A whole capture, then half a record, as a kill -9 mid-write leaves it.
	first := newAgentWith(t, host.Config{DataDir: t.TempDir()})
	first.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	for _, id := range []string{nodeA, nodeB} {
		first.must("PUT", proto.NodePath(projectID, id), proto.NodeSpec{NodeType: "vpcs", Name: "PC"}, nil, 200)
		first.must("PUT", proto.NodeStatusPath(projectID, id), proto.NodeStatusSpec{Status: "started"}, nil, 200)
	}
	first.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}}, nil, 204)
	var st proto.CaptureState
	first.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "crash.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)
	first.exchange("x")
	// The mark is made once the file is (off the start's way), and before
	// any record is written: a file holding a record is marked.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(st.FilePath); err == nil && fi.Size() > 24 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the capture's records never reached its file")
		}
	}
	if _, err := os.Stat(st.FilePath + ".writing"); err != nil {
		t.Fatalf("a running capture holding records is not marked: %v", err)
	}
	first.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	if _, err := os.Stat(st.FilePath + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("a stopped capture is still marked: %v", err)
	}
	whole, err := os.ReadFile(st.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(append([]byte(nil), whole...), whole[24:24+17]...) // a record header and a byte of its 3
	name := filepath.Join(dir, "crash.pcap")
	os.WriteFile(name, torn, 0o644)
	os.WriteFile(name+".writing", nil, 0o644)
	// An unmarked file is nobody's business, torn or not.
	os.WriteFile(filepath.Join(dir, "other.pcap"), torn, 0o644)

	a := newAgentWith(t, host.Config{DataDir: data})
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	got, _ := os.ReadFile(name)
	if string(got) != string(whole) {
		t.Fatalf("repaired file has %d bytes, want the %d of the whole records", len(got), len(whole))
	}
	if n := len(readPcap(t, name, layers.LinkTypeEthernet)); n != 2 {
		t.Fatalf("repaired file has %d frames, want 2", n)
	}
	if _, err := os.Stat(name + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("mark left after repair: %v", err)
	}
	if other, _ := os.ReadFile(filepath.Join(dir, "other.pcap")); len(other) != len(torn) {
		t.Fatal("an unmarked file was changed")
	}
}

// inMountNamespace re-runs the calling test as root of a new user and
// mount namespace (unshare, from util-linux), where it may mount a small
// tmpfs; it reports whether the caller is that re-run.
func inMountNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv("LABTAP_TEST_IN_NS") == "1" {
		return true
	}
	testenv.RequireUserNamespaces(t)
	unshare, _ := exec.LookPath("unshare")
	cmd := exec.Command(unshare, "-rm", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LABTAP_TEST_IN_NS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a mount namespace: %v\n%s", err, out)
	}
	return false
}

func TestACaptureThatFillsTheDiskEndsByItselfValidAndSaysSo(t *testing.T) {
	if !inMountNamespace(t) {
		return
	}
	data := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", data).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", "-l", data).Run()
	a := newAgentWith(t, host.Config{DataDir: data})
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	for _, id := range []string{nodeA, nodeB} {
		a.must("PUT", proto.NodePath(projectID, id), proto.NodeSpec{NodeType: "vpcs", Name: "PC"}, nil, 200)
		a.must("PUT", proto.NodeStatusPath(projectID, id), proto.NodeStatusSpec{Status: "started"}, nil, 200)
	}
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}}, nil, 204)
	ev := a.follow()
	ev.next(proto.EventHello, 5*time.Second)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "full.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)

	frame := make([]byte, 1400)
	ended := make(chan proto.Event, 1)
	go func() {
		for e := range ev.lines {
			if e.Kind == proto.EventCaptureEnded {
				ended <- e
				return
			}
		}
	}()
	var got proto.Event
send:
	for i := 0; ; i++ {
		copy(frame, fmt.Sprintf("frame %d", i))
		a.fake(nodeA).Send(frame)
		a.fake(nodeB).Recv(time.Second) // the relay forwards whatever the capture does
		select {
		case got = <-ended:
			break send
		default:
		}
		if i > 10000 {
			t.Fatal("the capture never ended though the disk is full")
		}
	}
	if got.ProjectID != projectID || got.LinkID != linkID || got.Capture == nil || got.Capture.Active ||
		!strings.Contains(got.Capture.Err, "no space left on device") {
		t.Fatalf("capture.ended %+v (capture %+v)", got, got.Capture)
	}
	// The link still relays; the file holds whole records only.
	a.exchange("after")
	frames := readPcap(t, st.FilePath, layers.LinkTypeEthernet)
	t.Logf("the disk filled after %d frames", len(frames))
	if len(frames) == 0 || uint64(len(frames)) != got.Capture.Frames {
		t.Fatalf("file holds %d frames, the agent said %d", len(frames), got.Capture.Frames)
	}
	info, _ := os.Stat(st.FilePath)
	if info.Size() != int64(got.Capture.Bytes) {
		t.Fatalf("file has %d bytes, the agent said %d", info.Size(), got.Capture.Bytes)
	}
	if _, err := os.Stat(st.FilePath + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("mark left after a clean end: %v", err)
	}
	var cs proto.CaptureState
	a.must("GET", proto.CapturePath(projectID, linkID), nil, &cs, 200)
	if cs.Active {
		t.Fatalf("capture still active: %+v", cs)
	}
}
