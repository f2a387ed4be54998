package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads a /metrics page: the value of every series, by its name and
// its labels in order ("name{a=x,b=y}").
func scrape(t *testing.T, url string, header http.Header) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus text: %v", url, err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[name+"{"+strings.Join(labels, ",")+"}"] = value(f.GetType(), m)
		}
	}
	return out
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// series names one series: name and "label=value" pairs, in any order.
func series(name string, labels ...string) string {
	sort.Strings(labels)
	return name + "{" + strings.Join(labels, ",") + "}"
}

func TestMetricsCountExactlyTheFramesATestSends(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller")
	}
	c := startController(t)
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "metrics"}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	// Two clouds, each a UDP port facing a socket of the test.
	gen, sink := testenv.LoopbackUDP(t), testenv.LoopbackUDP(t)
	cloud := func(name string, peer *net.UDPConn) (string, int) {
		lport := freeUDPPort(t)
		var n nodeReply
		c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "cloud", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": []any{map[string]any{
				"name": "UDP tunnel 1", "port_number": 0, "type": "udp", "lport": lport, "rhost": "127.0.0.1",
				"rport": peer.LocalAddr().(*net.UDPAddr).Port}}}}, 201, &n)
		return n.NodeID, lport
	}
	a, intoA := cloud("Gen", gen)
	b, intoB := cloud("Sink", sink)
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a, "adapter_number": 0, "port_number": 0},
		{"node_id": b, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	linkPath := base + "/links/" + link.LinkID
	lbl := func(dir string, more ...string) []string {
		return append([]string{"compute_id=local", "project_id=" + project.ProjectID, "link_id=" + link.LinkID, "direction=" + dir}, more...)
	}
	capLbl := []string{"compute_id=local", "project_id=" + project.ProjectID, "link_id=" + link.LinkID}

	before := scrape(t, c.url+"/metrics", nil)
	if v, ok := before[series("labtap_link_frames_forwarded_total", lbl("a_to_b")...)]; !ok || v != 0 {
		t.Fatalf("a new link's forwarded counter: %v %v", v, ok)
	}
	if before[series("labtap_agent_up", "compute_id=local")] != 1 {
		t.Fatal("the controller does not see its local agent's metrics")
	}

	// cross sends n frames of size bytes from one socket to a cloud and
	// reads each on the other side: once read, the relay has counted it.
	cross := func(from, to *net.UDPConn, port, n, size int, first byte) {
		t.Helper()
		buf := make([]byte, 2048)
		for i := range n {
			frame := make([]byte, size)
			frame[0] = first
			copy(frame[1:], fmt.Sprintf("frame %d", i))
			if _, err := from.WriteToUDP(frame, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err != nil {
				t.Fatal(err)
			}
			to.SetReadDeadline(time.Now().Add(10 * time.Second))
			if m, _, err := to.ReadFromUDP(buf); err != nil || m != size {
				t.Fatalf("frame %d did not cross the link: %d bytes, %v", i, m, err)
			}
		}
	}
	const n, m, size = 50, 7, 300
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	cross(gen, sink, intoA, n, size, 0)
	cross(sink, gen, intoB, m, size+1, 0)
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)

	// A bpf filter drops frames whose first byte is 0x42: k of them are
	// sent, then one that passes, to know the k went through the relay.
	c.call("PUT", linkPath, map[string]any{"filters": map[string]any{"bpf": []string{"ether[0] == 0x42"}}}, 201, nil)
	const k = 9
	for range k {
		frame := make([]byte, size)
		frame[0] = 0x42
		gen.WriteToUDP(frame, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: intoA})
	}
	cross(gen, sink, intoA, 1, size, 0)

	got := scrape(t, c.url+"/metrics", nil)
	want := map[string]float64{
		series("labtap_link_frames_received_total", lbl("a_to_b")...):                     n + k + 1,
		series("labtap_link_frames_forwarded_total", lbl("a_to_b")...):                    n + 1,
		series("labtap_link_bytes_forwarded_total", lbl("a_to_b")...):                     (n + 1) * size,
		series("labtap_link_frames_forwarded_total", lbl("b_to_a")...):                    m,
		series("labtap_link_bytes_forwarded_total", lbl("b_to_a")...):                     m * (size + 1),
		series("labtap_link_frames_filtered_total", lbl("a_to_b", "filter=bpf")...):       k,
		series("labtap_link_frames_filtered_total", lbl("a_to_b", "filter=suspend")...):   0,
		series("labtap_link_frames_filtered_total", lbl("b_to_a", "filter=bpf")...):       0,
		series("labtap_link_frames_queue_dropped_total", lbl("a_to_b", "queue=delay")...): 0,
		series("labtap_capture_frames_written_total", capLbl...):                          n + m,
		// pcap: a 24-byte header, then a 16-byte header per record.
		series("labtap_capture_bytes_written_total", capLbl...):   24 + n*(16+size) + m*(16+size+1),
		series("labtap_capture_records_dropped_total", capLbl...): 0,
		series("labtap_capture_files_rotated_total", capLbl...):   0,
		series("labtap_capture_active", capLbl...):                0,
		series("labtap_agent_up", "compute_id=local"):             1,
		series("labtap_http_requests_total", "method=POST", "route=/v2/projects/{project_id}/links/{link_id}/start_capture", "status=201"):           1,
		series("labtap_http_request_duration_seconds", "method=POST", "route=/v2/projects/{project_id}/links/{link_id}/start_capture", "status=201"): 1,
		series("labtap_http_requests_total", "method=PUT", "route=/v2/projects/{project_id}/links/{link_id}", "status=201"):                          1,
	}
	for s, v := range want {
		if g, ok := got[s]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", s, g, ok, v)
		}
	}
	if got[series("process_cpu_seconds_total")] <= 0 || got[series("go_goroutines")] <= 0 {
		t.Error("no process metrics")
	}
	// The agent's capture memory: bounded (at least DefaultPool's 256 MiB)
	// and never exhausted here; what it holds, it holds within its bound.
	mem := func(name string) float64 {
		v, ok := got[series("labtap_capture_memory_"+name, "compute_id=local")]
		if !ok {
			t.Errorf("no labtap_capture_memory_%s from the local agent", name)
		}
		return v
	}
	if mem("max_bytes") < 256<<20 || mem("allocated_bytes") > mem("max_bytes") || mem("in_use_bytes") > mem("allocated_bytes") || mem("refused_total") != 0 {
		t.Errorf("capture memory: max %v, allocated %v, in use %v, refused %v", mem("max_bytes"), mem("allocated_bytes"), mem("in_use_bytes"), mem("refused_total"))
	}

	// A notification listener shows, and goes when it leaves.
	listeners := func() float64 { return scrape(t, c.url+"/metrics", nil)[series("labtap_notification_listeners")] }
	if v := listeners(); v != 0 {
		t.Fatalf("%v listeners before any", v)
	}
	resp, err := http.Get(c.url + base + "/notifications")
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n') // the first ping: subscribed
	if v := listeners(); v != 1 {
		t.Fatalf("%v listeners with one stream open", v)
	}
	resp.Body.Close()

	// The access log has a line per request, with the route template.
	waitLog(t, c, regexp.MustCompile(`msg=request component=api method=PUT route=/v2/projects/\{project_id\}/links/\{link_id\} status=201 duration=\S+ bytes=\d+`))
}

// waitLog waits for a line of the controller's log to match re.
func waitLog(t *testing.T, c *controller, re *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !re.MatchString(c.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line matches %s", re)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAnAgentServesItsMetricsBehindItsSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an agent")
	}
	const secret = "s3cret-metrics"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_SECRET=" + secret}, "--local-agent=false")
	a := startAgent(t, "metrics-agent", "127.0.0.1", secret, c.url)
	c.waitCompute("metrics-agent", true, 20*time.Second)
	url := "http://" + a.addr
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("GET /metrics without the secret = %d, want 401", resp.StatusCode)
	}
	got := scrape(t, url+"/metrics", http.Header{"X-Labtap-Secret": {"s3cret-metrics"}})
	if got[series("process_resident_memory_bytes")] <= 0 {
		t.Error("no process metrics")
	}
	if got[series("labtap_http_requests_total", "method=GET", "route=/metrics", "status=401")] != 1 {
		t.Errorf("the refused scrape is not counted: %v", got)
	}
	// The controller scrapes it with the secret.
	if up := scrape(t, c.url+"/metrics", nil)[series("labtap_agent_up", "compute_id=metrics-agent")]; up != 1 {
		t.Errorf("labtap_agent_up{compute_id=metrics-agent} = %v on the controller", up)
	}
}

// TestJSONLogsHaveAnAccessLineWithoutSecrets runs the controller with
// --log-format json: every line is a JSON object, each request has one.
func TestJSONLogsHaveAnAccessLineWithoutSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller")
	}
	cmd := exec.Command(controllerBinary(t), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json",
		"--local-agent=false", "--user", "admin")
	cmd.Env = append(cmd.Environ(), "LABTAP_PASSWORD=hunter2-secret")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var url string
	for url == "" && sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		if line["msg"] == "controller listening" {
			url = "http://" + line["addr"].(string)
		}
	}
	req, _ := http.NewRequest("GET", url+"/v2/version?token=abc", nil)
	req.SetBasicAuth("admin", "hunter2-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		if strings.Contains(sc.Text(), "hunter2") || strings.Contains(sc.Text(), "token=") {
			t.Fatalf("a secret in the log: %s", sc.Text())
		}
		if line["msg"] == "request" {
			if line["method"] != "GET" || line["route"] != "/v2/version" || line["status"] != 200.0 ||
				line["duration"] == nil || line["bytes"].(float64) <= 0 || line["level"] != "INFO" {
				t.Fatalf("access log line: %s", sc.Text())
			}
			return
		}
	}
	t.Fatal("no access log line")
}
