package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ifupTime bounds `ifup -a`: a DHCP server that never answers must not
// keep the node's command from running.
const ifupTime = 30 * time.Second

// ifup brings up what /etc/network/interfaces configures, as GNS3's init
// does, with the image's own ifup (ifupdown takes "address a.b.c.d/len";
// BusyBox's wants a netmask line). An image without ifup is left alone,
// with a word on the console when the file configures something.
func ifup() {
	data, err := os.ReadFile("/etc/network/interfaces")
	if err != nil {
		return
	}
	bin, err := exec.LookPath("ifup")
	if err != nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				warn("/etc/network/interfaces configures interfaces but this image has no ifup")
				return
			}
		}
		return
	}
	_ = os.MkdirAll("/run/network", 0o755) // ifupdown's state
	ctx, cancel := context.WithTimeout(context.Background(), ifupTime)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-a", "-f")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		warn("ifup -a: %v", err)
	}
}

func warn(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "labtap init: "+format+"\r\n", a...)
}
