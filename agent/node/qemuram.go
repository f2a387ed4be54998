package node

import (
	"fmt"
	"os"

	"github.com/prometheus/procfs"
)

// The RAM check of a QEMU node's start: GNS3's warning when the VM wants
// more than the host has available.

// ramWarning is GNS3's warning when the VM wants more RAM than the host
// has available, "" otherwise.
func ramWarning(name string, ramMB int) string {
	m := ReadMemory()
	avail, total := m.Available>>20, m.Total>>20
	if total == 0 || int64(ramMB) <= avail {
		return ""
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%q requires %dMB of RAM to run but there is only %dMB - %d%% of RAM left on %q",
		name, ramMB, avail, avail*100/total, host)
}

// Memory is the host's memory, in bytes, from /proc/meminfo (a figure
// the kernel does not give is 0).
type Memory struct {
	Total, Free, Available, Buffers, Cached, SReclaimable int64
	SwapTotal, SwapFree                                   int64
}

// ReadMemory reads /proc/meminfo; all zero when it cannot be read. The
// agent's load report reads it too.
func ReadMemory() Memory {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return Memory{}
	}
	m, err := fs.Meminfo()
	if err != nil {
		return Memory{}
	}
	b := func(v *uint64) int64 {
		if v == nil {
			return 0
		}
		return int64(*v)
	}
	return Memory{
		Total: b(m.MemTotalBytes), Free: b(m.MemFreeBytes), Available: b(m.MemAvailableBytes),
		Buffers: b(m.BuffersBytes), Cached: b(m.CachedBytes), SReclaimable: b(m.SReclaimableBytes),
		SwapTotal: b(m.SwapTotalBytes), SwapFree: b(m.SwapFreeBytes),
	}
}
