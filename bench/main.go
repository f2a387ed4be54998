// The bench command measures an agent's relay the way a lab loads it: it
// starts a real agent process on loopback, creates a project, two cloud
// nodes (GNS3's UDP "ports_mapping" ports) and a link between them through
// the agent's HTTP API, then pushes sequence-numbered UDP frames from a load
// generator into one cloud and counts them at a sink behind the other.
//
// Every repetition first measures the machine's loopback ceiling (generator
// → sink, no relay), so each relay figure is reported as a ratio measured in
// the same repetition, on the same machine, minutes apart at most. For 64-
// and 1500-byte frames it measures the relay at the maximum rate with
// capture off and on, then 1500-byte frames offered at a steady rate (100k
// frames/s by default) with capture off and on. At "max rate" the generator
// goes as fast as the path delivers: it keeps a window of frames in flight
// (sent, not yet received) rather than flooding, so a run measures the
// relay's capacity, not the waste of an overloaded socket (-overdrive floods
// instead).
//
// It reports delivered frames/s, loss (and the kernel's drops at the relay's
// socket), p50/p99 one-way latency and what the relay adds to the ceiling's,
// the relay's CPU seconds per million frames (from /proc/<agent pid>/stat),
// and the hypervisor's steal time during each run, since a virtual machine
// whose CPU is taken by its neighbours measures them, not the relay. With
// capture on it checks that the capture is complete: every frame the relay
// forwarded is in the file, byte-identical to what the generator sent and
// the sink received, in order, and the agent counted no capture drop; an
// incomplete one says where its missing frames are. A steady run whose
// generator sent under 99% of the frames due (its thread stopped for a
// while and the run ended on time) is said to be CUT SHORT, with the
// generator's longest pause, and fails the steady goal: its figures cover
// a shorter run than the one asked for.
//
// Usage (scripts/bench builds and runs it, pinned):
//
//	bench [-agent bin/agent] [-agent-cpu 1] [-reps 3] [-max 3s] [-rate 100000] [-steady 5s]
//	      [-socket-buffer BYTES] [-no-gro] [-overdrive] [-only list] [-tunnels] [-keep]
//	bench -captures 1000 [-agent bin/agent-main,bin/agent] [-captures-rate 100] [-captures-idle 10s]
//	bench -api [-controller bin/controller] [-api-cycles 50] [-api-get 3s] [-api-clients 16]
//	      [-api-lab 200] [-api-strace=true]
//	bench -lab 200 [-lab-agents 4] [-lab-profile=true] [-controller bin/controller] [-agent bin/agent]
//
// -captures N measures N simultaneous captures on one agent (captures.go):
// RSS and CPU per idle capture, and capture loss under a steady load.
//
// -api measures the controller's control plane instead (api.go): the real
// controller with its embedded agent, driven over HTTP.
//
// -lab N builds a lab of N nodes over -lab-agents agent processes and
// times each phase of its life (lab.go).
//
// The generator delivers one datagram per frame, but sends them in UDP GSO
// runs so that it costs as little as possible and the relay, not the
// generator, is what is measured (see udp.go); the sink reads with
// recvmmsg. The relay takes those runs in one piece (UDP_GRO), as it takes
// another agent's across a tunnel; -no-gro makes it read them datagram by
// datagram, as it reads an emulator's. Both run in this process, each on its own OS thread; the
// agent is a separate process, pinned to -agent-cpu when it is set
// (scripts/bench pins this process to another CPU with taskset). All traffic
// stays on 127.0.0.1. -tunnels links two tunnel endpoints instead of two
// clouds, for agents that predate cloud nodes. -topology xagent starts a
// second agent, both pinned to -agent-cpu, and links a cloud on each across
// them as the controller links nodes on two computes (crossLink).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	agent     string
	agentCPU  string
	reps      int
	duration  time.Duration
	rate      int
	steady    time.Duration
	only      map[string]bool
	tunnels   bool
	keep      bool
	buffer    int
	noGRO     bool
	buffered  bool
	overdrive bool
	topology  string // one of topologies
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var cfg config
	var only, topo string
	fs.StringVar(&cfg.agent, "agent", "bin/agent", "agent binary to start")
	fs.StringVar(&cfg.agentCPU, "agent-cpu", "1", "CPU list to pin the agent to with taskset; empty: no pinning")
	fs.IntVar(&cfg.reps, "reps", 3, "repetitions of each run; the median is reported")
	fs.DurationVar(&cfg.duration, "max", 3*time.Second, "length of the max-rate runs")
	fs.IntVar(&cfg.rate, "rate", 100_000, "frames/s of the steady runs")
	fs.DurationVar(&cfg.steady, "steady", 5*time.Second, "length of the steady runs")
	fs.StringVar(&only, "only", "", "comma-separated run names to do (default all), e.g. ceiling-64,on-64")
	fs.BoolVar(&cfg.tunnels, "tunnels", false, "link two tunnel endpoints instead of two cloud nodes (agents before cloud nodes)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the agent's data directory and capture files")
	fs.IntVar(&cfg.buffer, "socket-buffer", 0, "pass --socket-buffer BYTES to the agent (0: the agent's default)")
	fs.BoolVar(&cfg.noGRO, "no-gro", false, "start the agent with --udp-gro=false: the relay then reads the generator's GSO runs datagram by datagram, as it reads an emulator's")
	fs.BoolVar(&cfg.buffered, "buffered-capture", false, "start the agent with --capture-direct-io=false: captures are written through the page cache")
	fs.BoolVar(&cfg.overdrive, "overdrive", false, "max-rate runs send open loop, as fast as the generator can, instead of keeping a window of frames in flight")
	fs.StringVar(&topo, "topology", "cloud", "comma-separated topologies between generator and sink, each measured in turn with its own agent: cloud (cloud-cloud), switch (cloud-switch-cloud), hub, chain4 (4 switches), docker (cloud-container-cloud: a forwarding container, needs root and the Docker Engine), xagent (cloud on one agent, a link across to a second agent through a UDP tunnel, cloud there; both agents pinned to -agent-cpu); with more than one, a summary compares each to the first")
	var cc capConfig
	fs.IntVar(&cc.n, "captures", 0, "measure N simultaneous captures instead of the relay (captures.go): RSS and CPU per idle capture, then capture loss with -captures-rate frames/s on each; -agent may list binaries to compare (bin/agent-main,bin/agent)")
	fs.IntVar(&cc.rate, "captures-rate", 100, "with -captures: frames/s sent to each link in the loaded run")
	fs.IntVar(&cc.size, "captures-size", 128, "with -captures: frame size of the loaded run")
	fs.DurationVar(&cc.idle, "captures-idle", 10*time.Second, "with -captures: length of each idle measurement")
	fs.DurationVar(&cc.loaded, "captures-loaded", 10*time.Second, "with -captures: length of the loaded run")
	var api bool
	acfg := apiConfig{}
	fs.BoolVar(&api, "api", false, "measure the controller's API instead of the relay: start_capture, node create+delete, GET link throughput (see api.go)")
	fs.StringVar(&acfg.controller, "controller", "bin/controller", "with -api: controller binary to start")
	fs.IntVar(&acfg.cycles, "api-cycles", 50, "with -api: start/stop capture cycles and node create+delete pairs")
	fs.DurationVar(&acfg.get, "api-get", 3*time.Second, "with -api: length of the GET link throughput run")
	fs.IntVar(&acfg.clients, "api-clients", 16, "with -api: concurrent keep-alive clients of the GET link run")
	fs.IntVar(&acfg.lab, "api-lab", 200, "with -api: nodes of the lab-scale run (VPCS and switches in a loop-free tree: N-1 links); 0: none")
	fs.BoolVar(&acfg.strace, "api-strace", true, "with -api: run the capture cycles again under strace to split start_capture's time")
	lcfg := labConfig{}
	fs.IntVar(&lcfg.n, "lab", 0, "build a lab of N nodes over -lab-agents agents instead (lab.go): VPCS and switches, each phase timed (create, close, open, start all, capture every link, stop all, close, reopen, delete) with RSS and the notification rate; needs vpcs")
	fs.IntVar(&lcfg.agents, "lab-agents", 4, "with -lab: agent processes, on 127.0.0.2, 127.0.0.3, ...")
	fs.IntVar(&lcfg.docker, "lab-docker", -1, "with -lab: docker nodes ("+labImage+", one per agent at most) added to the N; -1: one per agent when run as root with a Docker Engine and the image (scripts/node-images)")
	fs.IntVar(&lcfg.qemu, "lab-qemu", -1, "with -lab: qemu nodes (scripts/tiny-guest's kernel and initrd, one per agent at most) added to the N; -1: one per agent where qemu-system-x86_64 and the tiny guest are")
	fs.BoolVar(&lcfg.profile, "lab-profile", true, "with -lab: open the project once more under a CPU profile of the controller (--pprof-listen) and print its top functions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if lcfg.n > 0 {
		lcfg.controller, lcfg.agent, lcfg.keep = acfg.controller, cfg.agent, cfg.keep
		return runLab(lcfg)
	}
	if api {
		acfg.keep = cfg.keep
		return runAPI(acfg)
	}
	if cc.n > 0 {
		runtime.GOMAXPROCS(max(4, runtime.NumCPU()))
		return runCaptures(cfg, cc)
	}
	var topos []string
	for _, t := range strings.Split(topo, ",") {
		t = strings.TrimSpace(t)
		if _, ok := topologies[t]; !ok {
			return fmt.Errorf("-topology: unknown topology %q", t)
		}
		topos = append(topos, t)
	}
	if only != "" {
		cfg.only = map[string]bool{}
		for _, n := range strings.Split(only, ",") {
			cfg.only[strings.TrimSpace(n)] = true
		}
	}
	// The generator and the sink each hold an OS thread; let them run even
	// when this process is pinned to a single CPU.
	runtime.GOMAXPROCS(max(4, runtime.NumCPU()))

	var all []topologyResult
	for _, t := range topos {
		cfg.topology = t
		reps, err := measure(cfg)
		if err != nil {
			return err
		}
		all = append(all, topologyResult{t, reps})
	}
	if len(all) > 1 {
		compare(os.Stdout, all)
	}
	return nil
}

// measure starts an agent with cfg's topology, runs every run and reports.
func measure(cfg config) ([][]result, error) {
	b, err := newBench(cfg)
	if err != nil {
		return nil, err
	}
	defer b.close()
	results, err := b.all()
	report(os.Stdout, b, results)
	return results, err
}
