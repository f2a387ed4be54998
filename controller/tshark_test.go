package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
)

// TestViewFiltersAreWiresharkDisplayFiltersWhereTsharkIsInstalled runs the
// controller with tshark in its PATH and without: with it, a display filter
// of Wireshark's is taken and a bad one is a 400 with tshark's message;
// without it, the view falls back to tcpdump expressions, and libpcap's
// message says what it refuses.
func TestViewFiltersAreWiresharkDisplayFiltersWhereTsharkIsInstalled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the controller and tshark")
	}
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("no tshark")
	}
	n := 0
	packets := func(c *controller, filter string, want int) string {
		t.Helper()
		var proj struct {
			ProjectID string `json:"project_id"`
		}
		n++
		c.call("POST", "/v2/projects", map[string]any{"name": fmt.Sprint("view", n)}, 201, &proj)
		var reply struct {
			Message string `json:"message"`
		}
		var out any
		if want == 400 {
			out = &reply
		}
		c.call("GET", "/v2/projects/"+proj.ProjectID+"/links/00000000-0000-4000-8000-000000000001/packets?filter="+url.QueryEscape(filter), nil, want, out)
		return reply.Message
	}
	with := startController(t)
	// Valid: it goes on to find the link (there is none).
	packets(with, "ip.addr == 10.0.0.1 && tcp.port == 179", 404)
	packets(with, "icmp[icmptype] == icmp-echo", 404) // a tcpdump expression still
	if msg := packets(with, "ip.addr == 10.0.0.1 &&", 400); !strings.Contains(msg, "Invalid display filter: Unexpected end of filter expression") {
		t.Errorf("a bad display filter: %q, want tshark's message", msg)
	}

	without := startControllerWith(t, t.TempDir(), []string{"PATH=" + t.TempDir()})
	if msg := packets(without, "ip.addr == 10.0.0.1", 400); !strings.Contains(msg, "Invalid display filter") {
		t.Errorf("a display filter without tshark: %q", msg)
	}
	packets(without, "icmp[icmptype] == icmp-echo", 404)
}
