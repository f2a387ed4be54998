package node

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The RAM check of a QEMU node's start: GNS3's warning when the VM wants
// more than the host has available.

// ramWarning is GNS3's warning when the VM wants more RAM than the host
// has available, "" otherwise.
func ramWarning(name string, ramMB int) string {
	m := Meminfo()
	avail, total := m["MemAvailable:"]>>20, m["MemTotal:"]>>20
	if total == 0 || int64(ramMB) <= avail {
		return ""
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%q requires %dMB of RAM to run but there is only %dMB - %d%% of RAM left on %q",
		name, ramMB, avail, avail*100/total, host)
}

// Meminfo reads /proc/meminfo's figures, in bytes, by name ("MemTotal:");
// empty when the file cannot be read. The agent's load report reads it too.
func Meminfo() map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 2 && fields[2] == "kB" {
			v <<= 10
		}
		out[fields[0]] = v
	}
	return out
}
