package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
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

// TestTsharkDecodesAVPCSPingInTheView captures a ping between two VPCS
// and reads the stopped capture through the view: tshark decodes it (the
// info event says so), and Wireshark display filters pick ARP and the
// echo requests of one PC.
func TestTsharkDecodesAVPCSPingInTheView(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark")
	c := startController(t)
	var proj struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "tshark-view"}, 201, &proj)
	base := "/v2/projects/" + proj.ProjectID
	pcs := []*pc{{ip: "10.0.0.1"}, {ip: "10.0.0.2"}}
	for i, p := range pcs {
		c.call("POST", base+"/nodes", map[string]any{"name": fmt.Sprint("PC", i+1), "node_type": "vpcs", "compute_id": "local"}, 201, &p.node)
	}
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": pcs[0].node.NodeID, "adapter_number": 0, "port_number": 0},
		{"node_id": pcs[1].node.NodeID, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	linkPath := base + "/links/" + link.LinkID
	c.startPCs(t, base, pcs)
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "ping"}, 201, nil)
	if n := pcs[0].ping(t, pcs[1].ip, 3); n < 2 {
		t.Fatalf("%d of 3 pings answered", n)
	}
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)

	feed := func(filter string) (decoder string, rows []map[string]any) {
		t.Helper()
		resp, err := http.Get(c.url + linkPath + "/packets?filter=" + url.QueryEscape(filter))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("filter %q: %d %s", filter, resp.StatusCode, b)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			data, ok := strings.CutPrefix(line, "data: ")
			switch {
			case !ok:
			case event == "info":
				var info map[string]any
				json.Unmarshal([]byte(data), &info)
				decoder, _ = info["decoder"].(string)
			case event == "rows":
				var batch []map[string]any
				json.Unmarshal([]byte(data), &batch)
				rows = append(rows, batch...)
			case event == "end":
				return decoder, rows
			}
		}
		t.Fatalf("filter %q: no end event", filter)
		return
	}
	decoder, arp := feed("arp")
	if decoder != "tshark" || len(arp) == 0 {
		t.Fatalf("decoder %q, %d ARP rows", decoder, len(arp))
	}
	for _, r := range arp {
		if r["proto"] != "ARP" {
			t.Errorf("a row under arp: %v", r)
		}
	}
	_, echoes := feed("icmp.type == 8 && ip.src == 10.0.0.1")
	if len(echoes) < 2 {
		t.Fatalf("%d echo requests from PC1", len(echoes))
	}
	for _, r := range echoes {
		if info, _ := r["info"].(string); r["proto"] != "ICMP" || !strings.HasPrefix(info, "Echo (ping) request") || r["src"] != "10.0.0.1" {
			t.Errorf("a row under the echo filter: %v", r)
		}
	}
}
