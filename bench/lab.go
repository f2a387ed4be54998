package main

// The -lab mode builds a lab of N nodes over K agents and times each phase
// of its life the way a client drives it: create (nodes, then links),
// close, open, start all, capture every link, stop all, close, reopen,
// delete. The controller runs with no local agent; the K agents are real
// agent processes on 127.0.0.2, 127.0.0.3, ... (ephemeral ports), which
// register with the controller (--controller, LABTAP_SECRET), as agents on
// other hosts do. Every VPCS is a real vpcs process; switches run in their
// agent. Each agent holds a loop-free tree of its own nodes (labTopology),
// and the agents' trees are joined by K-1 links across agents (UDP
// tunnels), so the whole lab is one tree of N-1 links.
//
// After each phase it prints the controller's RSS, the agents' and that of
// the node processes; during start all, the rate of messages on
// /v2/notifications and on the project's notification stream. With
// -lab-profile it opens the project once more under a CPU profile (the
// controller's --pprof-listen) and prints where the open's time goes.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// labConfig is what the -lab flags set.
type labConfig struct {
	controller string // controller binary
	agent      string // agent binary
	n          int    // nodes
	agents     int    // agent processes
	profile    bool   // profile a second open
	docker     int    // docker nodes (one per agent at most); -1: one per agent where Docker and the image are
	qemu       int    // qemu nodes (one per agent at most); -1: one per agent where QEMU and the tiny guest are
	keep       bool
}

// labNode is one node of the lab: its name, type and the agent it is on.
type labNode struct {
	name, typ string
	agent     int
}

// labAcross lays out n nodes over k agents: each agent gets n/k of them
// (the first n%k one more), 2/5 switches and 3/5 VPCS in a tree
// (labTopology), and agent j's tree is joined to agent j-1's by one link
// between switches with a free port. Links index the returned nodes.
func labAcross(n, k, ports int) ([]labNode, []labLink, error) {
	if k < 1 || n < 3*k {
		return nil, nil, fmt.Errorf("a lab over %d agents needs at least %d nodes, not %d", k, 3*k, n)
	}
	var nodes []labNode
	var links []labLink
	var used []int // ports used, by node
	var free []int // a switch of each agent's tree, chosen for a join
	for j := range k {
		nj := n / k
		if j < n%k {
			nj++
		}
		nsw := max(2, 2*nj/5)
		nvpcs := nj - nsw
		base := len(nodes)
		for i := range nsw {
			nodes = append(nodes, labNode{fmt.Sprintf("A%d-SW%d", j+1, i+1), "ethernet_switch", j})
		}
		for i := range nvpcs {
			nodes = append(nodes, labNode{fmt.Sprintf("A%d-PC%d", j+1, i+1), "vpcs", j})
		}
		used = append(used, make([]int, nj)...)
		tree := labTopology(nsw, nvpcs, ports)
		if len(tree) != nj-1 {
			return nil, nil, fmt.Errorf("agent %d: %d switches of %d ports cannot link %d VPCS", j+1, nsw, ports, nvpcs)
		}
		for _, l := range tree {
			l.a, l.b = l.a+base, l.b+base
			links = append(links, l)
			used[l.a]++
			used[l.b]++
		}
		// The switch with the most free ports.
		s := base
		for i := base; i < base+nsw; i++ {
			if used[i] < used[s] {
				s = i
			}
		}
		free = append(free, s)
	}
	for j := 1; j < k; j++ {
		a, b := free[j-1], free[j]
		if used[a] >= ports || used[b] >= ports {
			return nil, nil, fmt.Errorf("no free switch port to join agent %d to agent %d", j, j+1)
		}
		links = append(links, labLink{a, used[a], b, used[b]})
		used[a]++
		used[b]++
	}
	return nodes, links, nil
}

// labImage is the image of the lab's docker nodes (scripts/node-images).
const labImage = "labtap/host:bookworm"

// withOnEach adds count nodes of type typ (at most one per agent) to a
// lab laid out by labAcross, each on a free port of a switch of its
// agent, so the lab stays one tree.
func withOnEach(nodes []labNode, links []labLink, k, count int, typ string, ports int) ([]labNode, []labLink) {
	used := make([]int, len(nodes))
	for _, l := range links {
		used[l.a]++
		used[l.b]++
	}
	for j := range min(count, k) {
		s := -1
		for i, n := range nodes {
			if n.agent == j && n.typ == "ethernet_switch" && used[i] < ports && (s < 0 || used[i] < used[s]) {
				s = i
			}
		}
		if s < 0 {
			continue
		}
		nodes = append(nodes, labNode{fmt.Sprintf("A%d-%s1", j+1, typ), typ, j})
		links = append(links, labLink{s, used[s], len(nodes) - 1, 0})
		used[s]++
	}
	return nodes, links
}

// dockerCount is how many docker nodes the lab gets: asked, or with -1
// one per agent where this process is root, a Docker Engine answers and
// labImage is there.
func dockerCount(asked, agents int) int {
	if asked >= 0 {
		return asked
	}
	if os.Geteuid() != 0 {
		return 0
	}
	if err := exec.Command("docker", "image", "inspect", labImage).Run(); err != nil {
		return 0
	}
	return agents
}

// tinyGuest returns the folder of scripts/tiny-guest's kernel and
// initrd, "" if they are not there.
func tinyGuest() string {
	dir := os.Getenv("LABTAP_TINY_GUEST")
	if dir == "" {
		cache, _ := os.UserCacheDir()
		dir = filepath.Join(cache, "labtap", "tiny-guest")
	}
	for _, f := range []string{"vmlinuz", "initrd.img"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			return ""
		}
	}
	return dir
}

// qemuCount is how many qemu nodes the lab gets: asked, or with -1 one
// per agent where QEMU and the tiny guest are.
func qemuCount(asked, agents int) int {
	if asked >= 0 {
		return asked
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil || tinyGuest() == "" {
		return 0
	}
	return agents
}

// labAgent is one agent process of the lab.
type labAgent struct {
	id   string
	cmd  *exec.Cmd
	done chan error

	log     *os.File // the agent's log, written by the goroutine reading it
	mu      sync.Mutex
	handled map[string]handlerTime // by "METHOD route", from the access log
}

// handlerTime is the count and the total time of an agent's handlers.
type handlerTime struct {
	n   int
	sum time.Duration
}

var labAgentListen = regexp.MustCompile(`msg="agent listening" addr=(\S+)`)
var labAgentRequest = regexp.MustCompile(`msg=request method=(\S+) route=(\S+) status=\d+ duration=(\S+)`)

// handlers returns a copy of the agent's handler times so far.
func (a *labAgent) handlers() map[string]handlerTime {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]handlerTime, len(a.handled))
	for k, v := range a.handled {
		out[k] = v
	}
	return out
}

// startLabAgent runs the agent bin on ip:0 as compute id, registering
// with the controller at ctlURL with secret.
func startLabAgent(bin, id, ip, dataDir, ctlURL, secret string) (*labAgent, error) {
	a := &labAgent{id: id, done: make(chan error, 1), handled: map[string]handlerTime{}}
	// Its whole log, beside its data directory (-keep keeps it).
	var err error
	if a.log, err = os.Create(dataDir + ".log"); err != nil {
		return nil, err
	}
	a.cmd = exec.Command(bin, "--listen", ip+":0", "--data-dir", dataDir, "--compute-id", id,
		"--controller", ctlURL, "--log-level", "info")
	a.cmd.Env = append(os.Environ(), "LABTAP_SECRET="+secret)
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", id, err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		shown := 0
		for sc.Scan() {
			line := sc.Text()
			if a.log != nil {
				fmt.Fprintln(a.log, line)
			}
			if m := labAgentRequest.FindStringSubmatch(line); m != nil {
				if d, err := time.ParseDuration(m[3]); err == nil {
					a.mu.Lock()
					h := a.handled[m[1]+" "+m[2]]
					a.handled[m[1]+" "+m[2]] = handlerTime{h.n + 1, h.sum + d}
					a.mu.Unlock()
				}
			} else if m := labAgentListen.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			} else if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && shown < 20 &&
				!strings.Contains(line, "LABTAP_SECRET is deprecated") && !strings.Contains(line, "run under TCG") {
				shown++
				fmt.Fprintln(os.Stderr, "agent "+id+":", line)
			}
		}
		a.done <- a.cmd.Wait()
	}()
	select {
	case <-addr:
		return a, nil
	case err := <-a.done:
		return nil, fmt.Errorf("agent %s exited at start: %v", id, err)
	case <-time.After(30 * time.Second):
		a.stop()
		return nil, fmt.Errorf("agent %s did not start within 30 s", id)
	}
}

func (a *labAgent) stop() {
	a.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
	a.log.Close()
}

// freeAddr returns a 127.0.0.1 address with a port free now, for a flag
// that does not say which port it bound.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// streamCount counts the lines of a notification stream until ctx ends.
func streamCount(ctx context.Context, url string, n *atomic.Int64) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"ping"`) {
				n.Add(1)
			}
		}
	}()
	return nil
}

// descendants lists every process below pid.
func descendants(pid int) []int {
	var out []int
	for _, k := range children(pid) {
		out = append(out, k)
		out = append(out, descendants(k)...)
	}
	return out
}

// runLab is the -lab mode.
func runLab(cfg labConfig) error {
	if _, err := exec.LookPath("vpcs"); err != nil {
		return fmt.Errorf("-lab needs vpcs: %w", err)
	}
	nodes, links, err := labAcross(cfg.n, cfg.agents, 8)
	if err != nil {
		return err
	}
	ndocker, nqemu := min(dockerCount(cfg.docker, cfg.agents), cfg.agents), min(qemuCount(cfg.qemu, cfg.agents), cfg.agents)
	guest := tinyGuest()
	if nqemu > 0 && guest == "" {
		return errors.New("-lab-qemu: no tiny guest (scripts/tiny-guest)")
	}
	nodes, links = withOnEach(nodes, links, cfg.agents, ndocker, "docker", 8)
	nodes, links = withOnEach(nodes, links, cfg.agents, nqemu, "qemu", 8)
	fmt.Printf("lab bench: %d nodes (%d docker, %d qemu), %d links (%d across agents) over %d agents; %d CPUs, load average %s\n",
		len(nodes), ndocker, nqemu, len(links), cfg.agents-1, cfg.agents, nproc(), loadavg())
	before := cpuTimes("")
	key := make([]byte, 16)
	rand.Read(key)
	secret := hex.EncodeToString(key)
	paddr, err := freeAddr()
	if err != nil {
		return err
	}
	c, err := startController(cfg.controller, "", []string{"LABTAP_SECRET=" + secret},
		"--no-local-agent", "--pprof-listen", paddr)
	if err != nil {
		return err
	}
	defer func() { c.close(cfg.keep) }()
	ctlURL := strings.TrimSuffix(c.base, "/v2")

	var agents []*labAgent
	defer func() {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(a.stop)
		}
		wg.Wait()
	}()
	for j := range cfg.agents {
		id := fmt.Sprintf("agent%d", j+1)
		if j < nqemu {
			// The agent's QEMU images folder holds the guest.
			images := filepath.Join(c.dir, id, "images", "QEMU")
			if err := os.MkdirAll(images, 0o755); err != nil {
				return err
			}
			for _, f := range []string{"vmlinuz", "initrd.img"} {
				data, err := os.ReadFile(filepath.Join(guest, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(images, f), data, 0o644); err != nil {
					return err
				}
			}
		}
		a, err := startLabAgent(cfg.agent, id, fmt.Sprintf("127.0.0.%d", j+2), filepath.Join(c.dir, id), ctlURL, secret)
		if err != nil {
			return err
		}
		agents = append(agents, a)
	}
	if err := waitComputes(c, cfg.agents, 60*time.Second); err != nil {
		return err
	}

	usage := func() string {
		var arss int64
		var procs []int
		for _, a := range agents {
			arss += vmRSS(a.cmd.Process.Pid)
			procs = append(procs, descendants(a.cmd.Process.Pid)...)
		}
		var nrss int64
		for _, p := range procs {
			nrss += vmRSS(p)
		}
		return fmt.Sprintf("controller RSS %6.1f MiB, agents %6.1f MiB, %d node processes %6.1f MiB",
			float64(vmRSS(c.pid))/(1<<20), float64(arss)/(1<<20), len(procs), float64(nrss)/(1<<20))
	}
	phase := func(name string, d time.Duration, extra string) {
		fmt.Printf("  %-34s %9s  %s%s\n", name, d.Round(time.Millisecond), usage(), extra)
	}
	fmt.Printf("  %-34s %9s  %s\n", "before the lab", "", usage())

	p, err := c.project(fmt.Sprintf("labbench-%d-%d", cfg.n, time.Now().UnixNano()))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ctlMsgs, projMsgs atomic.Int64
	if err := streamCount(ctx, c.base+"/notifications", &ctlMsgs); err != nil {
		return err
	}
	if err := streamCount(ctx, c.base+"/projects/"+p+"/notifications?passive=true", &projMsgs); err != nil {
		return err
	}

	// create
	t0 := time.Now()
	ids := make([]string, len(nodes))
	for i, nd := range nodes {
		var out idOnly
		req := map[string]any{"name": nd.name, "node_type": nd.typ,
			"compute_id": fmt.Sprintf("agent%d", nd.agent+1), "x": (i % 40) * 60, "y": (i / 40) * 60}
		switch nd.typ {
		case "docker":
			req["properties"] = map[string]any{"image": labImage, "start_command": "sleep infinity", "adapters": 1}
		case "qemu":
			req["properties"] = map[string]any{"kernel_image": "vmlinuz", "initrd": "initrd.img", "ram": 96, "adapters": 1,
				"kernel_command_line": "console=ttyS0 no_timer_check labtap.name=" + nd.name}
		}
		if _, err := c.call("POST", "/projects/"+p+"/nodes", req, &out); err != nil {
			return err
		}
		ids[i] = out.NodeID
	}
	dn := time.Since(t0)
	phase(fmt.Sprintf("create %d nodes", len(nodes)), dn, fmt.Sprintf("; %.1f ms a node", float64(dn.Microseconds())/1000/float64(len(nodes))))
	t1 := time.Now()
	lids := make([]string, len(links))
	for i, l := range links {
		if lids[i], _, err = c.link(p, ids[l.a], l.aPort, ids[l.b], l.bPort); err != nil {
			return err
		}
	}
	dl := time.Since(t1)
	phase(fmt.Sprintf("create %d links", len(links)), dl, fmt.Sprintf("; %.1f ms a link", float64(dl.Microseconds())/1000/float64(len(links))))
	phase("create (nodes and links)", time.Since(t0), "")

	timed := func(name, method, path string) (time.Duration, error) {
		t := time.Now()
		if _, err := c.call(method, "/projects/"+p+path, nil, nil); err != nil {
			return 0, err
		}
		d := time.Since(t)
		phase(name, d, "")
		return d, nil
	}
	if _, err := timed("close (stopped, no capture)", "POST", "/close"); err != nil {
		return err
	}
	if err := splitOpen(c, agents, "open", p); err != nil {
		return err
	}
	if cfg.profile {
		if _, err := c.call("POST", "/projects/"+p+"/close", nil, nil); err != nil {
			return err
		}
		if err := profileOpen(c, paddr, p); err != nil {
			return err
		}
	}

	c0, p0 := ctlMsgs.Load(), projMsgs.Load()
	t0 = time.Now()
	if _, err := c.call("POST", "/projects/"+p+"/nodes/start", nil, nil); err != nil {
		// Some node did not start (a guest slow to boot on a loaded
		// machine): the rest of the lab runs on, and is counted below.
		fmt.Println("    start all:", err)
	}
	ds := time.Since(t0)
	c1, p1 := ctlMsgs.Load(), projMsgs.Load()
	time.Sleep(2 * time.Second) // updates still on their way
	c2, p2 := ctlMsgs.Load(), projMsgs.Load()
	started, notStarted, err := countStatus(c, p, "started")
	if err != nil {
		return err
	}
	if len(notStarted) > 0 {
		fmt.Printf("    not started: %s\n", strings.Join(notStarted[:min(10, len(notStarted))], ", "))
		for _, name := range notStarted[:min(3, len(notStarted))] {
			for i, nd := range nodes {
				if strings.HasPrefix(name, nd.name+" ") {
					fmt.Printf("    %s (%s) in agent%d's log (%s.log):\n", nd.name, ids[i], nd.agent+1, filepath.Join(c.dir, fmt.Sprintf("agent%d", nd.agent+1)))
					logged, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("agent%d.log", nd.agent+1)))
					var hits []string
					for _, line := range strings.Split(string(logged), "\n") {
						if strings.Contains(line, ids[i]) && !strings.Contains(line, "msg=request") {
							hits = append(hits, line)
						}
					}
					for _, line := range hits[max(0, len(hits)-6):] {
						fmt.Println("      " + line[:min(len(line), 400)])
					}
				}
			}
		}
	}
	phase("start all (nodes/start)", ds, fmt.Sprintf("; %d nodes started", started))
	fmt.Printf("    notifications during start all: /v2/notifications %d (%.0f/s), the project's stream %d (%.0f/s); %d and %d more in the 2 s after\n",
		c1-c0, float64(c1-c0)/ds.Seconds(), p1-p0, float64(p1-p0)/ds.Seconds(), c2-c1, p2-p1)

	t0 = time.Now()
	var caps []time.Duration
	for _, l := range lids {
		d, err := c.call("POST", "/projects/"+p+"/links/"+l+"/start_capture", map[string]any{}, nil)
		if err != nil {
			return err
		}
		caps = append(caps, d)
	}
	phase(fmt.Sprintf("capture %d links", len(lids)), time.Since(t0),
		fmt.Sprintf("; one at a time: p50 %s, p99 %s", pct(caps, 50), pct(caps, 99)))

	if _, err := timed("stop all (nodes/stop)", "POST", "/nodes/stop"); err != nil {
		return err
	}
	if _, err := timed("close (captures running)", "POST", "/close"); err != nil {
		return err
	}
	if err := splitOpen(c, agents, "reopen", p); err != nil {
		return err
	}
	if _, err := timed("delete", "DELETE", ""); err != nil {
		return err
	}
	fmt.Printf("steal over the run: %.1f%%; load average at the end %s\n", 100*cpuTimes("").stealShare(before), loadavg())
	return nil
}

// splitOpen opens closed project p and says where the open's wall time
// went: the controller's CPU and the time it waited for a CPU, the
// agents' CPU, and the agents' handlers by route (from their access logs,
// whose lines may lag the answer by a little).
func splitOpen(c *ctl, agents []*labAgent, name, p string) error {
	agCPU := func() (cpu float64, wait time.Duration) {
		for _, a := range agents {
			x, _ := procCPU(a.cmd.Process.Pid)
			cpu += x
			wait += runDelay(a.cmd.Process.Pid)
		}
		return cpu, wait
	}
	before := make([]map[string]handlerTime, len(agents))
	for i, a := range agents {
		before[i] = a.handlers()
	}
	c0, _ := procCPU(c.pid)
	w0 := runDelay(c.pid)
	a0, aw0 := agCPU()
	t0 := time.Now()
	if _, err := c.call("POST", "/projects/"+p+"/open", nil, nil); err != nil {
		return err
	}
	d := time.Since(t0)
	c1, _ := procCPU(c.pid)
	w1 := runDelay(c.pid)
	a1, aw1 := agCPU()
	fmt.Printf("  %-34s %9s\n", name, d.Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond) // the agents' last log lines
	byRoute := map[string]handlerTime{}
	var total time.Duration
	calls := 0
	for i, a := range agents {
		for k, v := range a.handlers() {
			b := before[i][k]
			if v.n > b.n {
				h := byRoute[k]
				byRoute[k] = handlerTime{h.n + v.n - b.n, h.sum + v.sum - b.sum}
				total += v.sum - b.sum
				calls += v.n - b.n
			}
		}
	}
	fmt.Printf("    split: controller CPU %.2f s (waited %.2f s for a CPU), agents' CPU %.2f s (waited %.2f s); %d agent calls, their handlers %.2f s in all:\n",
		c1-c0, (w1 - w0).Seconds(), a1-a0, (aw1 - aw0).Seconds(), calls, total.Seconds())
	routes := make([]string, 0, len(byRoute))
	for k := range byRoute {
		routes = append(routes, k)
	}
	slices.SortFunc(routes, func(x, y string) int { return int(byRoute[y].sum - byRoute[x].sum) })
	for _, k := range routes[:min(5, len(routes))] {
		fmt.Printf("      %-60s %5d calls %8.3f s (%.2f ms each)\n", k, byRoute[k].n, byRoute[k].sum.Seconds(),
			float64(byRoute[k].sum.Microseconds())/1000/float64(byRoute[k].n))
	}
	return nil
}

// waitComputes waits until n computes are connected.
func waitComputes(c *ctl, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var cs []struct {
			ID        string `json:"compute_id"`
			Connected bool   `json:"connected"`
		}
		if _, err := c.call("GET", "/computes", nil, &cs); err != nil {
			return err
		}
		up := 0
		for _, x := range cs {
			if x.Connected {
				up++
			}
		}
		if up >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d agents connected after %s", up, n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countStatus counts project p's nodes in status, and names the others
// (with their status).
func countStatus(c *ctl, p, status string) (int, []string, error) {
	var ns []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	if _, err := c.call("GET", "/projects/"+p+"/nodes", nil, &ns); err != nil {
		return 0, nil, err
	}
	k := 0
	var others []string
	for _, n := range ns {
		if n.Status == status {
			k++
		} else {
			others = append(others, n.Name+" ("+n.Status+")")
		}
	}
	return k, others, nil
}

// profileOpen opens closed project p under a CPU profile of the
// controller and prints the profile's top functions, flat and cumulative.
func profileOpen(c *ctl, paddr, p string) error {
	// The profile runs for whole seconds: long enough for the open, which
	// adds no samples once it is done.
	const secs = 10
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", paddr, secs))
		if err != nil {
			got <- result{nil, err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("pprof: %d %s", resp.StatusCode, data)
		}
		got <- result{data, err}
	}()
	time.Sleep(200 * time.Millisecond) // the profile has started
	t0 := time.Now()
	if _, err := c.call("POST", "/projects/"+p+"/open", nil, nil); err != nil {
		return err
	}
	d := time.Since(t0)
	fmt.Printf("  %-34s %9s  (under a %d s CPU profile)\n", "open, profiled", d.Round(time.Millisecond), secs)
	if d > secs*time.Second-time.Second {
		fmt.Printf("    the open outlasted most of the profile: it covers only its first %d s\n", int(math.Max(0, secs-0.2)))
	}
	r := <-got
	if r.err != nil {
		return r.err
	}
	file := filepath.Join(c.dir, "open.pprof")
	if err := os.WriteFile(file, r.data, 0o644); err != nil {
		return err
	}
	for _, how := range [][]string{{"-top"}, {"-top", "-cum"}} {
		args := append(append([]string{"tool", "pprof"}, how...), "-nodecount=25", file)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) || errors.Is(err, exec.ErrNotFound) {
				fmt.Printf("    go tool pprof: %v: %s\n", err, out)
				return nil
			}
			return err
		}
		fmt.Printf("    pprof %s:\n", strings.Join(how, " "))
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(line, "File:") && !strings.HasPrefix(line, "Build ID:") && !strings.HasPrefix(line, "Type:") && !strings.HasPrefix(line, "Time:") {
				fmt.Println("      " + line)
			}
		}
	}
	fmt.Println("    profile kept while the run lasts at", file, "(-keep keeps it)")
	return nil
}
