package host

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// loadSampler reports the host's CPU and memory use from /proc. CPU use is
// measured between two samples, so the first one reports 0.
type loadSampler struct {
	mu          sync.Mutex
	total, idle uint64
	last        float64 // the last measure, for samples too close to it
}

// minJiffies is the shortest span CPU use is measured over: a sample
// sooner after the previous one answers the previous measure.
const minJiffies = 50

func (s *loadSampler) sample() (cpuPercent, memPercent float64) {
	return round1(s.cpu()), round1(readMemory())
}

func (s *loadSampler) cpu() float64 {
	total, idle, ok := readCPU()
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total != 0 && total < s.total+minJiffies {
		return s.last
	}
	if s.total != 0 {
		dt, di := total-s.total, idle-s.idle
		s.last = 100 * float64(dt-min(di, dt)) / float64(dt)
	}
	s.total, s.idle = total, idle
	return s.last
}

// readCPU sums the first line of /proc/stat: all jiffies, and idle+iowait.
func readCPU() (total, idle uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total, idle, true
}

// readMemory returns the share of memory in use, from /proc/meminfo.
func readMemory() float64 {
	m := node.Meminfo()
	total, avail := float64(m["MemTotal:"]), float64(m["MemAvailable:"])
	if total == 0 {
		return 0
	}
	return 100 * (total - avail) / total
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }

// Statistics are the host's figures as GNS3's compute statistics give
// them (GET /v2/statistics): CPU and memory use, swap, the load average
// as a share of the CPUs, and the use of the disk holding the data
// directory. A figure the host does not give is 0.
func (h *Host) Statistics() proto.Statistics {
	m := node.Meminfo()
	st := proto.Statistics{
		CPUPercent:     int(h.load.cpu() + 0.5),
		MemoryTotal:    m["MemTotal:"],
		MemoryFree:     m["MemFree:"],
		SwapTotal:      m["SwapTotal:"],
		SwapFree:       m["SwapFree:"],
		LoadAvgPercent: []int{0, 0, 0},
	}
	// psutil's "used": what is neither free, buffers nor page cache.
	st.MemoryUsed = max(0, m["MemTotal:"]-m["MemFree:"]-m["Buffers:"]-m["Cached:"]-m["SReclaimable:"])
	if t := m["MemTotal:"]; t > 0 {
		st.MemoryPercent = int(100*float64(t-min(m["MemAvailable:"], t))/float64(t) + 0.5)
	}
	st.SwapUsed = max(0, st.SwapTotal-st.SwapFree)
	if st.SwapTotal > 0 {
		st.SwapPercent = int(100*float64(st.SwapUsed)/float64(st.SwapTotal) + 0.5)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		for i := 0; i < 3 && i < len(f); i++ {
			v, _ := strconv.ParseFloat(f[i], 64)
			st.LoadAvgPercent[i] = int(100*v/float64(runtime.NumCPU()) + 0.5)
		}
	}
	var fs unix.Statfs_t
	dir := h.cfg.DataDir
	if dir == "" {
		dir = "."
	}
	if err := unix.Statfs(dir, &fs); err == nil {
		used := (fs.Blocks - fs.Bfree) * uint64(fs.Bsize)
		avail := fs.Bavail * uint64(fs.Bsize)
		if used+avail > 0 {
			st.DiskPercent = int(100*float64(used)/float64(used+avail) + 0.5)
		}
	}
	return st
}

// capacity is the host's room for nodes, which the controller places
// nodes by, with the nodes of the open projects. qemu says QEMU nodes run
// here (KVM is only tested then).
func capacity(cfg *Config, open []*project, qemu bool) *proto.Capacity {
	m := node.Meminfo()
	c := &proto.Capacity{
		CPUs:            runtime.NumCPU(),
		MemoryTotal:     m["MemTotal:"],
		MemoryAvailable: m["MemAvailable:"],
		KVM:             qemu && cfg.QemuAccel != "tcg" && (cfg.QemuAccel == "kvm" || kvmUsable()),
	}
	dir := cfg.DataDir
	if dir == "" {
		dir = "."
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil {
		c.DiskFree = int64(fs.Bavail) * fs.Bsize
	}
	var runners []node.Runner
	for _, p := range open {
		p.mu.Lock()
		for _, n := range p.nodes {
			c.Nodes++
			if n.runner != nil {
				runners = append(runners, n.runner)
			}
		}
		p.mu.Unlock()
	}
	for _, r := range runners { // asked with no lock held: a runner has its own
		if r.Status() == node.Started {
			c.NodesRunning++
		}
	}
	return c
}
