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
	avail, total, err := memInfo()
	if err != nil || total == 0 || int64(ramMB) <= avail {
		return ""
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%q requires %dMB of RAM to run but there is only %dMB - %d%% of RAM left on %q",
		name, ramMB, avail, avail*100/total, host)
}

// memInfo reads MemAvailable and MemTotal, in MB.
func memInfo() (avail, total int64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemAvailable:":
			avail = kb / 1024
		case "MemTotal:":
			total = kb / 1024
		}
	}
	return avail, total, sc.Err()
}
