package main

// The -api mode measures the controller's control plane the way a client
// loads it: it starts the real controller binary (with its embedded local
// agent) on an ephemeral 127.0.0.1 port and a data directory of its own,
// and drives it over HTTP with /v2 calls. Nothing is stubbed: VPCS nodes
// are real vpcs processes, captures are real files.

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// apiConfig is what the -api flags set.
type apiConfig struct {
	controller string        // controller binary
	cycles     int           // start/stop capture cycles, and node create+delete pairs
	get        time.Duration // length of the GET link throughput run
	clients    int           // concurrent keep-alive clients of that run
	lab        int           // nodes of the lab-scale run; 0: none
	strace     bool          // a second controller run under strace, for the breakdown
	keep       bool
}

// ctl is one controller process under test.
type ctl struct {
	dir    string
	base   string // http://127.0.0.1:port/v2
	cmd    *exec.Cmd
	pid    int // the controller's pid (strace's child when traced)
	exited chan error
	client *http.Client

	logMu sync.Mutex
	reqs  []loggedRequest // the access log's lines, controller's and embedded agent's
}

// loggedRequest is one line of the access log the controller (component
// api) and its embedded agent (component local_agent) write at level info:
// the time each spent on a request, from its first byte read to its reply.
type loggedRequest struct {
	component, method, route string
	dur                      time.Duration
}

var accessLine = regexp.MustCompile(`msg=request component=(\S+) method=(\S+) route=(\S+) status=\d+ duration=(\S+)`)

// handled returns the durations the access log gives for method and route
// of component, from line from on, and the count of lines now.
func (c *ctl) handled(component, method, route string, from int) []time.Duration {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	var out []time.Duration
	for _, r := range c.reqs[min(from, len(c.reqs)):] {
		if r.component == component && r.method == method && r.route == route {
			out = append(out, r.dur)
		}
	}
	return out
}

func (c *ctl) logged() int {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return len(c.reqs)
}

var ctlListenLine = regexp.MustCompile(`msg="controller listening" addr=(\S+)`)

// startController runs the controller on 127.0.0.1:0 with a fresh data
// directory; with traceFile set, under strace, tracing the file syscalls.
// env is added to this process's environment, extra to the flags.
func startController(bin, traceFile string, env []string, extra ...string) (*ctl, error) {
	dir, err := os.MkdirTemp("", "labtap-apibench-")
	if err != nil {
		return nil, err
	}
	c := &ctl{dir: dir, exited: make(chan error, 1)}
	args := []string{bin, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--log-level", "info"}
	args = append(args, extra...)
	if traceFile != "" {
		// --seccomp-bpf stops only at the traced syscalls, so the rest of
		// the controller runs at full speed.
		args = append([]string{"strace", "-f", "--seccomp-bpf", "-ttt", "-T", "-o", traceFile,
			"-e", "trace=openat,pwrite64,fsync,fdatasync,renameat,renameat2,rename"}, args...)
	}
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Env = append(os.Environ(), env...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start controller: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := accessLine.FindStringSubmatch(sc.Text()); m != nil {
				if d, err := time.ParseDuration(m[4]); err == nil {
					c.logMu.Lock()
					c.reqs = append(c.reqs, loggedRequest{m[1], m[2], m[3], d})
					c.logMu.Unlock()
				}
			} else if m := ctlListenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			} else if strings.Contains(sc.Text(), "level=WARN") || strings.Contains(sc.Text(), "level=ERROR") || c.base == "" && !strings.Contains(sc.Text(), "level=") {
				// At start, a line without a level is the reason it exits.
				fmt.Fprintln(os.Stderr, "controller:", sc.Text())
			}
		}
		c.exited <- c.cmd.Wait()
	}()
	select {
	case a := <-addr:
		c.base = "http://" + a + "/v2"
	case err := <-c.exited:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("controller exited at start: %v", err)
	case <-time.After(30 * time.Second):
		c.pid = c.cmd.Process.Pid
		c.close(false)
		return nil, errors.New("controller did not start within 30 s")
	}
	c.pid = c.cmd.Process.Pid
	if traceFile != "" {
		// The controller is strace's child.
		if kids := children(c.pid); len(kids) > 0 {
			c.pid = kids[0]
		}
	}
	c.client = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute,
	}}
	return c, nil
}

func (c *ctl) close(keep bool) {
	if c.cmd != nil && c.cmd.Process != nil {
		// The controller itself, not strace when it is traced: strace
		// ends when its child does.
		unix.Kill(c.pid, unix.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			unix.Kill(c.pid, unix.SIGKILL)
			c.cmd.Process.Kill()
			<-c.exited
		}
	}
	if keep {
		fmt.Println("kept the controller's data directory:", c.dir)
	} else {
		os.RemoveAll(c.dir)
	}
}

// call sends one request and decodes a 2xx answer into out (when not nil);
// it returns the time from sending to the whole answer read.
func (c *ctl) call(method, path string, body, out any) (time.Duration, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	if resp.StatusCode/100 != 2 {
		return d, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return d, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return d, nil
}

type idOnly struct {
	ProjectID string `json:"project_id"`
	NodeID    string `json:"node_id"`
	LinkID    string `json:"link_id"`
}

func (c *ctl) project(name string) (string, error) {
	var p idOnly
	_, err := c.call("POST", "/projects", map[string]any{"name": name}, &p)
	return p.ProjectID, err
}

func (c *ctl) node(project, name, typ string, x int) (string, time.Duration, error) {
	var n idOnly
	d, err := c.call("POST", "/projects/"+project+"/nodes",
		map[string]any{"name": name, "node_type": typ, "compute_id": "local", "x": x, "y": 0}, &n)
	return n.NodeID, d, err
}

func (c *ctl) link(project, a string, ap int, b string, bp int) (string, time.Duration, error) {
	var l idOnly
	d, err := c.call("POST", "/projects/"+project+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a, "adapter_number": 0, "port_number": ap},
		{"node_id": b, "adapter_number": 0, "port_number": bp},
	}}, &l)
	return l.LinkID, d, err
}

// runAPI is the -api mode.
func runAPI(cfg apiConfig) error {
	if _, err := exec.LookPath("vpcs"); err != nil {
		return fmt.Errorf("-api needs vpcs: %w", err)
	}
	fmt.Printf("api bench: controller %s, %d CPUs, load average %s\n", cfg.controller, nproc(), loadavg())
	before := cpuTimes("")
	c, err := startController(cfg.controller, "", nil)
	if err != nil {
		return err
	}
	defer func() { c.close(cfg.keep) }()

	if err := latencies(c, cfg, nil); err != nil {
		return err
	}
	if err := getThroughput(c, cfg); err != nil {
		return err
	}
	if cfg.lab > 0 {
		if err := labScale(c, cfg.lab); err != nil {
			return err
		}
	}
	fmt.Printf("steal over the run: %.1f%%; load average at the end %s\n", 100*cpuTimes("").stealShare(before), loadavg())
	if cfg.strace {
		if _, err := exec.LookPath("strace"); err != nil {
			fmt.Println("breakdown: strace not found, skipped")
			return nil
		}
		return breakdown(cfg)
	}
	return nil
}

// capCycle is one start_capture/stop_capture pair's times, and when the
// start was sent, for the breakdown.
type capCycle struct {
	start, stop time.Duration
	at          time.Time
}

// latencies measures start_capture/stop_capture on a link between two
// started VPCS, node create+delete, and sequential GET link; cycles gets
// each capture cycle when not nil.
func latencies(c *ctl, cfg apiConfig, cycles *[]capCycle) error {
	p, err := c.project(fmt.Sprintf("apibench-%d", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	a, _, err := c.node(p, "PC1", "vpcs", 0)
	if err != nil {
		return err
	}
	b, _, err := c.node(p, "PC2", "vpcs", 100)
	if err != nil {
		return err
	}
	l, _, err := c.link(p, a, 0, b, 0)
	if err != nil {
		return err
	}
	for _, n := range []string{a, b} {
		if _, err := c.call("POST", "/projects/"+p+"/nodes/"+n+"/start", nil, nil); err != nil {
			return err
		}
	}
	var starts, stops []time.Duration
	const warm = 3
	var logFrom int
	for i := range cfg.cycles + warm {
		if i == warm {
			logFrom = c.logged()
		}
		at := time.Now()
		d1, err := c.call("POST", "/projects/"+p+"/links/"+l+"/start_capture", map[string]any{}, nil)
		if err != nil {
			return err
		}
		d2, err := c.call("POST", "/projects/"+p+"/links/"+l+"/stop_capture", nil, nil)
		if err != nil {
			return err
		}
		if i >= warm {
			starts, stops = append(starts, d1), append(stops, d2)
			if cycles != nil {
				*cycles = append(*cycles, capCycle{d1, d2, at})
			}
		}
	}
	fmt.Printf("start_capture (VPCS link, %d cycles): p50 %s  p99 %s  max %s\n", len(starts), pct(starts, 50), pct(starts, 99), pct(starts, 100))
	fmt.Printf("stop_capture:                         p50 %s  p99 %s\n", pct(stops, 50), pct(stops, 99))
	split(c, "start_capture", starts, logFrom, "POST", "/v2/projects/{project_id}/links/{link_id}/start_capture",
		"PUT", "/v1/projects/{project}/links/{link}/capture")

	var gets []time.Duration
	for range max(200, cfg.cycles) {
		d, err := c.call("GET", "/projects/"+p+"/links/"+l, nil, nil)
		if err != nil {
			return err
		}
		gets = append(gets, d)
	}
	fmt.Printf("GET link, one client in sequence (the HTTP floor): p50 %s  p99 %s\n", pct(gets, 50), pct(gets, 99))

	var pairs []time.Duration
	for i := range cfg.cycles + warm {
		if i == warm {
			logFrom = c.logged()
		}
		t0 := time.Now()
		n, _, err := c.node(p, fmt.Sprintf("T%d", i), "vpcs", 200)
		if err != nil {
			return err
		}
		if _, err := c.call("DELETE", "/projects/"+p+"/nodes/"+n, nil, nil); err != nil {
			return err
		}
		if i >= warm {
			pairs = append(pairs, time.Since(t0))
		}
	}
	fmt.Printf("node create+delete (VPCS, not started, %d pairs): p50 %s  p99 %s\n", len(pairs), pct(pairs, 50), pct(pairs, 99))
	split(c, "node create", nil, logFrom, "POST", "/v2/projects/{project_id}/nodes", "PUT", "/v1/projects/{project}/nodes/{node}")
	split(c, "node delete", nil, logFrom, "DELETE", "/v2/projects/{project_id}/nodes/{node_id}", "DELETE", "/v1/projects/{project}/nodes/{node}")
	_, err = c.call("DELETE", "/projects/"+p, nil, nil)
	return err
}

// split prints where a call's time went, from the access log: the client's
// total (when given), the controller's handler (from its first byte read
// to its reply: the project lock, JSON, the agent call and the project
// file's write), the agent's handler, and what is left to each side.
func split(c *ctl, name string, total []time.Duration, from int, method, route, agentMethod, agentRoute string) {
	ctl := c.handled("api", method, route, from)
	agent := c.handled("local_agent", agentMethod, agentRoute, from)
	if len(ctl) == 0 {
		fmt.Printf("  split of %s: no access log lines (the controller logs them at level info)\n", name)
		return
	}
	line := fmt.Sprintf("  split of %s, p50: controller handler %s", name, pct(ctl, 50))
	if len(total) > 0 {
		line = fmt.Sprintf("  split of %s, p50: client total %s = HTTP and client ~%s + controller handler %s", name, pct(total, 50), pct(total, 50)-pct(ctl, 50), pct(ctl, 50))
	}
	if len(agent) > 0 {
		line += fmt.Sprintf(" = the agent's handler %s + controller's own (lock, JSON, agent HTTP, project file) ~%s", pct(agent, 50), pct(ctl, 50)-pct(agent, 50))
	}
	fmt.Println(line)
}

// getThroughput measures GET link with cfg.clients concurrent keep-alive
// clients for cfg.get.
func getThroughput(c *ctl, cfg apiConfig) error {
	p, err := c.project(fmt.Sprintf("apibench-get-%d", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	a, _, err := c.node(p, "PC1", "vpcs", 0)
	if err != nil {
		return err
	}
	b, _, err := c.node(p, "PC2", "vpcs", 100)
	if err != nil {
		return err
	}
	l, _, err := c.link(p, a, 0, b, 0)
	if err != nil {
		return err
	}
	url := c.base + "/projects/" + p + "/links/" + l
	tr := &http.Transport{MaxIdleConns: cfg.clients, MaxIdleConnsPerHost: cfg.clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var n, failed atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), cfg.get)
	defer cancel()
	cpu0, _ := procCPU(c.pid)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range cfg.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := hc.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	cpu1, _ := procCPU(c.pid)
	fmt.Printf("GET link, %d keep-alive clients (Go net/http, same machine) for %s: %.0f req/s, %d failed; controller CPU %.2f cores\n",
		cfg.clients, cfg.get, float64(n.Load())/el.Seconds(), failed.Load(), (cpu1-cpu0)/el.Seconds())
	rate, err := wrkRun(c.pid, url, cfg.get, "GET link")
	if err != nil {
		fmt.Println("GET link with wrk:", err)
	} else if err := floorRun(c, url, cfg.get, rate); err != nil {
		fmt.Println("GET floor:", err)
	}
	_, err = c.call("DELETE", "/projects/"+p, nil, nil)
	return err
}

var wrkRate = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
var wrkNon2xx = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)

// wrkRun measures GET url with wrk -t2 -c16 (the client: a C load
// generator costs the controller's CPUs less than Go's net/http does),
// with the CPU of process pid, and returns the requests/s.
func wrkRun(pid int, url string, d time.Duration, what string) (float64, error) {
	if _, err := exec.LookPath("wrk"); err != nil {
		return 0, errors.New("wrk not found (scripts/bench -api installs it), skipped")
	}
	cpu0, _ := procCPU(pid)
	t0 := time.Now()
	out, err := exec.Command("wrk", "-t2", "-c16", fmt.Sprintf("-d%ds", max(1, int(d.Seconds()))), url).CombinedOutput()
	el := time.Since(t0)
	cpu1, _ := procCPU(pid)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no Requests/sec in its output: %s", out)
	}
	bad := "0"
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		bad = string(m[1])
	}
	rate, _ := strconv.ParseFloat(string(m[1]), 64)
	fmt.Printf("%s, wrk -t2 -c16 for %s: %s req/s, %s non-2xx; server CPU %.2f cores, %.1f µs a request\n",
		what, d, m[1], bad, (cpu1-cpu0)/el.Seconds(), 1e6*(cpu1-cpu0)/(rate*el.Seconds()))
	return rate, nil
}

// floorRun measures the floor of GET link on this machine: the same wrk
// against a trivial fasthttp handler, in this process, answering the
// link's bytes and headers. No Go HTTP server answers faster here; ctlRate
// is put as a share of it.
func floorRun(c *ctl, url string, d time.Duration, ctlRate float64) error {
	resp, err := c.client.Get(url)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	route := resp.Header.Get("X-Route")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("X-Route", route)
		ctx.SetBody(body)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	rate, err := wrkRun(os.Getpid(), "http://"+ln.Addr().String()+"/v2"+strings.TrimPrefix(url, c.base), d,
		"GET floor (a trivial fasthttp handler in the bench, the same reply)")
	if err != nil {
		return err
	}
	fmt.Printf("  GET link reaches %.2f of the floor\n", ctlRate/rate)
	return nil
}

// labScale builds a lab of n nodes (3/5 VPCS, 2/5 switches, n-1 links in
// a tree: see labTopology), starts it, captures every link, stops it and deletes
// it, timing each phase.
func labScale(c *ctl, n int) error {
	p, err := c.project(fmt.Sprintf("apibench-lab-%d", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	nsw := max(2, 2*n/5)
	nvpcs := n - nsw
	const swPorts = 8 // GNS3's default ports_mapping
	fmt.Printf("lab: %d nodes (%d VPCS, %d ethernet_switch)\n", n, nvpcs, nsw)
	rss("before the lab", c.pid)
	phase := func(name string, t0 time.Time, extra string) {
		fmt.Printf("  %-28s %9s %s\n", name, time.Since(t0).Round(time.Millisecond), extra)
		rss("    after "+name, c.pid)
	}

	t0 := time.Now()
	sws := make([]string, nsw)
	vpcs := make([]string, nvpcs)
	for i := range sws {
		if sws[i], _, err = c.node(p, fmt.Sprintf("SW%d", i+1), "ethernet_switch", i*10); err != nil {
			return err
		}
	}
	for i := range vpcs {
		if vpcs[i], _, err = c.node(p, fmt.Sprintf("PC%d", i+1), "vpcs", i*10); err != nil {
			return err
		}
	}
	phase(fmt.Sprintf("create %d nodes", n), t0, "")

	// Links: a loop-free tree (labtap's switches, like GNS3's, have no
	// STP: a loop storms with the VPCS' ARP broadcasts).
	t0 = time.Now()
	ids := append(append([]string{}, sws...), vpcs...)
	var links []string
	for _, l := range labTopology(nsw, nvpcs, swPorts) {
		id, _, err := c.link(p, ids[l.a], l.aPort, ids[l.b], l.bPort)
		if err != nil {
			return err
		}
		links = append(links, id)
	}
	phase(fmt.Sprintf("create %d links", len(links)), t0, "")

	t0 = time.Now()
	if _, err := c.call("POST", "/projects/"+p+"/nodes/start", nil, nil); err != nil {
		return err
	}
	phase("start all (nodes/start)", t0, "")

	t0 = time.Now()
	var caps []time.Duration
	for _, l := range links {
		d, err := c.call("POST", "/projects/"+p+"/links/"+l+"/start_capture", map[string]any{}, nil)
		if err != nil {
			return err
		}
		caps = append(caps, d)
	}
	phase(fmt.Sprintf("start_capture on %d links", len(links)), t0,
		fmt.Sprintf("(one at a time: p50 %s, p99 %s)", pct(caps, 50), pct(caps, 99)))

	// One .gns3 write at this size: a node move and a project rename
	// (each answered after the file is written).
	gns3 := projectFile(c.dir, p)
	size := int64(-1)
	if fi, err := os.Stat(gns3); err == nil {
		size = fi.Size()
	}
	var moves, renames []time.Duration
	for i := range 10 {
		d, err := c.call("PUT", "/projects/"+p+"/nodes/"+vpcs[0], map[string]any{"x": 1000 + i, "y": 5}, nil)
		if err != nil {
			return err
		}
		moves = append(moves, d)
		d, err = c.call("PUT", "/projects/"+p, map[string]any{"name": fmt.Sprintf("apibench-lab-renamed-%d-%d", i, time.Now().UnixNano())}, nil)
		if err != nil {
			return err
		}
		renames = append(renames, d)
	}
	fmt.Printf("  .gns3 write at %d nodes, %d links (%d bytes): node move p50 %s, project rename p50 %s (10 each)\n",
		n, len(links), size, pct(moves, 50), pct(renames, 50))

	// Concurrent changes of one project: 8 clients each moving its own
	// node, 25 moves each; every move is answered once it is on disk, so
	// this measures how changes share the disk's flushes.
	const movers, each = 8, 25
	var mu sync.Mutex
	var cmoves []time.Duration
	var firstErr error
	t0 = time.Now()
	var wg sync.WaitGroup
	for w := range movers {
		wg.Go(func() {
			for i := range each {
				d, err := c.call("PUT", "/projects/"+p+"/nodes/"+vpcs[w%len(vpcs)], map[string]any{"x": 2000 + i, "y": w}, nil)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				cmoves = append(cmoves, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	el := time.Since(t0)
	fmt.Printf("  concurrent node moves (%d clients × %d): %.0f moves/s, p50 %s, p99 %s\n",
		movers, each, float64(movers*each)/el.Seconds(), pct(cmoves, 50), pct(cmoves, 99))

	t0 = time.Now()
	if _, err := c.call("POST", "/projects/"+p+"/nodes/stop", nil, nil); err != nil {
		return err
	}
	phase("stop all (nodes/stop)", t0, "")

	pcaps, bytes := captureFiles(c.dir, p)
	t0 = time.Now()
	if _, err := c.call("DELETE", "/projects/"+p, nil, nil); err != nil {
		return err
	}
	phase("delete the project", t0, fmt.Sprintf("(it held %d capture files, %d bytes)", pcaps, bytes))
	return nil
}

// labLink joins node a's port aPort to node b's port bPort; nodes are
// numbered switches first, then VPCS.
type labLink struct{ a, aPort, b, bPort int }

// labTopology lays out nsw switches of ports ports each and nvpcs VPCS
// (one port each) as a tree: switch i hangs under switch (i-1)/2, and
// each VPCS hangs on the switch with the most free ports. A tree is the
// most links these nodes can have without a loop (n-1: any more and some
// switch path closes a loop, and a VPCS has only one port), so the lab
// has n-1 links; 300 links need 301 nodes.
func labTopology(nsw, nvpcs, ports int) []labLink {
	used := make([]int, nsw)
	var links []labLink
	for i := 1; i < nsw; i++ {
		up := (i - 1) / 2
		links = append(links, labLink{up, used[up], i, used[i]})
		used[up]++
		used[i]++
	}
	for v := range nvpcs {
		s := 0
		for i := range used {
			if used[i] < used[s] {
				s = i
			}
		}
		if used[s] >= ports {
			break // every switch is full: the rest stay unlinked
		}
		links = append(links, labLink{s, used[s], nsw + v, 0})
		used[s]++
	}
	return links
}

// projectFile finds project p's .gns3 file in the controller's data
// directory.
func projectFile(dir, p string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "data", "projects", p, "*.gns3"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

func captureFiles(dir, p string) (int, int64) {
	m, _ := filepath.Glob(filepath.Join(dir, "data", "projects", p, "project-files", "captures", "*"))
	var total int64
	for _, f := range m {
		if fi, err := os.Stat(f); err == nil {
			total += fi.Size()
		}
	}
	return len(m), total
}

// breakdown runs the capture cycles again on a controller under strace
// (only its file syscalls stop), and splits each start_capture into the
// HTTP floor, the file syscalls made while it ran, and the rest.
func breakdown(cfg apiConfig) error {
	trace, err := os.CreateTemp("", "labtap-apibench-strace-")
	if err != nil {
		return err
	}
	trace.Close()
	defer os.Remove(trace.Name())
	c, err := startController(cfg.controller, trace.Name(), nil)
	if err != nil {
		return err
	}
	var cycles []capCycle
	err = latencies(c, cfg, &cycles)
	c.close(cfg.keep)
	if err != nil {
		return err
	}
	calls, err := parseStrace(trace.Name())
	if err != nil {
		return err
	}
	type split struct{ opens, writes, syncs, renames time.Duration }
	var total, opens, writes, syncs, renames []time.Duration
	var nOpen, nSync int
	for _, cy := range cycles {
		var s split
		end := cy.at.Add(cy.start)
		for _, k := range calls {
			if k.at.Before(cy.at) || k.at.After(end) {
				continue
			}
			switch {
			case k.name == "openat" && strings.Contains(k.args, ".pcap"):
				s.opens += k.dur
				nOpen++
			case k.name == "pwrite64":
				s.writes += k.dur
			case k.name == "fsync" || k.name == "fdatasync":
				s.syncs += k.dur
				nSync++
			case strings.HasPrefix(k.name, "rename"):
				s.renames += k.dur
			}
		}
		total = append(total, cy.start)
		opens, writes, syncs, renames = append(opens, s.opens), append(writes, s.writes), append(syncs, s.syncs), append(renames, s.renames)
	}
	fmt.Printf("breakdown of start_capture, controller under strace (file syscalls traced, %d cycles; totals are slower than above by strace's stops):\n", len(cycles))
	fmt.Printf("  total p50 %s; in it, p50: create of the .pcap (openat, %.1f a call) %s, pwrite64 %s, fsync/fdatasync (%.1f a call) %s, renames %s\n",
		pct(total, 50), float64(nOpen)/float64(len(cycles)), pct(opens, 50), pct(writes, 50),
		float64(nSync)/float64(len(cycles)), pct(syncs, 50), pct(renames, 50))
	fmt.Println("  the rest is HTTP to the controller (its floor: sequential GET link above), the project lock, JSON, and the HTTP call to the agent and its relay set-up")
	return nil
}

// tracedCall is one traced call.
type tracedCall struct {
	at   time.Time
	name string
	args string
	dur  time.Duration
}

var straceLine = regexp.MustCompile(`^(\d+)\s+(\d+\.\d+) (\w+)\((.*?)(?: <unfinished \.\.\.>$|\) += .*<(\d+\.\d+)>$)`)
var straceResumed = regexp.MustCompile(`^(\d+)\s+\d+\.\d+ <\.\.\. (\w+) resumed>.*<(\d+\.\d+)>$`)

// parseStrace reads strace -f -ttt -T output: whole lines, and calls split
// in an unfinished line and its resumption in the same thread.
func parseStrace(path string) ([]tracedCall, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []tracedCall
	open := map[string]int{} // pid → index of its unfinished call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := straceResumed.FindStringSubmatch(line); m != nil {
			if i, ok := open[m[1]]; ok && out[i].name == m[2] {
				out[i].dur = secs(m[3])
				delete(open, m[1])
			}
			continue
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ts, _ := strconv.ParseFloat(m[2], 64)
		k := tracedCall{at: time.Unix(0, int64(ts*1e9)), name: m[3], args: m[4]}
		if m[5] != "" {
			k.dur = secs(m[5])
		} else {
			open[m[1]] = len(out)
		}
		out = append(out, k)
	}
	return out, sc.Err()
}

func secs(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * 1e9)
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)].Round(10 * time.Microsecond)
}

// rss prints the controller's resident memory (it holds the embedded
// agent) and that of its children (the vpcs processes).
func rss(label string, pid int) {
	kids := children(pid)
	var sum int64
	for _, k := range kids {
		sum += vmRSS(k)
	}
	fmt.Printf("%-34s controller+agent RSS %6.1f MiB; %d child processes %6.1f MiB\n", label, float64(vmRSS(pid))/(1<<20), len(kids), float64(sum)/(1<<20))
}

func vmRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// children lists a process's children, from every thread's children file.
func children(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(data)) {
			if k, err := strconv.Atoi(s); err == nil {
				out = append(out, k)
			}
		}
	}
	return out
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func nproc() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		return set.Count()
	}
	return 0
}
