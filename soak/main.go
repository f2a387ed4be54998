// The soak command drives a real controller and a real agent (built
// binaries, separate processes) with mixed load for a while, kills the
// agent now and then and the controller once (SIGKILL), and checks at the
// end that nothing was lost or leaked: every acknowledged change is there,
// every capture file is valid (capinfos), the controller's descriptors,
// memory, threads and goroutines are back to their baseline, and no request got a 5xx.
// scripts/soak builds the binaries and runs it; it is not part of
// scripts/test's CI run.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
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
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type config struct {
	controller, agent string
	duration          time.Duration
	nodes, workers    int
	agentEvery        time.Duration
	keep              bool
}

func run() error {
	var c config
	flag.StringVar(&c.controller, "controller", "bin/controller", "controller binary")
	flag.StringVar(&c.agent, "agent", "bin/agent", "agent binary")
	flag.DurationVar(&c.duration, "duration", time.Hour, "how long the load runs")
	flag.IntVar(&c.nodes, "nodes", 50, "VPCS nodes (linked in pairs)")
	flag.IntVar(&c.workers, "workers", 8, "API workers")
	flag.DurationVar(&c.agentEvery, "agent-every", 3*time.Minute, "how often the agent is killed and restarted")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directories")
	flag.Parse()
	s, err := newSoak(c)
	if err != nil {
		return err
	}
	defer s.cleanup()
	return s.run()
}

// proc is a running controller or agent.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	addr chan string
}

func start(bin string, env []string, args ...string) (*proc, string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), addr: make(chan string, 1)}
	re := regexp.MustCompile(`msg="(?:controller|agent) listening" addr=(\S+)`)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.addr <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	select {
	case a := <-p.addr:
		return p, a, nil
	case <-p.done:
		return nil, "", fmt.Errorf("%s exited at start", bin)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, "", fmt.Errorf("%s did not start", bin)
	}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

type soak struct {
	cfg                config
	ctlData, agentData string
	ctlPort, agentPort int
	secret             string

	mu    sync.Mutex // guards ctl, agent, base
	ctl   *proc
	agent *proc
	base  string

	project string
	nodes   []string
	links   []string

	ackMu sync.Mutex
	// acked is, per node, the last acknowledged position and any sent
	// after it whose reply was lost (the controller died): the node must
	// be at one of them.
	acked map[string][][2]int

	gate     sync.RWMutex // load holds it shared; a measurement alone
	measures []string     // quiet measurements against their baseline
	problems []string

	baseline usage

	requests, fails5xx, connErrs, captures, streams atomic.Int64
	fiveXX                                          []string
	fiveMu                                          sync.Mutex
}

func newSoak(c config) (*soak, error) {
	s := &soak{cfg: c, secret: strconv.FormatUint(rand.Uint64(), 36), acked: map[string][][2]int{}}
	var err error
	if s.ctlData, err = os.MkdirTemp("", "labtap-soak-ctl-"); err != nil {
		return nil, err
	}
	if s.agentData, err = os.MkdirTemp("", "labtap-soak-agent-"); err != nil {
		return nil, err
	}
	s.ctlPort, s.agentPort = freePort(), freePort()
	return s, nil
}

func (s *soak) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agent != nil {
		s.agent.stop()
	}
	if s.ctl != nil {
		s.ctl.stop()
	}
	if !s.cfg.keep {
		os.RemoveAll(s.ctlData)
		os.RemoveAll(s.agentData)
	}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *soak) startController() error {
	p, addr, err := start(s.cfg.controller, []string{"LABTAP_SECRET=" + s.secret},
		"--listen", fmt.Sprintf("127.0.0.1:%d", s.ctlPort), "--data-dir", s.ctlData, "--local-agent=false")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ctl, s.base = p, "http://"+addr
	s.mu.Unlock()
	return nil
}

func (s *soak) startAgent() error {
	p, _, err := start(s.cfg.agent, []string{"LABTAP_SECRET=" + s.secret},
		"--listen", fmt.Sprintf("127.0.0.1:%d", s.agentPort), "--data-dir", s.agentData, "--compute-id", "soak",
		"--controller", fmt.Sprintf("http://127.0.0.1:%d", s.ctlPort))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.agent = p
	s.mu.Unlock()
	return nil
}

// call sends a request; it counts 5xx replies (a failure of the run) and
// connection errors (expected while the controller is down).
func (s *soak) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
	s.requests.Add(1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.connErrs.Add(1)
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		s.fails5xx.Add(1)
		s.fiveMu.Lock()
		if len(s.fiveXX) < 20 {
			s.fiveXX = append(s.fiveXX, fmt.Sprintf("%s %s = %d %s", method, path, resp.StatusCode, data))
		}
		s.fiveMu.Unlock()
	}
	if out != nil && resp.StatusCode < 300 {
		json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

func (s *soak) must(method, path string, body, out any, want int) error {
	for range 60 {
		got, err := s.call(context.Background(), method, path, body, out)
		if err == nil && got == want {
			return nil
		}
		if err == nil && got != 409 {
			return fmt.Errorf("%s %s = %d, want %d", method, path, got, want)
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("%s %s: no %d in a minute", method, path, want)
}

func (s *soak) setup() error {
	if err := s.startController(); err != nil {
		return err
	}
	if err := s.startAgent(); err != nil {
		return err
	}
	// Wait for the agent's registration.
	for i := 0; ; i++ {
		var cs []struct {
			ID        string `json:"compute_id"`
			Connected bool   `json:"connected"`
		}
		s.call(context.Background(), "GET", "/v2/computes", nil, &cs)
		if len(cs) == 1 && cs[0].Connected {
			break
		}
		if i > 60 {
			return errors.New("the agent did not register")
		}
		time.Sleep(500 * time.Millisecond)
	}
	var p struct {
		ID string `json:"project_id"`
	}
	if err := s.must("POST", "/v2/projects", map[string]any{"name": "soak", "auto_open": true, "auto_close": false}, &p, 201); err != nil {
		return err
	}
	s.project = p.ID
	for i := range s.cfg.nodes {
		var n struct {
			ID string `json:"node_id"`
		}
		if err := s.must("POST", s.pp("/nodes"), map[string]any{"name": fmt.Sprintf("PC%d", i+1), "node_type": "vpcs", "compute_id": "soak"}, &n, 201); err != nil {
			return err
		}
		s.nodes = append(s.nodes, n.ID)
	}
	for i := 0; i+1 < len(s.nodes); i += 2 {
		var l struct {
			ID string `json:"link_id"`
		}
		if err := s.must("POST", s.pp("/links"), map[string]any{"nodes": []map[string]any{
			{"node_id": s.nodes[i], "adapter_number": 0, "port_number": 0},
			{"node_id": s.nodes[i+1], "adapter_number": 0, "port_number": 0},
		}}, &l, 201); err != nil {
			return err
		}
		s.links = append(s.links, l.ID)
	}
	return s.must("POST", s.pp("/nodes/start"), nil, nil, 204)
}

func (s *soak) pp(suffix string) string { return "/v2/projects/" + s.project + suffix }

// usage is a process's descriptors, resident memory (KiB) and threads, and
// the controller's goroutines (go_goroutines of its /metrics; -1 unknown).
type usage struct{ fds, rssKiB, threads, goroutines int }

func usageOf(pid int) usage {
	var u usage
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = len(ents)
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			u.rssKiB, _ = strconv.Atoi(f[1])
		}
		if len(f) >= 2 && f[0] == "Threads:" {
			u.threads, _ = strconv.Atoi(f[1])
		}
	}
	return u
}

func (s *soak) ctlPid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctl.cmd.Process.Pid
}

// quiet stops every capture and waits for the controller to settle, then
// measures it.
func (s *soak) quiet() usage {
	for _, l := range s.links {
		s.call(context.Background(), "POST", s.pp("/links/"+l+"/stop_capture"), nil, nil)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(5 * time.Second)
	u := usageOf(s.ctlPid())
	u.goroutines = s.settledGoroutines()
	return u
}

// settledGoroutines reads the controller's goroutines until they stop
// falling (at most 30 s): the HTTP server keeps idle workers for 10 s
// after a burst, and those are not a leak.
func (s *soak) settledGoroutines() int {
	g := s.goroutines()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(3 * time.Second)
		next := s.goroutines()
		if next < 0 || next >= g {
			return min(g, next)
		}
		g = next
	}
	return g
}

// goroutines reads go_goroutines from the controller's /metrics.
func (s *soak) goroutines() int {
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

func (s *soak) run() error {
	t0 := time.Now()
	if err := s.setup(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	fmt.Printf("setup: %d VPCS, %d links in %v\n", len(s.nodes), len(s.links), time.Since(t0).Round(time.Second))
	s.baseline = s.quiet()
	fmt.Printf("at start: %s\n", s.baseline)

	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := range s.cfg.workers {
		wg.Go(func() { s.worker(ctx, w) })
	}
	wg.Go(func() { s.capturer(ctx) })
	for range 4 {
		wg.Go(func() { s.streamer(ctx) })
	}
	var chaosErr error
	wg.Go(func() { chaosErr = s.chaos(ctx) })
	wg.Wait()
	if chaosErr != nil {
		return chaosErr
	}
	fmt.Printf("load: %d requests, %d connection errors (controller down), %d captures started, %d streams\n",
		s.requests.Load(), s.connErrs.Load(), s.captures.Load(), s.streams.Load())

	// The checks.
	end := s.quiet()
	for _, m := range s.measures {
		fmt.Println(m)
	}
	fmt.Printf("at the end: %s\n", end)
	s.compare("at the end", end, s.baseline)
	problems := s.problems
	s.ackMu.Lock()
	acked := s.acked
	s.ackMu.Unlock()
	for id, xys := range acked {
		var n struct{ X, Y int }
		code, err := s.call(context.Background(), "GET", s.pp("/nodes/"+id), nil, &n)
		if err != nil || code != 200 || !slices.Contains(xys, [2]int{n.X, n.Y}) {
			problems = append(problems, fmt.Sprintf("node %s: at %d,%d, acknowledged (then maybe) %v (%d %v)", id, n.X, n.Y, xys, code, err))
		}
	}
	fmt.Printf("acknowledged moves checked: %d nodes\n", len(acked))
	files, _ := filepath.Glob(filepath.Join(s.agentData, "projects", "*", "project-files", "captures", "*.pcap"))
	bad := 0
	for _, f := range files {
		if out, err := exec.Command("capinfos", "-c", f).CombinedOutput(); err != nil {
			bad++
			if bad <= 5 {
				problems = append(problems, fmt.Sprintf("capinfos %s: %v %s", f, err, out))
			}
		}
	}
	fmt.Printf("capture files: %d, invalid: %d\n", len(files), bad)
	if n := s.fails5xx.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d replies were 5xx: %v", n, s.fiveXX))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Println("soak: ok")
	return nil
}

func (s *soak) worker(ctx context.Context, w int) {
	r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		s.gate.RLock()
		s.op(ctx, r, w)
		s.gate.RUnlock()
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
	}
}

func (s *soak) op(ctx context.Context, r *rand.Rand, w int) {
	{
		switch r.IntN(6) {
		case 0, 1, 2:
			s.call(ctx, "GET", []string{s.pp("/nodes"), s.pp("/links"), s.pp(""), "/v2/computes", "/v2/projects"}[r.IntN(5)], nil, nil)
		case 3, 4:
			// Moves: node i belongs to worker i%workers, so acknowledged
			// positions are one writer's.
			i := r.IntN(len(s.nodes)/s.cfg.workers+1)*s.cfg.workers + w
			if i >= len(s.nodes) {
				return
			}
			x, y := r.IntN(2000)-1000, r.IntN(2000)-1000
			code, err := s.call(ctx, "PUT", s.pp("/nodes/"+s.nodes[i]), map[string]any{"x": x, "y": y}, nil)
			s.ackMu.Lock()
			if err == nil && code == 200 {
				s.acked[s.nodes[i]] = [][2]int{{x, y}}
			} else if err != nil && len(s.acked[s.nodes[i]]) > 0 {
				s.acked[s.nodes[i]] = append(s.acked[s.nodes[i]], [2]int{x, y})
			}
			s.ackMu.Unlock()
		case 5:
			s.call(ctx, "POST", s.pp("/nodes/"+s.nodes[r.IntN(len(s.nodes))]+"/start"), nil, nil)
		}
	}
}

func (s *soak) capturer(ctx context.Context) {
	for ctx.Err() == nil {
		s.gate.RLock()
		l := s.links[rand.IntN(len(s.links))]
		if code, err := s.call(ctx, "POST", s.pp("/links/"+l+"/start_capture"), map[string]any{"capture_file_name": "soak"}, nil); err == nil && code == 201 {
			s.captures.Add(1)
		}
		sleep(ctx, time.Duration(rand.IntN(3000))*time.Millisecond)
		s.call(context.Background(), "POST", s.pp("/links/"+l+"/stop_capture"), nil, nil)
		s.gate.RUnlock()
	}
}

func (s *soak) streamer(ctx context.Context) {
	for ctx.Err() == nil {
		s.gate.RLock()
		l := s.links[rand.IntN(len(s.links))]
		s.mu.Lock()
		base := s.base
		s.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(5000))*time.Millisecond)
		req, _ := http.NewRequestWithContext(sctx, "GET", base+s.pp("/links/"+l+"/pcap"), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			if resp.StatusCode >= 500 {
				s.fails5xx.Add(1)
			}
			s.streams.Add(1)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		s.gate.RUnlock()
		sleep(ctx, 200*time.Millisecond)
	}
}

// chaos kills and restarts the agent every agentEvery, and the controller
// once, halfway. The controller's baseline is measured, load paused, after
// a warm-up (a tenth of the run); it is measured again against it before
// the kill, and a new baseline is taken after the same warm-up following
// the restart, for the end.
func (s *soak) chaos(ctx context.Context) error {
	warm := s.cfg.duration / 10
	half := time.After(s.cfg.duration / 2)
	warmed := time.After(warm)
	agentTick := time.NewTicker(s.cfg.agentEvery)
	defer agentTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-warmed:
			s.baseline = s.pausedUsage()
			s.measures = append(s.measures, fmt.Sprintf("baseline after %v of load: %s", warm, s.baseline))
		case <-agentTick.C:
			s.mu.Lock()
			a := s.agent
			s.mu.Unlock()
			a.kill()
			fmt.Printf("%s agent killed\n", time.Now().Format(time.TimeOnly))
			if err := s.startAgent(); err != nil {
				return fmt.Errorf("restart the agent: %w", err)
			}
		case <-half:
			u := s.pausedUsage()
			s.measures = append(s.measures, fmt.Sprintf("before the controller's kill: %s", u))
			s.compare("before the kill", u, s.baseline)
			s.mu.Lock()
			c := s.ctl
			s.mu.Unlock()
			c.kill()
			fmt.Printf("%s controller killed\n", time.Now().Format(time.TimeOnly))
			if err := s.startController(); err != nil {
				return fmt.Errorf("restart the controller: %w", err)
			}
			warmed = time.After(warm)
		}
	}
}

func (u usage) String() string {
	return fmt.Sprintf("%d fds, %d KiB RSS, %d threads, %d goroutines", u.fds, u.rssKiB, u.threads, u.goroutines)
}

// pausedUsage pauses the load and measures the controller.
func (s *soak) pausedUsage() usage {
	s.gate.Lock()
	defer s.gate.Unlock()
	return s.quiet()
}

// compare records a measurement over its baseline by more than 10%.
func (s *soak) compare(when string, got, base usage) {
	for _, m := range []struct {
		what      string
		got, want int
	}{{"fds", got.fds, base.fds}, {"RSS KiB", got.rssKiB, base.rssKiB}, {"threads", got.threads, base.threads}, {"goroutines", got.goroutines, base.goroutines}} {
		if m.want < 0 || m.got < 0 {
			s.problems = append(s.problems, fmt.Sprintf("%s: %s unknown (the controller's /metrics did not say)", when, m.what))
			continue
		}
		slack := 2.0
		if m.what == "goroutines" {
			// The HTTP server's workers idle on after the load (8 API
			// workers and 4 stream readers here); a leak grows with the
			// thousands of requests and streams, far past this.
			slack = 16
		}
		if float64(m.got) > float64(m.want)*1.1+slack {
			s.problems = append(s.problems, fmt.Sprintf("%s: %s %d, baseline %d (+10%% allowed)", when, m.what, m.got, m.want))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
