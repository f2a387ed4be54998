package host

import (
	"runtime"
	"sync"

	"github.com/prometheus/procfs"
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
// procfs gives them in seconds (jiffies over USER_HZ, 100 on Linux): they
// are jiffies again here, rounded.
func readCPU() (total, idle uint64, ok bool) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, false
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0, false
	}
	c := st.CPUTotal
	j := func(s float64) uint64 { return uint64(s*userHZ + 0.5) }
	idle = j(c.Idle) + j(c.Iowait)
	total = idle + j(c.User) + j(c.Nice) + j(c.System) + j(c.IRQ) + j(c.SoftIRQ) + j(c.Steal) + j(c.Guest) + j(c.GuestNice)
	return total, idle, true
}

// userHZ is the unit of /proc/stat's times, which procfs divides by.
const userHZ = 100

// readMemory returns the share of memory in use, from /proc/meminfo.
func readMemory() float64 {
	m := node.ReadMemory()
	total, avail := float64(m.Total), float64(m.Available)
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
	m := node.ReadMemory()
	st := proto.Statistics{
		CPUPercent:     int(h.load.cpu() + 0.5),
		MemoryTotal:    m.Total,
		MemoryFree:     m.Free,
		SwapTotal:      m.SwapTotal,
		SwapFree:       m.SwapFree,
		LoadAvgPercent: []int{0, 0, 0},
	}
	// psutil's "used": what is neither free, buffers nor page cache.
	st.MemoryUsed = max(0, m.Total-m.Free-m.Buffers-m.Cached-m.SReclaimable)
	if t := m.Total; t > 0 {
		st.MemoryPercent = int(100*float64(t-min(m.Available, t))/float64(t) + 0.5)
	}
	st.SwapUsed = max(0, st.SwapTotal-st.SwapFree)
	if st.SwapTotal > 0 {
		st.SwapPercent = int(100*float64(st.SwapUsed)/float64(st.SwapTotal) + 0.5)
	}
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if la, err := fs.LoadAvg(); err == nil {
			for i, v := range []float64{la.Load1, la.Load5, la.Load15} {
				st.LoadAvgPercent[i] = int(100*v/float64(runtime.NumCPU()) + 0.5)
			}
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
	m := node.ReadMemory()
	c := &proto.Capacity{
		CPUs:            runtime.NumCPU(),
		MemoryTotal:     m.Total,
		MemoryAvailable: m.Available,
		KVM:             qemu && cfg.QemuAccel != "tcg" && (cfg.QemuAccel == "kvm" || kvmUsable(cfg.Sandbox)),
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
