package host

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
)

// loadSampler reports the host's CPU and memory use from /proc. CPU use is
// measured between two samples, so the first one reports 0.
type loadSampler struct {
	mu          sync.Mutex
	total, idle uint64
}

func (s *loadSampler) sample() (cpuPercent, memPercent float64) {
	total, idle, ok := readCPU()
	if ok {
		s.mu.Lock()
		if s.total != 0 && total > s.total {
			dt, di := total-s.total, idle-s.idle
			cpuPercent = 100 * float64(dt-min(di, dt)) / float64(dt)
		}
		s.total, s.idle = total, idle
		s.mu.Unlock()
	}
	return round1(cpuPercent), round1(readMemory())
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
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total, avail float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	if total == 0 {
		return 0
	}
	return 100 * (total - avail) / total
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }
