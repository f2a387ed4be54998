package host

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// readCPU gives the first line of /proc/stat in jiffies: the sum of its
// fields, read just before and after, bounds it.
func TestReadCPUSumsProcStatsFirstLine(t *testing.T) {
	sum := func() uint64 {
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			t.Skip("no /proc/stat")
		}
		line, _, _ := strings.Cut(string(data), "\n")
		var total uint64
		for _, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseUint(f, 10, 64)
			total += v
		}
		return total
	}
	before := sum()
	total, idle, ok := readCPU()
	after := sum()
	if !ok {
		t.Fatal("readCPU failed")
	}
	// Each field is rounded on its way through seconds: 10 fields, 1 each.
	if total+10 < before || total > after+10 || idle > total {
		t.Fatalf("readCPU = %d (idle %d); /proc/stat sums to %d then %d", total, idle, before, after)
	}
}

func TestStatisticsReportTheHostsMemoryAndLoad(t *testing.T) {
	h := New(Config{DataDir: t.TempDir()})
	st := h.Statistics()
	if st.MemoryTotal <= 0 || st.MemoryFree <= 0 || st.MemoryUsed <= 0 || st.MemoryPercent <= 0 {
		t.Fatalf("memory figures missing: %+v", st)
	}
	if len(st.LoadAvgPercent) != 3 {
		t.Fatalf("load average %v; want three figures", st.LoadAvgPercent)
	}
}
