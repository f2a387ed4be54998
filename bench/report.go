package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// report prints, per run, the repetition with the median rate, ratios to
// the ceiling measured in the same repetition (median over repetitions,
// with their range), and the verdict on the three goals.
func report(w io.Writer, b *bench, reps [][]result) {
	if len(reps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nlabtap relay bench, topology %s: %d repetition(s), medians; ratios are per repetition, then the median [min-max]\n", b.cfg.topology, len(reps))
	agents := "agent"
	if b.peer != nil {
		// Both on the same CPU: the two agents share the one CPU the
		// single agent of the other topologies has, so frames/s compare
		// like for like, and relay CPU is the two agents' sum.
		agents = "both agents (A and B)"
	}
	fmt.Fprintf(w, "machine: %d CPUs, bench pinned to %s, %s pinned to %s\n", onlineCPUs(), affinity(), agents, orNone(b.cfg.agentCPU))
	if b.ends[0].Kind != "" {
		e := b.ends[0]
		fmt.Fprintf(w, "relay sockets: receive buffer %d, send buffer %d (as getsockopt reports: twice the usable size), GSO %v, GRO %v\n",
			e.RecvBuffer, e.SendBuffer, e.GSO, e.GRO)
	}
	byName := map[string][]result{}
	var names []string
	for _, row := range reps {
		for _, r := range row {
			if _, ok := byName[r.name]; !ok {
				names = append(names, r.name)
			}
			byName[r.name] = append(byName[r.name], r)
		}
	}
	// ratio of run a to run b, per repetition (quiet: only repetitions in
	// which neither run lost CPU time to the hypervisor).
	ratioOf := func(a, b string, quiet bool) []float64 {
		var out []float64
		for _, row := range reps {
			var x, y *result
			for i := range row {
				switch row[i].name {
				case a:
					x = &row[i]
				case b:
					y = &row[i]
				}
			}
			if x != nil && y != nil && y.rate > 0 && (!quiet || x.quiet() && y.quiet()) {
				out = append(out, x.rate/y.rate)
			}
		}
		return out
	}
	ratio := func(a, b string) []float64 { return ratioOf(a, b, false) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tframes/s\tx ceiling\tloss\trelay sock drops\tp50\tp99\tp50 added\trelay CPU s/Mframe\tsteal\tcapture\t")
	for _, n := range names {
		r := median(byName[n])
		ceil := "ceiling-64"
		if r.size == 1500 {
			ceil = "ceiling-1500"
		}
		if r.rate > 0 && r.spec.rate > 0 {
			ceil = "ceiling-1500-steady"
		}
		x := "1"
		if r.relay {
			x = span(ratio(n, ceil))
		}
		added := "-"
		if c := byName[ceil]; r.relay && len(c) > 0 {
			added = (r.p50 - median(c).p50).Round(time.Microsecond).String()
		}
		cpu := "-"
		if r.relay {
			frames := float64(r.forwarded)
			if frames <= 0 {
				frames = float64(r.received)
			}
			if frames > 0 {
				cpu = fmt.Sprintf("%.2f", r.relayCPU/(frames/1e6))
			}
		}
		capture := "-"
		if r.capture != nil {
			capture = "complete"
			for _, x := range byName[n] {
				if !x.capture.complete() {
					capture = "INCOMPLETE"
				}
			}
		}
		for _, x := range byName[n] {
			if x.cutShort() {
				capture += " (a run CUT SHORT)"
				break
			}
		}
		drops := "-"
		if r.relay {
			drops = fmt.Sprint(r.relayDrops)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.2f%%\t%s\t%v\t%v\t%s\t%s\t%.0f%%\t%s\t\n", n, r.rate, x, 100*r.loss(), drops,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), added, cpu, 100*r.steal, capture)
	}
	tw.Flush()
	if b.peer != nil {
		// Where a frame's relay CPU goes across the two agents.
		fmt.Fprint(w, "agent A's share of the relay CPU (A: cloud 1, its half of the link and the capture; B: the tunnel's other end and cloud 2):")
		for _, n := range names {
			if r := median(byName[n]); r.relay && r.relayCPU > 0 {
				fmt.Fprintf(w, " %s %.0f%%", n, 100*(1-r.peerCPU/r.relayCPU))
			}
		}
		fmt.Fprintln(w)
		fmt.Fprint(w, "relay sock drops at B's tunnel end (the rest at A's cloud 1):")
		for _, n := range names {
			if r := median(byName[n]); r.relay {
				fmt.Fprintf(w, " %s %d", n, r.peerDrops)
			}
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "\ngoals, over every repetition:")
	goals(w, byName, func(a, b string) []float64 { return ratioOf(a, b, false) }, func(result) bool { return true })
	noisy := 0
	for _, rs := range byName {
		for _, r := range rs {
			if !r.quiet() {
				noisy++
			}
		}
	}
	if noisy > 0 {
		fmt.Fprintf(w, "\n%d runs lost more than %.0f%% of the machine's CPU time to the hypervisor (steal): a virtual machine then\n", noisy, 100*quietSteal)
		fmt.Fprintln(w, "measures its neighbours, not the relay. Goals over the quiet runs only (pairs of runs both quiet):")
		if goals(w, byName, func(a, b string) []float64 { return ratioOf(a, b, true) }, result.quiet) == 0 {
			fmt.Fprintln(w, "  (no quiet run: measure again when the machine is quieter)")
		}
	}
	fmt.Fprintln(w, "\nnotes: frames/s is what the sink received per second; loss counts every frame sent and not received (at max rate the")
	fmt.Fprintln(w, "generator keeps a window of frames in flight, and sends more when frames stay out 50 ms: loss there means a stall,")
	fmt.Fprintln(w, "of the relay or of its CPU); relay sock drops are the kernel's drop counter of the relay's receiving socket; p50/p99")
	fmt.Fprintln(w, "are one-way generator-to-sink latencies (at max rate, mostly the window's queueing); relay CPU is the agent's (for a link across agents, both agents'); steal is")
	fmt.Fprintln(w, "the share of the machine's CPU time the hypervisor gave to someone else during the run (a virtual machine's noise).")
}

// quietSteal is the steal share above which a run is called noisy.
const quietSteal = 0.05

func (r result) quiet() bool { return r.steal < quietSteal }

// goals prints the verdict on the three goals, from the runs keep accepts
// and the ratios ratio returns, and returns how many verdicts it printed.
func goals(w io.Writer, byName map[string][]result, ratio func(a, b string) []float64, keep func(result) bool) (n int) {
	goal := func(ok bool, format string, args ...any) {
		n++
		verdict := "MET    "
		if !ok {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "  %s %s\n", verdict, fmt.Sprintf(format, args...))
	}
	runs := func(name string) []result {
		var out []result
		for _, r := range byName[name] {
			if keep(r) {
				out = append(out, r)
			}
		}
		return out
	}
	if rs := ratio("on-64", "ceiling-64"); len(rs) > 0 {
		complete := allComplete(byName["on-64"])
		goal(med(rs) >= 0.5 && complete, "capture on, 64 B, max rate: %s x the loopback ceiling (goal >= 0.5, uBridge 0.32), every capture complete: %v", span(rs), complete)
	}
	if rs := runs("on-1500-steady"); len(rs) > 0 {
		// Forwarding loss is what the relay did not forward: sent minus
		// forwarded (which includes what its socket dropped). Loss after
		// the relay, at the sink, is the harness's and shown apart.
		var sent, lost int
		var notForwarded int64
		known := true
		for _, r := range rs {
			sent += r.sent
			lost += r.sent - r.received
			if r.forwarded >= 0 {
				notForwarded += int64(r.sent) - r.forwarded
			} else {
				known = false
				notForwarded += r.relayDrops
			}
		}
		how := "not forwarded by the relay"
		if !known {
			how = "dropped at the relay's socket (the agent reports no link counters)"
		}
		complete := allComplete(rs)
		// A run cut short (the generator paused and the run ended on time)
		// carried a fraction of its frames: its zero loss and complete
		// capture say nothing of the rate held for the run's length.
		short := ""
		cut := 0
		for _, r := range rs {
			if r.cutShort() {
				cut++
				short += fmt.Sprintf(" %d of %d", r.sent, r.due)
			}
		}
		if cut > 0 {
			short = fmt.Sprintf("; %d runs CUT SHORT, frames sent of those due:%s", cut, short)
		}
		goal(notForwarded == 0 && complete && cut == 0, "capture on, 1500 B at a steady %d frames/s, %d runs: %d of %d frames %s (goal 0, uBridge 9%%); end to end %d lost (%.3f%%); captures complete: %v%s",
			rs[0].spec.rate, len(rs), notForwarded, sent, how, lost, 100*float64(lost)/float64(max(sent, 1)), complete, short)
	}
	for _, size := range []string{"64", "1500"} {
		rs := ratio("on-"+size, "off-"+size)
		if len(rs) == 0 {
			continue
		}
		cost := make([]float64, len(rs))
		for i, x := range rs {
			cost[i] = 1 - x
		}
		// The relay is pinned to one CPU, where throughput is the inverse of
		// the CPU time a frame costs: the CPU-time view of the same cost,
		// which the hypervisor's noise disturbs much less.
		cpu := "-"
		on, off := runs("on-"+size), runs("off-"+size)
		if len(on) > 0 && len(off) > 0 {
			cpu = fmt.Sprintf("%.2f", 1-medianCPU(off)/medianCPU(on))
		}
		goal(med(cost) <= 0.15, "capture cost, %s B, max rate: %s of capture-off throughput; by relay CPU per frame %s (goal <= 0.15, uBridge 0.34)", size, span(cost), cpu)
	}
	return n
}

// medianCPU returns the median relay CPU seconds per forwarded frame.
func medianCPU(rs []result) float64 {
	var xs []float64
	for _, r := range rs {
		if r.forwarded > 0 {
			xs = append(xs, r.relayCPU/float64(r.forwarded))
		} else if r.received > 0 {
			xs = append(xs, r.relayCPU/float64(r.received))
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return med(xs)
}

func allComplete(rs []result) bool {
	for _, r := range rs {
		if r.capture == nil || !r.capture.complete() {
			return false
		}
	}
	return len(rs) > 0
}

// median returns the result with the median rate.
func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}

func med(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// span formats the median of xs with their range.
func span(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	if len(xs) == 1 {
		return fmt.Sprintf("%.2f", xs[0])
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", med(xs), slices.Min(xs), slices.Max(xs))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return "CPU " + s
}

// affinity returns the CPUs this process may run on.
func affinity() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "?"
	}
	var cpus []string
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, fmt.Sprint(i))
		}
	}
	if len(cpus) == onlineCPUs() {
		return "none (all CPUs)"
	}
	return "CPU " + strings.Join(cpus, ",")
}

func onlineCPUs() int {
	n, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	// "0-1" or "0"
	s := strings.TrimSpace(string(n))
	var lo, hi int
	if _, err := fmt.Sscanf(s, "%d-%d", &lo, &hi); err == nil {
		return hi - lo + 1
	}
	return 1
}

// topologyResult is every repetition measured on one topology.
type topologyResult struct {
	topology string
	reps     [][]result
}

// compare prints each topology's relay runs as ratios to its own ceiling
// and to the first topology's (cloud-cloud, when listed first), medians
// over repetitions.
func compare(w io.Writer, all []topologyResult) {
	runs := []string{"off-64", "on-64", "off-1500", "on-1500"}
	ceiling := map[string]string{"off-64": "ceiling-64", "on-64": "ceiling-64", "off-1500": "ceiling-1500", "on-1500": "ceiling-1500"}
	// vsCeiling is the median over repetitions of a run's rate over the
	// ceiling of its repetition.
	vsCeiling := func(reps [][]result, run string) float64 {
		var xs []float64
		for _, row := range reps {
			var x, c float64
			for _, r := range row {
				switch r.name {
				case run:
					x = r.rate
				case ceiling[run]:
					c = r.rate
				}
			}
			if x > 0 && c > 0 {
				xs = append(xs, x/c)
			}
		}
		if len(xs) == 0 {
			return 0
		}
		return med(xs)
	}
	fmt.Fprintf(w, "\ntopologies compared (median of rate/ceiling per repetition; then / %s's)\n", all[0].topology)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "topology\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", r)
	}
	fmt.Fprintln(tw)
	for _, t := range all {
		fmt.Fprintf(tw, "%s\t", t.topology)
		for _, r := range runs {
			x, base := vsCeiling(t.reps, r), vsCeiling(all[0].reps, r)
			if x == 0 || base == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.2f× (%.2f×)\t", x, x/base)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	// Relay CPU per frame, the CPU-time view of the same cost (the relay
	// is pinned to one CPU), and loss at the steady rate, where the goal
	// is none at all: both absolute, CPU also over the first topology's.
	steady := []string{"off-1500-steady", "on-1500-steady"}
	fmt.Fprintf(w, "\nrelay CPU s/Mframe (median over repetitions; then / %s's), and loss at the steady rate (over every repetition)\n", all[0].topology)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "topology\t")
	for _, r := range append(runs, steady...) {
		fmt.Fprintf(tw, "%s\t", r)
	}
	for _, r := range steady {
		fmt.Fprintf(tw, "loss %s\t", r)
	}
	fmt.Fprintln(tw)
	for _, t := range all {
		fmt.Fprintf(tw, "%s\t", t.topology)
		for _, r := range append(runs, steady...) {
			x, base := medianCPU(runsOf(t.reps, r)), medianCPU(runsOf(all[0].reps, r))
			if x == 0 || base == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.2f (%.2f×)\t", x*1e6, x/base)
		}
		for _, r := range steady {
			rs := runsOf(t.reps, r)
			var sent, lost int
			for _, x := range rs {
				sent, lost = sent+x.sent, lost+x.sent-x.received
			}
			if sent == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.3f%% (%d of %d)\t", 100*float64(lost)/float64(sent), lost, sent)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// runsOf returns the runs named name of every repetition.
func runsOf(reps [][]result, name string) []result {
	var out []result
	for _, row := range reps {
		for _, r := range row {
			if r.name == name {
				out = append(out, r)
			}
		}
	}
	return out
}
