package main

// -captures N measures what captures cost an agent when there are many of
// them: N links on one real agent, each a pair of UDP tunnel ends (the
// generator → the link → one sink), first idle without capture, then with
// a capture on every link, idle, then with every link carrying a steady
// rate of small frames. It prints the agent's RSS and CPU (from /proc) per
// capture, and the capture loss of the loaded run: frames the relay
// forwarded that are not in their capture file (counted in the files
// themselves), and the drops the agent counted.
//
// -agent may list several binaries (bin/agent-main,bin/agent): each is
// measured in turn, in the same run, and a last table puts them side by
// side.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/proto"
	"golang.org/x/net/ipv4"
)

// capConfig is what -captures and its companion flags set.
type capConfig struct {
	n      int           // links, each captured
	rate   int           // frames/s per link in the loaded run
	size   int           // frame size of the loaded run
	idle   time.Duration // length of each idle measurement
	loaded time.Duration // length of the loaded run
}

// capResult is what one agent measured.
type capResult struct {
	agent                  string
	rssLinks, rssIdle      int64   // agent RSS with the links and no capture, with every capture idle (bytes)
	hugeLinks, hugeIdle    int64   // of which anonymous huge pages (smaps_rollup)
	rssLoadedMax           int64   // highest RSS seen during the loaded run
	cpuLinks, cpuIdle      float64 // agent CPU seconds per second, idle without and with captures
	cpuLoaded              float64 // and during the loaded run
	startSecs              float64 // time to start the N captures
	sent, forwarded        uint64
	inFiles, dropped       uint64 // records in the capture files; drops the agent counted
	received               uint64 // by the sink
	steal, stealLoaded     float64
	loadBefore, loadLoaded string
}

func runCaptures(cfg config, cc capConfig) error {
	var all []capResult
	for _, bin := range strings.Split(cfg.agent, ",") {
		c := cfg
		c.agent = strings.TrimSpace(bin)
		r, err := measureCaptures(c, cc)
		if err != nil {
			return fmt.Errorf("%s: %w", c.agent, err)
		}
		printCaptures(os.Stdout, cc, []capResult{r})
		all = append(all, r)
	}
	if len(all) > 1 {
		fmt.Println()
		fmt.Println("side by side:")
		printCaptures(os.Stdout, cc, all)
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func printCaptures(w io.Writer, cc capConfig, rs []capResult) {
	n := float64(cc.n)
	fmt.Fprintf(w, "%d captures on one agent (%d CPUs online, %s)\n", cc.n, nproc(), affinity())
	fmt.Fprintf(w, "%-28s", "")
	for _, r := range rs {
		fmt.Fprintf(w, " %22s", r.agent)
	}
	fmt.Fprintln(w)
	row := func(name string, f func(r capResult) string) {
		fmt.Fprintf(w, "%-28s", name)
		for _, r := range rs {
			fmt.Fprintf(w, " %22s", f(r))
		}
		fmt.Fprintln(w)
	}
	row("start all captures", func(r capResult) string { return fmt.Sprintf("%.2f s", r.startSecs) })
	row("RSS, links, no capture", func(r capResult) string { return fmt.Sprintf("%.1f MiB", mib(r.rssLinks)) })
	row("RSS, every capture idle", func(r capResult) string { return fmt.Sprintf("%.1f MiB", mib(r.rssIdle)) })
	row("RSS added per idle capture", func(r capResult) string {
		return fmt.Sprintf("%.1f KiB", float64(r.rssIdle-r.rssLinks)/n/1024)
	})
	row("  of which huge pages", func(r capResult) string {
		return fmt.Sprintf("%.1f -> %.1f MiB", mib(r.hugeLinks), mib(r.hugeIdle))
	})
	row("CPU idle, no capture", func(r capResult) string { return fmt.Sprintf("%.2f%% core", 100*r.cpuLinks) })
	row("CPU idle, every capture", func(r capResult) string { return fmt.Sprintf("%.2f%% core", 100*r.cpuIdle) })
	row("CPU added per idle capture", func(r capResult) string {
		return fmt.Sprintf("%.4f%% core", 100*(r.cpuIdle-r.cpuLinks)/n)
	})
	row("steal, idle runs", func(r capResult) string { return fmt.Sprintf("%.1f%%", 100*r.steal) })
	row("load before", func(r capResult) string { return r.loadBefore })
	row(fmt.Sprintf("loaded: %d frames/s each", cc.rate), func(r capResult) string {
		return fmt.Sprintf("%d sent", r.sent)
	})
	row("  forwarded by the relay", func(r capResult) string { return fmt.Sprint(r.forwarded) })
	row("  records in the files", func(r capResult) string { return fmt.Sprint(r.inFiles) })
	row("  capture loss", func(r capResult) string {
		loss := int64(r.forwarded) - int64(r.inFiles)
		return fmt.Sprintf("%d (%.3f%%)", loss, 100*float64(loss)/float64(max(r.forwarded, 1)))
	})
	row("  drops counted by agent", func(r capResult) string { return fmt.Sprint(r.dropped) })
	row("  relay/sink loss", func(r capResult) string {
		return fmt.Sprintf("%.3f%%", 100*(1-float64(r.received)/float64(max(r.sent, 1))))
	})
	row("  RSS max", func(r capResult) string { return fmt.Sprintf("%.1f MiB", mib(r.rssLoadedMax)) })
	row("  CPU", func(r capResult) string { return fmt.Sprintf("%.1f%% core", 100*r.cpuLoaded) })
	row("  steal", func(r capResult) string { return fmt.Sprintf("%.1f%%", 100*r.stealLoaded) })
	row("  load", func(r capResult) string { return r.loadLoaded })
}

// capLink is one of the bench's links.
type capLink struct {
	id       string
	in, out  int // the A end's local port (the generator sends there), the B end's
	capPath  string
	captured proto.CaptureState
}

func measureCaptures(cfg config, cc capConfig) (capResult, error) {
	r := capResult{agent: cfg.agent}
	b := &bench{cfg: cfg, start: time.Now(), project: projectID}
	var err error
	if b.dir, err = os.MkdirTemp("", "labtap-bench-"); err != nil {
		return r, err
	}
	defer b.close()
	if err := b.startAgent(); err != nil {
		return r, err
	}
	pid := b.cmd.Process.Pid
	if b.sink, err = listen(0); err != nil {
		return r, err
	}
	gen, err := listen(0)
	if err != nil {
		return r, err
	}
	defer gen.Close()
	genPort, sinkPort := gen.LocalAddr().(*net.UDPAddr).Port, b.sink.LocalAddr().(*net.UDPAddr).Port
	if err := b.call("PUT", proto.ProjectPath(b.project), proto.ProjectSpec{Name: "bench-captures"}, nil); err != nil {
		return r, err
	}

	// Ports: held open until all are chosen, so that none is chosen twice.
	links := make([]*capLink, cc.n)
	var held []*net.UDPConn
	for i := range links {
		l := &capLink{id: fmt.Sprintf("c0000000-0000-4000-8000-%012x", i)}
		for _, p := range []*int{&l.in, &l.out} {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: loopback})
			if err != nil {
				return r, err
			}
			held = append(held, c)
			*p = c.LocalAddr().(*net.UDPAddr).Port
		}
		links[i] = l
	}
	for _, c := range held {
		c.Close()
	}
	fmt.Fprintf(os.Stderr, "%s: creating %d links\n", cfg.agent, cc.n)
	if err := parallel(links, func(l *capLink) error {
		return b.call("PUT", proto.LinkPath(b.project, l.id), proto.LinkSpec{
			A: proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: l.in, RemoteHost: "127.0.0.1", RemotePort: genPort}},
			B: proto.Endpoint{Tunnel: &proto.Tunnel{LocalPort: l.out, RemoteHost: "127.0.0.1", RemotePort: sinkPort}},
		}, nil)
	}); err != nil {
		return r, err
	}

	idle := func() (cpu float64, rss int64, steal float64) {
		time.Sleep(2 * time.Second) // let the agent settle: GC, goroutines parked
		s0, c0 := cpuTimes(""), mustCPU(pid)
		time.Sleep(cc.idle)
		c1 := mustCPU(pid)
		return (c1 - c0) / cc.idle.Seconds(), vmRSS(pid), cpuTimes("").stealShare(s0)
	}
	r.loadBefore = loadavg()
	fmt.Fprintf(os.Stderr, "%s: idle without capture\n", cfg.agent)
	var st0, st1 float64
	r.cpuLinks, r.rssLinks, st0 = idle()
	r.hugeLinks = anonHuge(pid)

	fmt.Fprintf(os.Stderr, "%s: starting %d captures\n", cfg.agent, cc.n)
	t0 := time.Now()
	if err := parallel(links, func(l *capLink) error {
		var st proto.CaptureState
		err := b.call("PUT", proto.CapturePath(b.project, l.id), proto.CaptureSpec{
			FileName: "cap-" + l.id[len(l.id)-6:] + ".pcap", DataLinkType: "DLT_EN10MB",
		}, &st)
		l.capPath = st.FilePath
		return err
	}); err != nil {
		return r, err
	}
	r.startSecs = time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "%s: idle with %d captures\n", cfg.agent, cc.n)
	r.cpuIdle, r.rssIdle, st1 = idle()
	r.hugeIdle = anonHuge(pid)
	r.steal = (st0 + st1) / 2

	fmt.Fprintf(os.Stderr, "%s: %d frames/s on each link for %v\n", cfg.agent, cc.rate, cc.loaded)
	var got atomic.Uint64
	sinkDone := make(chan struct{})
	go func() {
		defer close(sinkDone)
		buf := make([]byte, 65536)
		for {
			if _, _, err := b.sink.ReadFromUDP(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	var maxRSS atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if v := vmRSS(pid); v > maxRSS.Load() {
					maxRSS.Store(v)
				}
			}
		}
	}()
	s0, c0 := cpuTimes(""), mustCPU(pid)
	r.sent, err = paced(gen, links, cc)
	c1 := mustCPU(pid)
	r.cpuLoaded = (c1 - c0) / cc.loaded.Seconds()
	r.stealLoaded = cpuTimes("").stealShare(s0)
	r.loadLoaded = loadavg()
	cancel()
	<-sampled
	r.rssLoadedMax = maxRSS.Load()
	if err != nil {
		return r, err
	}
	// Let the relay and the sink finish what is on its way.
	var prev uint64
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		if g := got.Load(); g == prev && g > 0 {
			break
		} else {
			prev = g
		}
	}
	r.received = got.Load()
	b.sink.Close()
	<-sinkDone
	b.sink = nil

	fmt.Fprintf(os.Stderr, "%s: stopping the captures and counting their records\n", cfg.agent)
	var mu sync.Mutex
	if err := parallel(links, func(l *capLink) error {
		var ls proto.LinkState
		if err := b.call("GET", proto.LinkPath(b.project, l.id), nil, &ls); err != nil {
			return err
		}
		var st proto.CaptureState
		if err := b.call("DELETE", proto.CapturePath(b.project, l.id), nil, &st); err != nil {
			return err
		}
		n, err := countRecords(l.capPath)
		if err != nil {
			return err
		}
		mu.Lock()
		r.forwarded += ls.Directions[0].Forwarded + ls.Directions[1].Forwarded
		r.inFiles += n
		r.dropped += st.Dropped
		mu.Unlock()
		return nil
	}); err != nil {
		return r, err
	}
	return r, nil
}

// anonHuge returns the bytes of a process's memory in transparent huge
// pages.
func anonHuge(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func mustCPU(pid int) float64 {
	c, _ := procCPU(pid)
	return c
}

// parallel calls f for every link from 8 goroutines; it returns the first
// error.
func parallel(links []*capLink, f func(*capLink) error) error {
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(links) {
					errs <- nil
					return
				}
				if err := f(links[i]); err != nil {
					next.Store(int64(len(links)))
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range 8 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// paced sends cc.rate frames/s to every link for cc.loaded: every 1/rate
// seconds one frame to each link, with sendmmsg. It returns frames sent.
func paced(conn *net.UDPConn, links []*capLink, cc capConfig) (uint64, error) {
	pc := ipv4.NewPacketConn(conn)
	frame := make([]byte, cc.size)
	for i := range frame {
		frame[i] = byte(i)
	}
	msgs := make([]ipv4.Message, len(links))
	for i, l := range links {
		msgs[i] = ipv4.Message{Buffers: [][]byte{frame}, Addr: &net.UDPAddr{IP: loopback, Port: l.in}}
	}
	period := time.Second / time.Duration(cc.rate)
	start := time.Now()
	var sent uint64
	for tick := 0; ; tick++ {
		at := start.Add(time.Duration(tick) * period)
		if at.Sub(start) >= cc.loaded {
			return sent, nil
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		for rest := msgs; len(rest) > 0; {
			n, err := pc.WriteBatch(rest, 0)
			if err != nil {
				return sent, err
			}
			sent += uint64(n)
			rest = rest[n:]
		}
	}
}

// countRecords counts the records of a pcap file, which must end with a
// whole one.
func countRecords(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var n uint64
	for {
		_, _, err := rd.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: record %d: %w", path, n+1, err)
		}
		n++
	}
}
