package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

const (
	projectID = "11111111-2222-4333-8444-555555555555"
	nodeA     = "aaaaaaaa-0000-4000-8000-000000000001"
	nodeB     = "bbbbbbbb-0000-4000-8000-000000000002"
	linkID    = "cccccccc-0000-4000-8000-000000000003"
	secret    = "s3cret"
)

// arrive is how long a test waits for a frame that must arrive: long, as a
// loaded machine can keep the relay from running for seconds (a 2 s wait
// failed so), and a frame that arrives ends the wait at once. A frame that
// must not arrive is waited for a few hundred milliseconds, which a slow
// relay only makes easier to pass.
const arrive = 30 * time.Second

// agent is an agent API on httptest, with fake nodes.
type agent struct {
	t     *testing.T
	url   string
	data  string
	api   api.Config // the handler's settings, Secret aside
	host  *host.Host
	mu    sync.Mutex
	fakes map[string]*node.Fake
}

func newAgent(t *testing.T) *agent { return newAgentWith(t, host.Config{}) }

// newAgentWith is newAgent with settings of cfg; its data dir and runners
// are the test's.
func newAgentWith(t *testing.T, cfg host.Config) *agent {
	return newAgentAPI(t, cfg, api.Config{})
}

// newAgentAPI is newAgentWith with settings of the API handler too.
func newAgentAPI(t *testing.T, cfg host.Config, acfg api.Config) *agent {
	t.Helper()
	a := &agent{t: t, data: cfg.DataDir, api: acfg, fakes: make(map[string]*node.Fake)}
	if a.data == "" {
		a.data = t.TempDir()
	}
	cfg.DataDir = a.data
	if cfg.FilterDeadline == 0 {
		// A filter that compiles at once must not be refused as too
		// complex because a loaded machine kept its compiling child from
		// running for 2 s (it was, starved). The budget's own test asks
		// for the default deadline.
		cfg.FilterDeadline = time.Minute
	}
	cfg.Runners = map[string]host.RunnerFactory{
		"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
			f := node.NewFake(env.Agent, env.OnStop)
			a.mu.Lock()
			a.fakes[env.Spec.NodeID] = f
			a.mu.Unlock()
			return f, nil
		},
	}
	a.serve(cfg)
	return a
}

// serve runs an agent with cfg on httptest until the test ends.
func (a *agent) serve(cfg host.Config) {
	h := host.New(cfg)
	a.host = h
	acfg := a.api
	acfg.Secret = secret
	srv := httptest.NewServer(api.NewHandler(api.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, acfg))
	a.t.Cleanup(func() {
		h.Close() // ends capture streams, so the server can close
		srv.Close()
	})
	a.url = srv.URL
}

func (a *agent) fake(id string) *node.Fake {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fakes[id]
}

// do sends a request with the secret and decodes a JSON reply into out.
func (a *agent) do(method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set(proto.SecretHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("%s %s: reply %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

func (a *agent) must(method, path string, body, out any, want int) {
	a.t.Helper()
	var e proto.Error
	if out == nil {
		out = &e
	}
	if got := a.do(method, path, body, out); got != want {
		a.t.Fatalf("%s %s = %d (%+v), want %d", method, path, got, out, want)
	}
}

// linked builds a project with two started fake nodes and a link.
func linked(t *testing.T) *agent { return linkedWith(t, host.Config{}, api.Config{}) }

// linkedWith is linked on an agent with settings of cfg and acfg.
func linkedWith(t *testing.T, cfg host.Config, acfg api.Config) *agent {
	a := newAgentAPI(t, cfg, acfg)
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	for i, id := range []string{nodeA, nodeB} {
		var st proto.NodeState
		a.must("PUT", proto.NodePath(projectID, id), proto.NodeSpec{NodeType: "vpcs", Name: fmt.Sprint("PC", i)}, &st, 200)
		if st.Status != proto.StatusStopped {
			t.Fatalf("new node status %q", st.Status)
		}
		a.must("PUT", proto.NodeStatusPath(projectID, id), proto.NodeStatusSpec{Status: "started"}, &st, 200)
		if st.Status != proto.StatusStarted {
			t.Fatalf("started node status %q", st.Status)
		}
	}
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB},
	}, nil, 204)
	return a
}

// exchange sends a frame from A to B and one back, and checks both arrive.
func (a *agent) exchange(tag string) {
	a.t.Helper()
	fa, fb := a.fake(nodeA), a.fake(nodeB)
	fa.Send([]byte("A>" + tag))
	if got, err := fb.Recv(arrive); err != nil || string(got) != "A>"+tag {
		a.t.Fatalf("B got %q, %v", got, err)
	}
	fb.Send([]byte("B>" + tag))
	if got, err := fa.Recv(arrive); err != nil || string(got) != "B>"+tag {
		a.t.Fatalf("A got %q, %v", got, err)
	}
}

func TestAgentRefusesCallsWithoutTheSecret(t *testing.T) {
	a := newAgent(t)
	for _, s := range []string{"", "wrong"} {
		req, _ := http.NewRequest("GET", a.url+proto.InfoPath, nil)
		if s != "" {
			req.Header.Set(proto.SecretHeader, s)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e proto.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 401 || e.Code != proto.CodeUnauthorized {
			t.Fatalf("secret %q: %d %+v, want 401 unauthorized", s, resp.StatusCode, e)
		}
	}
	var info proto.AgentInfo
	a.must("GET", proto.InfoPath, nil, &info, 200)
	if info.ProtocolVersion != proto.Version || info.ComputeID != "local" ||
		fmt.Sprint(info.NodeTypes) != "[cloud ethernet_hub ethernet_switch vpcs]" {
		t.Fatalf("info = %+v", info)
	}
}

func TestAgentAnswersErrorsWithCodes(t *testing.T) {
	a := newAgent(t)
	var e proto.Error
	if got := a.do("GET", "/v1/nope", nil, &e); got != 404 || e.Code != proto.CodeNotFound {
		t.Fatalf("unknown route: %d %+v", got, e)
	}
	if got := a.do("PUT", proto.ProjectPath("not-a-uuid"), proto.ProjectSpec{}, &e); got != 400 || e.Code != proto.CodeInvalid {
		t.Fatalf("bad project id: %d %+v", got, e)
	}
	if got := a.do("PUT", proto.NodePath(projectID, nodeA), proto.NodeSpec{NodeType: "vpcs"}, &e); got != 404 {
		t.Fatalf("node in unopened project: %d %+v", got, e)
	}
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{}, nil, 204)
	if got := a.do("PUT", proto.NodePath(projectID, nodeA), map[string]any{"node_type": "vpcs", "bogus": 1}, &e); got != 400 {
		t.Fatalf("unknown member: %d %+v", got, e)
	}
	if got := a.do("PUT", proto.NodePath(projectID, nodeA), proto.NodeSpec{NodeType: "qemu"}, &e); got != 400 {
		t.Fatalf("unsupported node type: %d %+v", got, e)
	}
	if got := a.do("PUT", proto.NodePath(projectID, "../../etc"), proto.NodeSpec{NodeType: "vpcs"}, &e); got != 400 && got != 404 {
		t.Fatalf("node id with a path: %d %+v", got, e)
	}
}

func TestAgentRelaysALinkAndCapturesIt(t *testing.T) {
	a := linked(t)
	a.exchange("before")

	var st proto.CaptureState
	spec := proto.CaptureSpec{FileName: "ab.pcap", DataLinkType: "DLT_EN10MB"}
	a.must("PUT", proto.CapturePath(projectID, linkID), spec, &st, 200)
	want := filepath.Join(a.data, "projects", projectID, "project-files", "captures", "ab.pcap")
	if !st.Active || st.FilePath != want {
		t.Fatalf("capture state %+v, want active at %s", st, want)
	}
	// The same spec again is harmless; another one conflicts.
	a.must("PUT", proto.CapturePath(projectID, linkID), spec, &st, 200)
	var e proto.Error
	if got := a.do("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "other.pcap", DataLinkType: "DLT_EN10MB"}, &e); got != 409 {
		t.Fatalf("second capture: %d %+v", got, e)
	}

	for i := range 5 {
		a.exchange(fmt.Sprint(i))
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	if st.Active || st.Frames != 10 {
		t.Fatalf("after stop: %+v, want 10 frames", st)
	}
	a.exchange("after") // not captured

	frames := readPcap(t, want, layers.LinkTypeEthernet)
	if len(frames) != 10 {
		t.Fatalf("file holds %d frames, want 10", len(frames))
	}
	for i, f := range frames {
		dir := []string{"A>", "B>"}[i%2]
		if string(f) != fmt.Sprint(dir, i/2) {
			t.Fatalf("frame %d = %q", i, f)
		}
	}
	// A stopped link can capture again, to a new file, with another type.
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "hdlc.pcap", DataLinkType: "DLT_C_HDLC"}, &st, 200)
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	readPcap(t, st.FilePath, layers.LinkTypeC_HDLC)
}

func TestAgentRefusesBadCaptureRequests(t *testing.T) {
	a := linked(t)
	for _, spec := range []proto.CaptureSpec{
		{FileName: "../escape.pcap", DataLinkType: "DLT_EN10MB"},
		{FileName: "/tmp/abs.pcap", DataLinkType: "DLT_EN10MB"},
		{FileName: ".hidden", DataLinkType: "DLT_EN10MB"},
		{FileName: "x.pcap", DataLinkType: "DLT_RAW"},
		{FileName: "x.pcap", DataLinkType: "DLT_EN10MB", Format: "erf"},
	} {
		var e proto.Error
		if got := a.do("PUT", proto.CapturePath(projectID, linkID), spec, &e); got != 400 {
			t.Errorf("%+v: %d %+v, want 400", spec, got, e)
		}
	}
	if _, err := os.Stat(filepath.Join(a.data, "projects", projectID, "project-files", "escape.pcap")); err == nil {
		t.Fatal("a capture file was written outside the captures folder")
	}
	var e proto.Error
	if got := a.do("GET", proto.CaptureStreamPath(projectID, linkID), nil, &e); got != 409 ||
		e.Message != "Nothing to stream because there is no packet capture active" {
		t.Fatalf("stream without capture: %d %+v", got, e)
	}
}

func TestAgentStreamsTheCaptureToSeveralReadersUntilItStops(t *testing.T) {
	a := linked(t)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "s.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)

	type result struct {
		body []byte
		err  error
		ct   string
	}
	results := make(chan result, 2)
	for range 2 {
		req, _ := http.NewRequest("GET", a.url+proto.CaptureStreamPath(projectID, linkID), nil)
		req.Header.Set(proto.SecretHeader, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body) // returns when the agent ends the body
			results <- result{b, err, resp.Header.Get("Content-Type")}
		}()
	}
	for i := range 20 {
		a.exchange(fmt.Sprint(i))
	}
	a.must("DELETE", proto.CapturePath(projectID, linkID), nil, &st, 200)
	file, _ := os.ReadFile(st.FilePath)
	for range 2 {
		select {
		case r := <-results:
			if r.err != nil || r.ct != api.PcapContentType {
				t.Fatalf("stream: %v, content type %q", r.err, r.ct)
			}
			if !bytes.Equal(r.body, file) {
				t.Fatalf("stream has %d bytes, file %d", len(r.body), len(file))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("stream did not end after the capture stopped")
		}
	}
	if n := len(readPcap(t, st.FilePath, layers.LinkTypeEthernet)); n != 40 {
		t.Fatalf("file has %d frames, want 40", n)
	}
}

func TestDeletingACapturingLinkLeavesAValidFile(t *testing.T) {
	a := linked(t)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "d.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)
	a.exchange("x")
	a.must("DELETE", proto.LinkPath(projectID, linkID), nil, nil, 204)
	if n := len(readPcap(t, st.FilePath, layers.LinkTypeEthernet)); n != 2 {
		t.Fatalf("file has %d frames, want 2", n)
	}
	// The ports are free again: a new link between the same nodes works.
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeB}, B: proto.Endpoint{NodeID: nodeA},
	}, nil, 204)
	a.exchange("relinked")
}

func TestAgentLinkRules(t *testing.T) {
	a := linked(t)
	other := "dddddddd-0000-4000-8000-000000000004"
	var e proto.Error
	// Port already used by the link.
	if got := a.do("PUT", proto.LinkPath(projectID, other), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{Tunnel: &proto.Tunnel{RemoteHost: "127.0.0.1", RemotePort: 9}},
	}, &e); got != 409 {
		t.Fatalf("reused port: %d %+v", got, e)
	}
	// The same link with other endpoints.
	if got := a.do("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeB}, B: proto.Endpoint{NodeID: nodeA},
	}, &e); got != 409 {
		t.Fatalf("changed endpoints: %d %+v", got, e)
	}
	// Suspend through PUT with the same endpoints.
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}, Suspend: true,
	}, nil, 204)
	a.fake(nodeA).Send([]byte("suspended"))
	if got, err := a.fake(nodeB).Recv(300 * time.Millisecond); err == nil {
		t.Fatalf("suspended link delivered %q", got)
	}
}

func TestStoppedNodeReceivesNothingAndRestartsOnANewNIC(t *testing.T) {
	a := linked(t)
	var st proto.NodeState
	a.must("PUT", proto.NodeStatusPath(projectID, nodeB), proto.NodeStatusSpec{Status: "stopped"}, &st, 200)
	if st.Status != proto.StatusStopped {
		t.Fatalf("status %q", st.Status)
	}
	a.must("PUT", proto.NodeStatusPath(projectID, nodeB), proto.NodeStatusSpec{Status: "stopped"}, &st, 200) // idempotent
	a.must("PUT", proto.NodeStatusPath(projectID, nodeB), proto.NodeStatusSpec{Status: "started"}, &st, 200)
	a.exchange("restarted")
	var e proto.Error
	if got := a.do("PUT", proto.NodeStatusPath(projectID, nodeB), proto.NodeStatusSpec{Status: "paused"}, &e); got != 400 {
		t.Fatalf("bad status: %d %+v", got, e)
	}
}

func TestClosingAProjectEndsItsCaptureStreams(t *testing.T) {
	a := linked(t)
	var st proto.CaptureState
	a.must("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "c.pcap", DataLinkType: "DLT_EN10MB"}, &st, 200)
	req, _ := http.NewRequest("GET", a.url+proto.CaptureStreamPath(projectID, linkID), nil)
	req.Header.Set(proto.SecretHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a.exchange("x")
	a.must("DELETE", proto.ProjectPath(projectID), nil, nil, 204)
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after the project closed")
	}
	if n := len(readPcap(t, st.FilePath, layers.LinkTypeEthernet)); n != 2 {
		t.Fatalf("file has %d frames, want 2", n)
	}
	var e proto.Error
	if got := a.do("GET", proto.CapturePath(projectID, linkID), nil, &e); got != 404 {
		t.Fatalf("closed project still known: %d", got)
	}
}

// readPcap reads a whole capture file and checks its link type.
func readPcap(t *testing.T, path string, lt layers.LinkType) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != lt {
		t.Fatalf("%s: link type %d, want %d", path, r.LinkType(), lt)
	}
	var frames [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: record %d: %v", path, len(frames), err)
		}
		if ci.CaptureLength != ci.Length {
			t.Fatalf("record %d cut: %d of %d bytes", len(frames), ci.CaptureLength, ci.Length)
		}
		frames = append(frames, data)
	}
}

// slowFilter is a link filter libpcap takes seconds to compile.
func slowFilter() string {
	var slow []string
	for i := range 400 {
		slow = append(slow, fmt.Sprintf("host 10.%d.%d.1", i/200, i%200))
	}
	return strings.Join(slow, " or ")
}

// A filter compiling holds up no other: while a slow filter's check is
// being compiled (its compiling child frozen with SIGSTOP, and a deadline
// of an hour, so the check cannot end by itself), another link's filter
// compiles and applies.
func TestACompilingFilterBlocksNoOther(t *testing.T) {
	a := linkedWith(t, host.Config{FilterDeadline: time.Hour}, api.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(proto.FilterCheck{BPF: []string{slowFilter()}})
		req, _ := http.NewRequestWithContext(ctx, "PUT", a.url+proto.FilterCheckPath, bytes.NewReader(b))
		req.Header.Set(proto.SecretHeader, secret)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		done <- err
	}()
	child := compilingChild(t, done)
	if err := syscall.Kill(child, syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing the compiling child %d: %v", child, err)
	}
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		var e proto.Error
		if got := a.do("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
			A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}, Filters: proto.Filters{BPF: []string{"icmp"}},
		}, &e); got != 204 {
			t.Errorf("a quick filter beside a slow one: %d %+v", got, e)
		}
	}()
	select {
	case <-applied:
	case <-time.After(2 * time.Minute): // a liveness bound, not a measure
		t.Fatal("a quick filter waited for a slow one being compiled")
	}
	select {
	case err := <-done:
		t.Fatalf("the slow check ended while its child was frozen: %v", err)
	default:
	}
	cancel() // the agent kills the child, frozen or not, and answers
	<-done
}

// compilingChild waits for the child process the agent compiles a filter
// in (this test binary, its last argument labtap-compile-filters) and returns
// its pid; it fails the test if done says the request ended first.
func compilingChild(t *testing.T, done <-chan error) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the slow check ended before its child was seen: %v", err)
		default:
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, pid := range strings.Fields(string(b)) {
				// A compiling child's last argument is pcapfilter.Subcommand.
				args, _ := os.ReadFile("/proc/" + pid + "/cmdline")
				if strings.HasSuffix(string(args), "\x00labtap-compile-filters\x00") {
					n, err := strconv.Atoi(pid)
					if err == nil {
						return n
					}
				}
			}
		}
	}
	t.Fatal("no compiling child within a minute")
	return 0
}

func TestATooComplexFilterIsRefusedInBudget(t *testing.T) {
	// Each refusal waits out the agent's default deadline
	// (pcapfilter.DefaultDeadline, 2 s, which this test may not import).
	a := linkedWith(t, host.Config{FilterDeadline: 2 * time.Second}, api.Config{})
	expr := slowFilter()
	// A link PUT with it, and a check of it, are refused as too complex.
	var e proto.Error
	if got := a.do("PUT", proto.FilterCheckPath, proto.FilterCheck{BPF: []string{expr}}, &e); got != 400 {
		t.Fatalf("filter check of a slow filter: %d %+v", got, e)
	}
	a.must("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}, Filters: proto.Filters{BPF: []string{"icmp"}},
	}, nil, 204)
	if got := a.do("PUT", proto.LinkPath(projectID, linkID), proto.LinkSpec{
		A: proto.Endpoint{NodeID: nodeA}, B: proto.Endpoint{NodeID: nodeB}, Filters: proto.Filters{BPF: []string{expr}},
	}, &e); got != 400 || e.Message != "Filter bpf: too complex" {
		t.Fatalf("link PUT with a slow filter: %d %+v", got, e)
	}
	// A capture filter has the same budget, and libpcap's word when it
	// does not compile; neither starts a capture. (4096 bytes, the most a
	// capture filter may have, of ports take libpcap seconds.)
	var ports []string
	for i := 1; len(strings.Join(ports, " or ")) < 4096-20; i++ {
		ports = append(ports, fmt.Sprintf("port %d", i))
	}
	slowCapture := strings.Join(ports, " or ")
	if got := a.do("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "slow.pcap", Filter: slowCapture}, &e); got != 400 || e.Message != "Capture filter: too complex" {
		t.Fatalf("capture with a slow filter: %d %+v", got, e)
	}
	if got := a.do("PUT", proto.CapturePath(projectID, linkID), proto.CaptureSpec{FileName: "bad.pcap", Filter: "host ((("}, &e); got != 400 || !strings.HasPrefix(e.Message, "capture_filter: ") || !strings.Contains(e.Message, "syntax") {
		t.Fatalf("capture with a filter libpcap refuses: %d %+v", got, e)
	}
	var st proto.CaptureState
	if a.must("GET", proto.CapturePath(projectID, linkID), nil, &st, 200); st.Active || st.FileName != "" {
		t.Fatalf("a refused capture runs: %+v", st)
	}
	// The link kept its filter: icmp is dropped, the rest passes.
	a.fake(nodeA).Send([]byte("not icmp at all, just bytes"))
	if _, err := a.fake(nodeB).Recv(arrive); err != nil {
		t.Fatalf("after a refused filter the link delivers nothing: %v", err)
	}
}
