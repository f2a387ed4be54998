package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/proto"
	"golang.org/x/sys/unix"
)

// bench is one agent under test, with its lab: generator → cloud 1 → link
// → cloud 2 → sink. The xagent topology has a second agent, peer, with
// cloud 2 and the link's other half.
type bench struct {
	cfg config
	dir string
	*agentProc
	peer *agentProc // the xagent topology's agent B; nil otherwise

	project, link string
	path          []string         // every link from the generator's cloud to the sink's, in order (path[0] is link)
	ends          [2]proto.LinkEnd // as the agent reports them

	gen    *net.UDPConn // connected to cloud 1's lport
	direct *net.UDPConn // the ceiling's generator: connected to the sink
	sink   *net.UDPConn
	// relayIn are the relay's receiving sockets' ports, first cloud 1's
	// lport (where the generator sends), then agent B's tunnel end.
	relayIn []int
	start   time.Time
	capN    int
	runN    uint32 // runs done: each run's frames carry its number
}

// agentProc is one running agent process and its API.
type agentProc struct {
	secret string
	api    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	exited chan error
}

// agents returns the bench's running agents: A, then B when there is one.
func (b *bench) agents() []*agentProc {
	if b.peer != nil {
		return []*agentProc{b.agentProc, b.peer}
	}
	return []*agentProc{b.agentProc}
}

const (
	projectID = "b0000000-0000-4000-8000-000000000001"
	cloudA    = "b0000000-0000-4000-8000-00000000000a"
	cloudB    = "b0000000-0000-4000-8000-00000000000b"
	linkID    = "b0000000-0000-4000-8000-0000000000ab"
)

var loopback = net.IPv4(127, 0, 0, 1)

func newBench(cfg config) (*bench, error) {
	b := &bench{cfg: cfg, start: time.Now(), project: projectID, link: linkID}
	var err error
	if b.dir, err = os.MkdirTemp("", "labtap-bench-"); err != nil {
		return nil, err
	}
	if err := b.startAgent(); err != nil {
		b.close()
		return nil, err
	}
	if crossAgents(cfg.topology) {
		if b.peer, err = startAgent(cfg, filepath.Join(b.dir, "data-b")); err != nil {
			b.close()
			return nil, err
		}
	}
	if err := b.setup(); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

var listenLine = regexp.MustCompile(`msg="agent listening" addr=(\S+)`)

// startAgent starts the bench's agent (A).
func (b *bench) startAgent() error {
	a, err := startAgent(b.cfg, filepath.Join(b.dir, "data"))
	b.agentProc = a
	return err
}

// startAgent runs the agent binary on an ephemeral loopback port with a
// fresh data directory and a random shared secret. On error the returned
// agent, if not nil, is to be stopped.
func startAgent(cfg config, dataDir string) (*agentProc, error) {
	key := make([]byte, 16)
	rand.Read(key)
	b := &agentProc{secret: hex.EncodeToString(key)}
	args := []string{cfg.agent, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "info"}
	if cfg.buffer > 0 {
		args = append(args, "--socket-buffer", strconv.Itoa(cfg.buffer))
	}
	if cfg.noGRO {
		args = append(args, "--udp-gro=false")
	}
	if cfg.buffered {
		args = append(args, "--capture-direct-io=false")
	}
	if cfg.agentCPU != "" {
		if _, err := exec.LookPath("taskset"); err != nil {
			return nil, fmt.Errorf("-agent-cpu %s needs taskset (util-linux): %w", cfg.agentCPU, err)
		}
		args = append([]string{"taskset", "-c", cfg.agentCPU}, args...)
	}
	b.cmd = exec.Command(args[0], args[1:]...)
	b.cmd.Env = append(os.Environ(), "LABTAP_SECRET="+b.secret)
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	b.exited = make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		// The agent logs to stderr; its first lines give its address, the
		// rest are passed on, for errors.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			} else if strings.Contains(sc.Text(), "level=WARN") || strings.Contains(sc.Text(), "level=ERROR") || strings.HasPrefix(sc.Text(), "gc ") {
				fmt.Fprintln(os.Stderr, "agent:", sc.Text())
			}
		}
		b.exited <- b.cmd.Wait()
	}()
	select {
	case a := <-addr:
		b.api = "http://" + a
		return b, nil
	case err := <-b.exited:
		return nil, fmt.Errorf("agent exited at start: %v", err)
	case <-time.After(20 * time.Second):
		return b, errors.New("agent did not start within 20 s")
	}
}

// close stops the agents and removes their data directory.
func (b *bench) close() {
	for _, c := range []*net.UDPConn{b.gen, b.direct, b.sink} {
		if c != nil {
			c.Close()
		}
	}
	b.peer.stop()
	b.agentProc.stop()
	if !b.cfg.keep {
		os.RemoveAll(b.dir)
	}
}

// stop stops an agent: SIGTERM, then SIGKILL after 15 s.
func (b *agentProc) stop() {
	if b == nil || b.cmd.Process == nil {
		return
	}
	b.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(15 * time.Second):
		b.cmd.Process.Kill()
	}
}

// call sends one API request with the secret and decodes the reply.
func (b *agentProc) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, b.api+path, body)
	if err != nil {
		return err
	}
	req.Header.Set(proto.SecretHeader, b.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// freePort returns a loopback UDP port that was free a moment ago.
func freePort() (int, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: loopback})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func listen(port int) (*net.UDPConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: loopback, Port: port})
	if err != nil {
		return nil, err
	}
	bigBuffers(c)
	return c, nil
}

// bigBuffers gives a generator's or the sink's socket 32 MiB buffers
// (forced past net.core.rmem_max when the bench runs as root), so that the
// harness rides out the stalls of a busy machine and loss, if any, is the
// relay's. The relay's own sockets keep what the agent asks for.
func bigBuffers(c *net.UDPConn) {
	const size = 32 << 20
	c.SetReadBuffer(size)
	c.SetWriteBuffer(size)
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size)
		})
	}
}

// setup makes the lab: the sink and the generators' sockets, the project,
// two clouds (or two tunnel ends) and the link.
func (b *bench) setup() error {
	var err error
	if b.sink, err = listen(0); err != nil {
		return err
	}
	l1, err := freePort()
	if err != nil {
		return err
	}
	l2, err := freePort()
	if err != nil {
		return err
	}
	b.relayIn = []int{l1}
	genPort, err := freePort()
	if err != nil {
		return err
	}
	sinkPort := b.sink.LocalAddr().(*net.UDPAddr).Port
	for _, ag := range b.agents() {
		if err := ag.call("PUT", proto.ProjectPath(b.project), proto.ProjectSpec{Name: "bench"}, nil); err != nil {
			return err
		}
	}
	// Cloud 2 is on the last agent: B in the xagent topology.
	zOn := b.agents()[len(b.agents())-1]
	a := proto.Endpoint{NodeID: cloudA, Name: "Cloud1 UDP"}
	z := proto.Endpoint{NodeID: cloudB, Name: "Cloud2 UDP"}
	if b.cfg.tunnels {
		a = proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: l1, RemoteHost: "127.0.0.1", RemotePort: genPort}}
		z = proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: l2, RemoteHost: "127.0.0.1", RemotePort: sinkPort}}
	} else {
		for _, c := range []struct {
			on           *agentProc
			id, name     string
			lport, rport int
		}{{b.agentProc, cloudA, "Cloud1", l1, genPort}, {zOn, cloudB, "Cloud2", l2, sinkPort}} {
			spec := proto.NodeSpec{NodeType: "cloud", Name: c.name, Ports: []proto.PortMapping{
				{Name: "UDP tunnel 1", Type: proto.PortUDP, LocalPort: c.lport, RemoteHost: "127.0.0.1", RemotePort: c.rport},
			}}
			if err := c.on.call("PUT", proto.NodePath(b.project, c.id), spec, nil); err != nil {
				return fmt.Errorf("create cloud (an agent without cloud nodes needs -tunnels): %w", err)
			}
		}
	}
	if err := b.buildPath(a, z); err != nil {
		return err
	}
	// The generator sends from genPort, the only source cloud 1 hears.
	if b.gen, err = net.DialUDP("udp4", &net.UDPAddr{IP: loopback, Port: genPort}, &net.UDPAddr{IP: loopback, Port: l1}); err != nil {
		return err
	}
	bigBuffers(b.gen)
	if b.direct, err = net.DialUDP("udp4", &net.UDPAddr{IP: loopback}, &net.UDPAddr{IP: loopback, Port: sinkPort}); err != nil {
		return err
	}
	bigBuffers(b.direct)
	var st proto.LinkState
	if err := b.call("GET", proto.LinkPath(b.project, b.link), nil, &st); err == nil {
		b.ends = st.Ends
	}
	return nil
}

// Topologies the bench can put between the two clouds.
var topologies = map[string]struct {
	nodeType string // of the nodes in the middle
	count    int
}{
	"cloud":  {},                     // cloud - cloud
	"switch": {"ethernet_switch", 1}, // cloud - switch - cloud
	"hub":    {"ethernet_hub", 1},    // cloud - hub - cloud
	"chain4": {"ethernet_switch", 4}, // cloud - 4 switches - cloud
	// cloud - container - cloud: a docker node (labtap/host:bookworm,
	// scripts/node-images) whose eth0 hands every frame to eth1 with a tc
	// mirred redirect, so each frame crosses two veths, two AF_PACKET
	// ports and the container's netns. Needs root and a Docker Engine.
	"docker": {"docker", 1},
	// cloud on agent A - cloud on agent B: the link crosses agents as the
	// controller wires a link whose nodes are on two computes, each agent
	// relaying its half to a UDP tunnel between them over 127.0.0.1
	// (crossLink).
	"xagent": {},
}

// crossAgents says whether a topology's clouds are on two agents.
func crossAgents(topology string) bool { return topology == "xagent" }

// forwarder is the docker topology's container: every frame entering
// eth0 leaves by eth1, as it came (u32 matching everything: this kernel
// may lack matchall). IPv6 is off (forwarderSysctls), so it sends nothing
// of its own.
const forwarder = "tc qdisc add dev eth0 ingress && " +
	"tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev eth1 && " +
	"exec sleep infinity"

// dockerNode creates and starts the docker topology's forwarding container.
func (b *bench) dockerNode(id, name string) error {
	// The Engine sets them as the container starts, before its interfaces
	// exist: "default" is what they are made with (/proc/sys is read-only
	// inside, so the command cannot).
	forwarderSysctls := map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
	props, _ := json.Marshal(map[string]any{"image": "labtap/host:bookworm", "start_command": "sh -c '" + forwarder + "'", "sysctls": forwarderSysctls})
	spec := proto.NodeSpec{NodeType: "docker", Name: name, Properties: props, Adapters: []proto.AdapterSpec{
		{MACAddress: "02:42:b0:00:01:00", PortName: "eth0"}, {MACAddress: "02:42:b0:00:01:01", PortName: "eth1"},
	}}
	if err := b.call("PUT", proto.NodePath(b.project, id), spec, nil); err != nil {
		return fmt.Errorf("create the forwarding container (needs root, a Docker Engine and scripts/node-images): %w", err)
	}
	if err := b.call("PUT", proto.NodeStatusPath(b.project, id), proto.NodeStatusSpec{Status: proto.StatusStarted}, nil); err != nil {
		return fmt.Errorf("start the forwarding container: %w", err)
	}
	time.Sleep(2 * time.Second) // its command sets tc up once eth0 and eth1 are there
	return nil
}

// buildPath links endpoint a to endpoint z through the topology's nodes in
// the middle, each using its ports 0 and 1. The first link, from a, is the
// one the bench captures and reads counters of (b.link).
func (b *bench) buildPath(a, z proto.Endpoint) error {
	t := topologies[b.cfg.topology]
	if crossAgents(b.cfg.topology) {
		return b.crossLink(a, z)
	}
	left := a
	for i := range t.count {
		id := fmt.Sprintf("b0000000-0000-4000-8000-0000000001%02x", i)
		name := fmt.Sprintf("SW%d", i+1)
		ports := []proto.PortMapping{{Name: "Ethernet0"}, {Name: "Ethernet1"}}
		if t.nodeType == "docker" {
			name = fmt.Sprintf("FWD%d", i+1)
			if err := b.dockerNode(id, name); err != nil {
				return err
			}
			link := b.link
			if i > 0 {
				link = fmt.Sprintf("b0000000-0000-4000-8000-0000000002%02x", i)
			}
			b.path = append(b.path, link)
			if err := b.call("PUT", proto.LinkPath(b.project, link), proto.LinkSpec{A: left, B: proto.Endpoint{NodeID: id, Adapter: 0, Name: name + " eth0"}}, nil); err != nil {
				return err
			}
			left = proto.Endpoint{NodeID: id, Adapter: 1, Name: name + " eth1"}
			continue
		}
		if t.nodeType == "ethernet_switch" {
			for j := range ports {
				ports[j].Type, ports[j].VLAN = proto.PortAccess, 1
			}
		}
		if err := b.call("PUT", proto.NodePath(b.project, id), proto.NodeSpec{NodeType: t.nodeType, Name: name, Ports: ports}, nil); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		link := b.link
		if i > 0 {
			link = fmt.Sprintf("b0000000-0000-4000-8000-0000000002%02x", i)
		}
		b.path = append(b.path, link)
		right := proto.Endpoint{NodeID: id, Port: 0, Name: name + " Ethernet0"}
		if err := b.call("PUT", proto.LinkPath(b.project, link), proto.LinkSpec{A: left, B: right}, nil); err != nil {
			return err
		}
		left = proto.Endpoint{NodeID: id, Port: 1, Name: name + " Ethernet1"}
	}
	link := b.link
	if t.count > 0 {
		link = "b0000000-0000-4000-8000-0000000002ff"
	}
	b.path = append(b.path, link)
	return b.call("PUT", proto.LinkPath(b.project, link), proto.LinkSpec{A: left, B: z}, nil)
}

// crossLink links a on agent A to z on agent B as the controller wires a
// link whose nodes are on two computes (controller/project/links.go, wire
// and crossWirings): a tunnel port reserved on each agent, then on each the
// link's half, under the link's id, between its node's port and a tunnel
// from its reserved port to the other's. The half on A is the one the bench
// captures and reads the counters of: the controller captures a link of two
// clouds on its first node's side (captureSide), and across computes only
// that side's half writes the file.
func (b *bench) crossLink(a, z proto.Endpoint) error {
	var ports [2]int
	for i, ag := range b.agents() {
		var tp proto.TunnelPort
		if err := ag.call("PUT", proto.TunnelPortPath(b.project, fmt.Sprintf("%s-%d", b.link, i)), nil, &tp); err != nil {
			return fmt.Errorf("reserve a tunnel port: %w", err)
		}
		ports[i] = tp.Port
	}
	// The tunnel end faces the other side's node, and is named after it.
	tunnel := func(self int, name string) proto.Endpoint {
		return proto.Endpoint{Name: name, Tunnel: &proto.Tunnel{LocalPort: ports[self], RemoteHost: "127.0.0.1", RemotePort: ports[1-self]}}
	}
	if err := b.call("PUT", proto.LinkPath(b.project, b.link), proto.LinkSpec{
		LinkID: b.link, A: a, B: tunnel(0, z.Name), DataLinkType: "DLT_EN10MB",
	}, nil); err != nil {
		return fmt.Errorf("agent A's half of the link: %w", err)
	}
	if err := b.peer.call("PUT", proto.LinkPath(b.project, b.link), proto.LinkSpec{
		LinkID: b.link, A: tunnel(1, a.Name), B: z, DataLinkType: "DLT_EN10MB",
	}, nil); err != nil {
		return fmt.Errorf("agent B's half of the link: %w", err)
	}
	b.relayIn = append(b.relayIn, ports[1])
	return nil
}

// spec describes one run.
type spec struct {
	name     string
	size     int
	relay    bool // through the relay, or generator → sink directly
	capture  bool
	rate     int           // frames/s; 0: as fast as the generator goes
	duration time.Duration // how long the generator sends
	run      uint32        // the run's number, in its frames (set by one)
}

// result is what one run measured.
type result struct {
	spec
	sent, received int
	genRate        float64 // frames/s the generator sent
	seconds        float64 // from the first to the last frame received
	rate           float64 // received frames/s
	p50, p99       time.Duration
	relayCPU       float64       // agent CPU seconds during the run
	peerCPU        float64       // of which agent B's, in the xagent topology
	cpuWait        time.Duration // agent threads were runnable but waited for a CPU
	steal          float64       // share of the machine's CPU time the hypervisor took (steal time)
	// emitted frames left the captured link's relay toward its next hop
	// (forwarded, or refused there: a full switch queue), -1 if unknown.
	// The capture records what crossed the link, so it holds exactly
	// these: a frame the next hop drops was still on the wire.
	emitted    int64
	forwarded  int64 // by the relay to the next hop, -1 if unknown
	relayDrops int64 // datagrams the kernel dropped at the relay's socket
	peerDrops  int64 // of which at agent B's tunnel end, in the xagent topology
	sinkDrops  int64 // and at the sink's
	// unread frames were sent to the relay but never read by it: dropped
	// at its socket (relayDrops counts a dropped GRO run once), -1 if
	// unknown; refused frames were refused by a hop of the path (a full
	// switch queue, a failed send), summed over its links.
	unread, refused int64
	// stale frames of an earlier run reached the sink during this one.
	stale int
	// due is how many frames a steady run was to send (rate × duration; 0
	// at max rate), pause the generator's longest pause.
	due     int
	pause   pause
	capture *captureCheck
	err     error
}

// runs lists the runs of one repetition, in order.
func (b *bench) runs() []spec {
	d, st, rate := b.cfg.duration, b.cfg.steady, b.cfg.rate
	all := []spec{
		{name: "ceiling-64", size: 64, duration: d},
		{name: "off-64", size: 64, relay: true, duration: d},
		{name: "on-64", size: 64, relay: true, capture: true, duration: d},
		{name: "ceiling-1500", size: 1500, duration: d},
		{name: "off-1500", size: 1500, relay: true, duration: d},
		{name: "on-1500", size: 1500, relay: true, capture: true, duration: d},
		{name: "ceiling-1500-steady", size: 1500, rate: rate, duration: st},
		{name: "off-1500-steady", size: 1500, relay: true, rate: rate, duration: st},
		{name: "on-1500-steady", size: 1500, relay: true, capture: true, rate: rate, duration: st},
	}
	if b.cfg.only == nil {
		return all
	}
	var out []spec
	for _, s := range all {
		if b.cfg.only[s.name] {
			out = append(out, s)
		}
	}
	return out
}

// all runs every run cfg.reps times, interleaved (so that a burst of load
// from elsewhere on the machine hits several kinds of run, not one), and
// returns the runs of every repetition.
func (b *bench) all() ([][]result, error) {
	var out [][]result
	for rep := range b.cfg.reps {
		var row []result
		for _, s := range b.runs() {
			fmt.Fprintf(os.Stderr, "rep %d/%d %-20s ", rep+1, b.cfg.reps, s.name)
			r := b.one(s)
			stale := ""
			if r.stale > 0 {
				stale = fmt.Sprintf("  %d frames of an earlier run reached the sink late", r.stale)
			}
			fmt.Fprintf(os.Stderr, "%9.0f frames/s  loss %6.2f%%%s  steal %3.0f%%  agent threads waited %v for a CPU%s  %s%s\n",
				r.rate, 100*r.loss(), r.lossSummary(), 100*r.steal, r.cpuWait.Round(time.Millisecond), stale, r.shortSummary(), r.captureSummary())
			row = append(row, r)
			if r.err != nil {
				return append(out, row), r.err
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// lossSummary says where the frames of a relay run that the sink did not
// receive were lost: never read from the relay's socket, refused by a hop
// of the path, dropped at the sink's socket.
func (r result) lossSummary() string {
	if !r.relay || r.sent == r.received {
		return ""
	}
	unread := "?"
	if r.unread >= 0 {
		unread = fmt.Sprint(r.unread)
	}
	return fmt.Sprintf(" (unread at the relay's socket %s, refused on the path %d, sink socket drops %d)", unread, r.refused, r.sinkDrops)
}

// cutShort says whether a steady run's generator sent less than 99% of
// the frames due: its thread stopped coming round for a while (a stall of
// its CPU, or of the machine) and the run ended on time, so every figure,
// the sink's rate, the loss and a capture called complete, covers a
// shorter run than the one asked for. A pause the generator catches up on
// sends a burst and still counts as a run, as before; a run that ends
// before the catch-up does not. (Runs measured at 100k frames/s for 5 s
// send 499,9xx frames; 112,416 were sent in a run that paused 3.9 s.)
func (r result) cutShort() bool { return r.due > 0 && r.sent < r.due-r.due/100 }

// shortSummary says so of a run cut short, and gives the generator's
// longest pause when it was long enough to matter (100 ms: 10k frames at
// the steady rate).
func (r result) shortSummary() string {
	if r.cutShort() {
		return fmt.Sprintf("RUN CUT SHORT: the generator sent %d of the %d frames due (%d/s for %v); its longest pause %v  ",
			r.sent, r.due, r.spec.rate, r.duration, r.pause)
	}
	if r.pause.length >= 100*time.Millisecond {
		return fmt.Sprintf("generator paused %v  ", r.pause)
	}
	return ""
}

func (r result) loss() float64 {
	if r.sent == 0 {
		return 0
	}
	return 1 - float64(r.received)/float64(r.sent)
}

// one does one run.
func (b *bench) one(s spec) result {
	b.runN++
	s.run = b.runN
	r := result{spec: s, emitted: -1, forwarded: -1, unread: -1}
	var capPath string
	if s.capture {
		b.capN++
		var st proto.CaptureState
		if r.err = b.call("PUT", proto.CapturePath(b.project, b.link), proto.CaptureSpec{
			FileName: fmt.Sprintf("bench-%d.pcap", b.capN), DataLinkType: "DLT_EN10MB",
		}, &st); r.err != nil {
			return r
		}
		capPath = st.FilePath
	}
	before, _ := b.linkState()
	refused0 := b.pathRefused()
	pool0 := int64(-1)
	if s.capture {
		pool0 = b.poolRefused()
	}
	cpu0, wait0 := b.agentsCPU()
	steal0 := cpuTimes("")
	sinkPort := b.sink.LocalAddr().(*net.UDPAddr).Port
	drops0 := udpDrops() // one read of the tables for the three counts
	relayDrops0, sinkDrops0 := drops0.sum(b.relayIn...), drops0.sum(sinkPort)
	peerDrops0 := drops0.sum(b.relayIn[1:]...)

	sk := newSink(b.sink, s.size, s.run, b.start)
	go sk.run()
	to := b.direct
	if s.relay {
		to = b.gen
	}
	var window func() int
	if s.rate == 0 && !b.cfg.overdrive {
		window = sk.received
	}
	g, err := generate(to, s, b.start, window)
	if err != nil {
		r.err = err
		sk.stop()
		return r
	}
	if s.relay {
		b.waitRelayDrained()
	}
	sk.waitIdle(300 * time.Millisecond)
	sk.stop()

	cpu1, wait1 := b.agentsCPU()
	r.cpuWait = wait1 - wait0
	if b.peer != nil {
		r.peerCPU = cpu1[1] - cpu0[1]
	}
	r.steal = cpuTimes("").stealShare(steal0)
	after, ok := b.linkState()
	r.sent = g.sent
	r.genRate = float64(g.sent) / g.seconds
	r.pause = g.pause
	if s.rate > 0 {
		r.due = int(float64(s.rate) * s.duration.Seconds())
	}
	r.received = sk.count
	r.stale = sk.stale
	r.seconds = sk.last.Sub(sk.first).Seconds()
	if r.received > 1 && r.seconds > 0 {
		r.rate = float64(r.received-1) / r.seconds
	}
	r.p50, r.p99 = sk.percentiles()
	r.relayCPU = sum(cpu1) - sum(cpu0)
	if ok {
		a, b := after.Directions[0], before.Directions[0]
		r.forwarded = int64(a.Forwarded - b.Forwarded)
		r.emitted = r.forwarded + int64(a.SendErrors-b.SendErrors)
		if s.relay {
			r.unread = int64(g.sent) - int64(a.Received-b.Received)
		}
	}
	r.refused = b.pathRefused() - refused0
	drops1 := udpDrops()
	r.relayDrops = drops1.sum(b.relayIn...) - relayDrops0
	r.peerDrops = drops1.sum(b.relayIn[1:]...) - peerDrops0
	r.sinkDrops = drops1.sum(sinkPort) - sinkDrops0
	if s.capture {
		var st proto.CaptureState
		if r.err = b.call("DELETE", proto.CapturePath(b.project, b.link), nil, &st); r.err != nil {
			return r
		}
		c := verifyCapture(capPath, s, g, sk, r.emitted)
		c.dropped = st.Dropped
		c.agentFrames = st.Frames
		c.poolRefused = -1
		if pool1 := b.poolRefused(); pool0 >= 0 && pool1 >= 0 {
			c.poolRefused = pool1 - pool0
		}
		r.capture = &c
		if !b.cfg.keep {
			os.Remove(capPath)
		}
	}
	return r
}

// waitRelayDrained waits, up to 10 s, until the relay has taken every
// datagram waiting in its socket and its counters stand still: a relay
// starved of CPU may still be forwarding after the sink went quiet, and the
// run's counters and capture must cover those frames too.
func (b *bench) waitRelayDrained() {
	deadline := time.Now().Add(10 * time.Second)
	counters := func() (c []proto.LinkState, ok bool) {
		for _, ag := range b.agents() {
			st, ok := ag.linkState(b.project, b.link)
			if !ok {
				return nil, false
			}
			c = append(c, st)
		}
		return c, true
	}
	prev, _ := counters()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		cur, ok := counters()
		if !ok {
			return // an agent without link counters: the sink's idle wait must do
		}
		if slices.EqualFunc(cur, prev, func(x, y proto.LinkState) bool { return x.Directions == y.Directions }) &&
			udpQueued().sum(b.relayIn...) == 0 {
			return
		}
		prev = cur
	}
}

// pathRefused sums the frames the links of the path could not hand to
// their next hop (proto.LinkCounters.SendErrors, generator to sink).
func (b *bench) pathRefused() int64 {
	var n int64
	for _, id := range b.path {
		var st proto.LinkState
		if b.call("GET", proto.LinkPath(b.project, id), nil, &st) == nil {
			n += int64(st.Directions[0].SendErrors)
		}
	}
	return n
}

// poolRefused returns how many blocks agent A's capture memory pool
// refused so far (labtap_capture_memory_refused_total: frames dropped
// because the agent-wide pool was exhausted, not because their capture's
// own queue was full), -1 if unknown.
func (b *bench) poolRefused() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a report line, not worth a hang
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.api+proto.MetricsPath, nil)
	if err != nil {
		return -1
	}
	req.Header.Set(proto.SecretHeader, b.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "labtap_capture_memory_refused_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int64(n)
		}
	}
	return -1
}

// linkState returns the captured link's state on agent A.
func (b *bench) linkState() (proto.LinkState, bool) { return b.agentProc.linkState(b.project, b.link) }

func (b *agentProc) linkState(project, link string) (proto.LinkState, bool) {
	var st proto.LinkState
	if err := b.call("GET", proto.LinkPath(project, link), nil, &st); err != nil {
		return st, false
	}
	return st, true
}

// agentsCPU returns the CPU seconds each of the bench's agents used so
// far, and how long their threads waited for a CPU, summed over the
// agents: in the xagent topology, both agents relay every frame.
func (b *bench) agentsCPU() (cpu []float64, wait time.Duration) {
	for _, ag := range b.agents() {
		c, _ := procCPU(ag.cmd.Process.Pid)
		cpu = append(cpu, c)
		wait += runDelay(ag.cmd.Process.Pid)
	}
	return cpu, wait
}

func sum(xs []float64) (s float64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// Frame layout: an Ethernet header from one fixed unicast address to
// another (ethHeader), the sequence number, the send time (ns since the
// bench started), the run's number, then a filler byte that depends on the
// sequence number. The run's number tells a frame of an earlier run that
// was delivered late (a loaded machine may hold frames in the loopback's
// backlog for long after the relay's socket looked drained) from one of
// this run with the same sequence number.
// The addresses are fixed, as a lab host's are, so that a switch on the
// path learns them once and forwards every frame by unicast: frames whose
// addresses changed with the sequence number made a switch learn an
// address per frame and drop every frame sent to an address it had just
// learned on the port the frame came in by.
const (
	seqAt     = 14 // len(ethHeader)
	tsAt      = seqAt + 8
	runAt     = tsAt + 8
	headerLen = runAt + 4
)

// ethHeader goes from 02:00:00:00:00:01 to 02:00:00:00:00:02 (locally
// administered), EtherType 0x88b5 (local experimental).
var ethHeader = []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5}

func filler(seq uint64) byte { return byte(seq*131 + 7) }

// sent is what a generator sent: sends[i] is the first sequence number of
// send i and its send time; every frame of a send carries that time.
type sent struct {
	sent    int
	seconds float64
	sends   []sendRec
	pause   pause // the longest time the generator's loop did not come round
}

// pause is a time the generator's thread did not come round its loop,
// normally a few tens of µs: at at into the run, for length, of which the
// thread ran ran (in a system call: its sends) and waited waited for a CPU
// (runnable: another task had its CPU). The rest it slept, or its CPU was
// gone: the Go runtime did not wake it, or the hypervisor paused the
// virtual machine. Known to about 10 ms (the thread's counters are read
// every 10 ms).
type pause struct {
	at, length, ran, waited time.Duration
}

func (p pause) String() string {
	return fmt.Sprintf("%v at %v into the run: the generator's thread ran %v, waited %v for a CPU, slept or lost its CPU %v",
		p.length.Round(time.Millisecond), p.at.Round(time.Millisecond), p.ran.Round(time.Millisecond),
		p.waited.Round(time.Millisecond), max(0, p.length-p.ran-p.waited).Round(time.Millisecond))
}

// threadSched returns the calling thread's CPU time and the time it waited,
// runnable, for a CPU (/proc/thread-self/schedstat); zeros if unknown.
func threadSched() (ran, waited time.Duration) {
	data, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, 0
	}
	r, _ := strconv.ParseInt(f[0], 10, 64)
	w, _ := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(r), time.Duration(w)
}

type sendRec struct{ first, ts uint64 }

// ts returns the send time written in frame seq.
func (g *sent) ts(seq uint64) uint64 {
	i, _ := slices.BinarySearchFunc(g.sends, seq, func(r sendRec, seq uint64) int {
		if r.first > seq {
			return 1
		}
		return -1
	})
	return g.sends[i-1].ts
}

// window is how many frames a max-rate generator keeps in flight (sent, not
// yet received): enough to keep every stage busy for milliseconds, few
// enough to fit the relay's 4 MiB socket buffer (a datagram costs the
// buffer its size plus about 700 bytes, several kB for segments of a GSO
// send), so a run measures how fast the path delivers rather than how much
// an overloaded socket throws away.
func window(size int) int { return min(1024, (1<<20)/size) }

// generate sends frames to conn for s.duration, as fast as it can or at
// s.rate frames/s. With received set, "as fast as it can" keeps at most
// window frames in flight; frames that do not arrive within 50 ms are taken
// as lost, so a loss cannot stall the generator.
func generate(conn *net.UDPConn, s spec, start time.Time, received func() int) (*sent, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := newMmsgConn(conn, s.size)
	if err != nil {
		return nil, err
	}
	var patterns [256][]byte
	for i := range patterns {
		patterns[i] = bytes.Repeat([]byte{byte(i)}, s.size)
	}
	g := &sent{}
	t0 := time.Now()
	lost, lastGot, stalled := 0, -1, time.Time{}
	prev, statAt := t0, t0
	ran, waited := threadSched()
	for {
		at := time.Now()
		el := at.Sub(t0)
		if d := at.Sub(prev); d > g.pause.length || at.Sub(statAt) >= 10*time.Millisecond {
			r, w := threadSched()
			if d > g.pause.length {
				g.pause = pause{at: prev.Sub(t0), length: d, ran: r - ran, waited: w - waited}
			}
			ran, waited, statAt = r, w, at
		}
		prev = at
		if el >= s.duration {
			break
		}
		n := batch
		if received != nil {
			got := received()
			if g.sent-got-lost+batch > window(s.size) {
				switch {
				case got != lastGot:
					lastGot, stalled = got, time.Now()
				case time.Since(stalled) > 50*time.Millisecond:
					lost = g.sent - got // what has not come back by now will not
				}
				time.Sleep(20 * time.Microsecond)
				continue
			}
		}
		if s.rate > 0 {
			due := int(float64(s.rate)*el.Seconds()) - g.sent
			if due <= 0 {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			n = min(n, due)
		}
		now := uint64(time.Since(start))
		for i := range n {
			seq := uint64(g.sent + i)
			f := c.bufs[i]
			copy(f, ethHeader)
			copy(f[headerLen:], patterns[filler(seq)])
			binary.BigEndian.PutUint64(f[seqAt:], seq)
			binary.BigEndian.PutUint64(f[tsAt:], now)
			binary.BigEndian.PutUint32(f[runAt:], s.run)
		}
		g.sends = append(g.sends, sendRec{first: uint64(g.sent), ts: now})
		if err := c.sendFrames(n); err != nil {
			return nil, err
		}
		g.sent += n
	}
	g.seconds = time.Since(t0).Seconds()
	return g, nil
}

// sink counts the frames that reach it.
type sink struct {
	c       *mmsgConn
	conn    *net.UDPConn
	size    int
	start   time.Time
	seen    []uint64 // send time of each frame received, +1; 0: not received
	lat     []uint32 // µs
	count   int
	first   time.Time
	last    time.Time
	bad     int
	runID   uint32 // the run's number: frames of others are stale
	stale   int    // frames of an earlier run, delivered late
	stopped chan struct{}
	latest  atomic.Int64
	got     atomic.Int64 // count, for the generator's window
}

// received returns how many frames arrived so far; safe for concurrent use.
func (s *sink) received() int { return int(s.got.Load()) }

func newSink(conn *net.UDPConn, size int, run uint32, start time.Time) *sink {
	c, _ := newMmsgConn(conn, 65536)
	return &sink{c: c, conn: conn, size: size, runID: run, start: start, seen: make([]uint64, 1<<20),
		lat: make([]uint32, 0, 1<<20), stopped: make(chan struct{})}
}

func (s *sink) run() {
	defer close(s.stopped)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.conn.SetReadDeadline(time.Time{})
	for {
		n, err := s.c.recv()
		if err != nil {
			return // deadline: stop
		}
		now := time.Now()
		at := uint64(now.Sub(s.start))
		for i := range n {
			f := s.c.bufs[i][:s.c.msgLen(i)]
			if len(f) != s.size {
				s.bad++
				continue
			}
			if binary.BigEndian.Uint32(f[runAt:]) != s.runID {
				s.stale++
				continue
			}
			seq := binary.BigEndian.Uint64(f[seqAt:])
			sent := binary.BigEndian.Uint64(f[tsAt:])
			for seq >= uint64(len(s.seen)) && seq < 1<<32 {
				s.seen = append(s.seen, make([]uint64, len(s.seen))...)
			}
			if seq >= uint64(len(s.seen)) || s.seen[seq] != 0 || f[len(f)-1] != filler(seq) {
				s.bad++
				continue
			}
			s.seen[seq] = sent + 1
			if at > sent {
				s.lat = append(s.lat, uint32(min((at-sent)/1000, 1<<31)))
			} else {
				s.lat = append(s.lat, 0)
			}
			s.count++
		}
		if n > 0 {
			if s.first.IsZero() {
				s.first = now
			}
			s.last = now
			s.latest.Store(now.UnixNano())
			s.got.Store(int64(s.count))
		}
	}
}

// waitIdle returns once no frame arrived for d.
func (s *sink) waitIdle(d time.Duration) {
	start := time.Now()
	for {
		time.Sleep(d / 4)
		last := s.latest.Load()
		since := time.Since(time.Unix(0, last))
		if last == 0 {
			since = time.Since(start)
		}
		if since >= d {
			return
		}
	}
}

// stop ends run and drains what is left in the socket.
func (s *sink) stop() {
	s.conn.SetReadDeadline(time.Now())
	<-s.stopped
	buf := make([]byte, 65536)
	for {
		s.conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := s.conn.Read(buf); err != nil {
			break
		}
	}
	s.conn.SetReadDeadline(time.Time{})
}

func (s *sink) percentiles() (p50, p99 time.Duration) {
	if len(s.lat) == 0 {
		return 0, 0
	}
	l := slices.Clone(s.lat)
	slices.Sort(l)
	at := func(q float64) time.Duration { return time.Duration(l[int(q*float64(len(l)-1))]) * time.Microsecond }
	return at(0.50), at(0.99)
}

// captureCheck is what verifyCapture found.
type captureCheck struct {
	records     int    // in the file
	agentFrames uint64 // the agent says it wrote
	dropped     uint64 // the agent says it could not write
	missing     int    // received by the sink but not in the file
	changed     int    // in the file but not byte-identical to what was sent
	disorder    int    // out of order
	unemitted   int64  // records - frames the link emitted (0 when complete)
	stale       int    // records of frames of an earlier run, which the link forwarded late
	gaps        gaps   // where the missing frames are
	poolRefused int64  // blocks the agent's capture memory pool refused during the run, -1 if unknown
	err         error
}

// gaps are the runs of consecutive sequence numbers missing from a capture:
// how many, the first and the longest. A capture whose queue filled while
// its writer waited at the start (the file's mark, RingHooks.Created) misses
// one run of frames early on, after about QueueBytes of records; one whose
// disk fell behind misses frames wherever that happened.
type gaps struct {
	n              int
	first, longest gap
	cur            gap
}

// gap is the frames [lo, hi] sent from at to at+length into the run.
type gap struct {
	lo, hi     int
	at, length time.Duration
}

func (g gap) len() int { return g.hi - g.lo + 1 }

// add adds missing frame seq; frames come in order of seq.
func (gs *gaps) add(seq int, s *sent) {
	t0 := s.sends[0].ts
	at := time.Duration(s.ts(uint64(seq)) - t0)
	if gs.n > 0 && seq == gs.cur.hi+1 {
		gs.cur.hi, gs.cur.length = seq, at-gs.cur.at
	} else {
		gs.n++
		gs.cur = gap{lo: seq, hi: seq, at: at}
	}
	if gs.n == 1 {
		gs.first = gs.cur
	}
	if gs.n == 1 || gs.cur.len() > gs.longest.len() {
		gs.longest = gs.cur
	}
}

func (gs gaps) String() string {
	if gs.n == 0 {
		return ""
	}
	f := func(g gap) string {
		return fmt.Sprintf("%d frames from seq %d, sent %v-%v into the run", g.len(), g.lo,
			g.at.Round(time.Millisecond), (g.at + g.length).Round(time.Millisecond))
	}
	if gs.n == 1 {
		return "missing: " + f(gs.first)
	}
	return fmt.Sprintf("missing in %d gaps: first %s; longest %s", gs.n, f(gs.first), f(gs.longest))
}

func (c captureCheck) complete() bool {
	return c.err == nil && c.missing == 0 && c.changed == 0 && c.disorder == 0 && c.dropped == 0 &&
		uint64(c.records) == c.agentFrames && c.unemitted == 0
}

// verifyCapture reads a capture and checks it against what the generator
// sent, what the sink received and what the captured link emitted.
//
// A record of a frame of an earlier run (delivered late: the link forwarded
// it during this run) is counted apart, as stale: it is rightly in the
// file, and its sequence number is another run's.
func verifyCapture(path string, s spec, g *sent, sk *sink, emitted int64) captureCheck {
	size := s.size
	seen := sk.seen
	var c captureCheck
	f, err := os.Open(path)
	if err != nil {
		c.err = err
		return c
	}
	defer f.Close()
	r, err := pcapgo.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		c.err = err
		return c
	}
	inFile := make([]bool, g.sent)
	last := int64(-1)
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.err = fmt.Errorf("record %d: %w", c.records, err)
			break
		}
		c.records++
		if len(data) != size || ci.Length != size {
			c.changed++
			continue
		}
		if binary.BigEndian.Uint32(data[runAt:]) != s.run {
			c.stale++
			continue
		}
		seq := binary.BigEndian.Uint64(data[seqAt:])
		if seq >= uint64(g.sent) {
			c.changed++
			continue
		}
		if int64(seq) <= last {
			c.disorder++
		}
		last = int64(seq)
		inFile[seq] = true
		sent := binary.BigEndian.Uint64(data[tsAt:])
		if sent != g.ts(seq) || seq < uint64(len(seen)) && seen[seq] != 0 && seen[seq] != sent+1 || !all(data[headerLen:], filler(seq)) {
			c.changed++
		}
	}
	for seq, s := range seen {
		if s != 0 && (seq >= len(inFile) || !inFile[seq]) {
			c.missing++
			c.gaps.add(seq, g)
		}
	}
	if emitted >= 0 {
		c.unemitted = int64(c.records) - emitted
	}
	return c
}

func all(b []byte, v byte) bool {
	for _, x := range b {
		if x != v {
			return false
		}
	}
	return true
}

func (r result) captureSummary() string {
	if r.capture == nil {
		return ""
	}
	c := r.capture
	stale := ""
	if c.stale > 0 {
		stale = fmt.Sprintf(", %d of frames of an earlier run delivered late", c.stale)
	}
	if c.complete() {
		return fmt.Sprintf("capture complete (%d records%s)", c.records, stale)
	}
	gaps := ""
	if c.gaps.n > 0 {
		gaps = "; " + c.gaps.String()
	}
	if c.dropped > 0 && c.poolRefused >= 0 {
		// The agent drops a frame when its capture's queue is full (the
		// disk or the writer fell behind) or the agent-wide pool is
		// exhausted: the pool's refusals tell which.
		gaps += fmt.Sprintf("; the agent's capture memory pool refused %d blocks", c.poolRefused)
	}
	return fmt.Sprintf("CAPTURE INCOMPLETE: %d records%s, agent wrote %d dropped %d, %d missing, %d changed, %d out of order, %+d vs emitted by the link, err %v%s",
		c.records, stale, c.agentFrames, c.dropped, c.missing, c.changed, c.disorder, c.unemitted, c.err, gaps)
}

// procCPU returns a process's user+system CPU time in seconds.
func procCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// runDelay returns how long the threads of a process have waited, runnable,
// for a CPU (the second field of /proc/<pid>/task/<tid>/schedstat): on a
// shared machine, the time others took from the relay.
func runDelay(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			total += time.Duration(n)
		}
	}
	return total
}

// times are a CPU's counters from /proc/stat, in ticks.
type times struct{ total, steal float64 }

// cpuTimes reads the counters of the CPUs in list ("1", "0-1"; empty: all).
func cpuTimes(list string) times {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return times{}
	}
	want := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		var lo, hi int
		if n, _ := fmt.Sscanf(part, "%d-%d", &lo, &hi); n == 2 {
			for c := lo; c <= hi; c++ {
				want[fmt.Sprint("cpu", c)] = true
			}
		} else if n == 1 {
			want["cpu"+strings.TrimSpace(part)] = true
		}
	}
	if len(want) == 0 {
		want["cpu"] = true
	}
	var t times
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !want[f[0]] {
			continue
		}
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			if i < 8 { // user nice system idle iowait irq softirq steal (not guest: in user)
				t.total += x
			}
			if i == 7 {
				t.steal += x
			}
		}
	}
	return t
}

// stealShare returns the share of CPU time stolen since before.
func (t times) stealShare(before times) float64 {
	if d := t.total - before.total; d > 0 {
		return (t.steal - before.steal) / d
	}
	return 0
}

// udpTable is a field of the kernel's UDP sockets (/proc/net/udp and
// udp6) summed per local port, from one read of the tables: a run reads
// them once before and once after, not once per figure.
type udpTable map[int]int64

// sum returns the field summed over the sockets bound to ports.
func (t udpTable) sum(ports ...int) int64 {
	var total int64
	for _, p := range ports {
		total += t[p]
	}
	return total
}

// udpQueued returns the bytes waiting in the receive queues of the UDP
// sockets, per port (rx_queue).
func udpQueued() udpTable {
	return readUDPTable(func(f []string) int64 {
		_, rx, _ := strings.Cut(f[4], ":")
		n, _ := strconv.ParseInt(rx, 16, 64)
		return n
	})
}

// udpDrops returns the kernel's drop counters of the UDP sockets, per
// port (the last column).
func udpDrops() udpTable {
	return readUDPTable(func(f []string) int64 {
		n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		return n
	})
}

// readUDPTable reads /proc/net/udp and udp6 and sums field of their lines
// per local port.
func readUDPTable(field func([]string) int64) udpTable {
	t := udpTable{}
	for _, name := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 13 {
				continue
			}
			i := strings.LastIndexByte(f[1], ':') // local address: ADDR:PORT, hex
			if i < 0 {
				continue
			}
			port, err := strconv.ParseUint(f[1][i+1:], 16, 16)
			if err != nil {
				continue
			}
			t[int(port)] += field(f)
		}
	}
	return t
}
