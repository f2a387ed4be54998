//go:build linux

package captures

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkThousandCaptures creates 1,000 capture files on disk (in the
// test's temporary directory) with a pool of their own, and reports what
// they cost idle: pool memory, Go heap and RSS per capture, and CPU time
// over a second of idleness; then what they cost each receiving 100
// frames/s of 128 bytes for two seconds: frames dropped (the goal is 0)
// and the most pool memory they held. The whole agent, relay included, is
// measured by scripts/bench -captures 1000.
//
//	go test ./captures -run '^$' -bench ThousandCaptures -benchtime 1x
func BenchmarkThousandCaptures(b *testing.B) {
	const n = 1000
	root, err := os.OpenRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	round := 0
	for b.Loop() {
		round++
		pool := NewPool(1<<30, 0)
		runtime.GC()
		heap0, rss0 := heapInUse(), selfRSS()
		files := make([]*File, n)
		for i := range files {
			c, err := Create(root, fmt.Sprintf("idle-%d-%d.pcap", round, i), Options{Pool: pool})
			if err != nil {
				b.Fatal(err)
			}
			files[i] = c
		}
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		heap1, rss1 := heapInUse(), selfRSS()
		cpu0 := selfCPU()
		time.Sleep(time.Second)
		idleCPU := selfCPU() - cpu0
		st := pool.Stats()
		b.ReportMetric(float64(st.InUse)/n, "pool-B/idle-capture")
		b.ReportMetric(float64(heap1-heap0)/n, "heap-B/idle-capture")
		b.ReportMetric(float64(rss1-rss0)/n, "rss-B/idle-capture")
		b.ReportMetric(100*idleCPU.Seconds()/n, "core-%/idle-capture")

		// 100 frames/s on each: a batch of one frame to every capture
		// every 10 ms.
		frame := make([]byte, 128)
		batch := [][]byte{frame}
		var peak int64
		start := time.Now()
		for tick := 0; tick < 200; tick++ {
			if d := time.Until(start.Add(time.Duration(tick) * 10 * time.Millisecond)); d > 0 {
				time.Sleep(d)
			}
			for _, c := range files {
				c.WritePackets(AtoB, batch)
			}
			peak = max(peak, pool.Stats().InUse)
		}
		var frames, dropped uint64
		for _, c := range files {
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			f, _, d := c.Stats()
			frames += f
			dropped += d
		}
		b.ReportMetric(float64(dropped), "dropped")
		b.ReportMetric(float64(peak)/n, "pool-B/busy-capture")
		if frames+dropped != 200*n {
			b.Fatalf("%d written + %d dropped, want %d", frames, dropped, 200*n)
		}
	}
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// selfRSS returns the process's resident memory in bytes.
func selfRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
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

// selfCPU returns the process's CPU time, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
