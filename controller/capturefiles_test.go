package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// captureFileReply is one entry of GET /v2/projects/{id}/captures.
type captureFileReply struct {
	ComputeID string     `json:"compute_id"`
	FileName  string     `json:"file_name"`
	LinkID    string     `json:"link_id"`
	Format    string     `json:"capture_format"`
	Running   bool       `json:"running"`
	Size      int64      `json:"size"`
	Records   uint64     `json:"records"`
	FirstTime *time.Time `json:"first_time"`
	LastTime  *time.Time `json:"last_time"`
	Dropped   uint64     `json:"dropped"`
}

// TestCaptureFilesYouComeBackToAcrossTwoAgents runs two VPCS on two agent
// processes, the link's capture on agent1, and comes back to its files
// through the controller: a stopped capture and a running one are listed
// with their link, records and times; both download (relayed from agent1)
// as valid captures holding the pings; capture_file reads the stopped file
// (it answered 409 after a stop); the capture view decodes the stopped
// file; the running file cannot be deleted (409), the stopped one can
// (204, then gone); names that are paths are 400s that touch nothing.
func TestCaptureFilesYouComeBackToAcrossTwoAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the controller, two agents and vpcs")
	}
	testenv.RequireTools(t, "vpcs", "tshark", "capinfos")
	const secret = "capture-files-secret"
	env := []string{"LABTAP_SECRET=" + secret}
	c := startControllerWith(t, t.TempDir(), env)
	startAgent(t, "agent1", "127.0.0.2", secret, c.url)
	startAgent(t, "agent2", "127.0.0.3", secret, c.url)
	c.waitCompute("agent1", true, 20*time.Second)
	c.waitCompute("agent2", true, 20*time.Second)
	lab := c.twoPCs("come-back", "agent1", "agent2", "10.0.0.1", "10.0.0.2")
	c.startPCs(t, lab.base, lab.pcs)
	linkPath := lab.base + "/links/" + lab.link.LinkID
	if n := lab.pcs[0].ping(t, lab.pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply across the two agents")
	}

	// A first capture, stopped.
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "first"}, 201, nil)
	if n := lab.pcs[0].ping(t, lab.pcs[1].ip, 3); n < 2 {
		t.Fatalf("%d of 3 pings answered", n)
	}
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)
	// capture_file after the stop: the stopped file, whole.
	stopped := downloadCaptureFile(t, c.url+linkPath+"/capture_file", "first.pcap")
	if n := tsharkCount(t, stopped, "icmp"); n < 4 {
		t.Fatalf("the stopped capture read back through capture_file holds %d ICMP frames, want 4 or more", n)
	}
	// The capture view decodes the stopped file, to its end.
	if rows := viewRows(t, c.url+linkPath+"/packets?filter=icmp"); rows < 4 {
		t.Fatalf("the view of the stopped capture shows %d ICMP rows, want 4 or more", rows)
	}

	// A second capture, pcapng, left running.
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "second", "capture_format": "pcapng"}, 201, nil)
	lab.pcs[0].ping(t, lab.pcs[1].ip, 2)
	var list []captureFileReply
	waitList := func(ok func([]captureFileReply) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			list = nil
			c.call("GET", lab.base+"/captures", nil, 200, &list)
			if ok(list) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the project's capture files: %+v", list)
			}
		}
	}
	byName := func(l []captureFileReply, name string) *captureFileReply {
		for i := range l {
			if l[i].FileName == name {
				return &l[i]
			}
		}
		return nil
	}
	waitList(func(l []captureFileReply) bool {
		f, s := byName(l, "first.pcap"), byName(l, "second.pcapng")
		return len(l) == 2 && f != nil && s != nil && s.Running && s.Records >= 2 && !f.Running
	})
	for _, f := range list {
		if f.ComputeID != "agent1" || f.LinkID != lab.link.LinkID || f.FirstTime == nil || f.LastTime == nil || f.Size <= 24 {
			t.Fatalf("capture file %+v: want agent1's, of link %s, with times", f, lab.link.LinkID)
		}
	}
	if f := byName(list, "first.pcap"); f.Records < 4 || f.Format != "pcap" || f.LastTime.Before(*f.FirstTime) {
		t.Fatalf("the stopped file: %+v", f)
	}

	// Each downloads from agent1 through the controller, whole.
	files := lab.base + "/captures/agent1/"
	if p := downloadCaptureFile(t, c.url+files+"first.pcap", "first.pcap"); tsharkCount(t, p, "icmp") < 4 {
		t.Fatal("the stopped file downloaded by name lost its ICMP frames")
	}
	if p := downloadCaptureFile(t, c.url+files+"second.pcapng", "second.pcapng"); tsharkCount(t, p, "icmp") < 2 {
		t.Fatal("the running file downloaded by name lacks its ICMP frames")
	}

	// Bad names and computes change nothing.
	for _, bad := range []struct {
		path string
		want int
	}{
		{files + "..%2F..%2Fproject-files%2Fcaptures%2Ffirst.pcap", 400},
		{files + ".first.pcap", 400},
		{files + "first.pcap.meta", 400},
		{files + strings.Repeat("a", 300) + ".pcap", 400},
		{lab.base + "/captures/nowhere/first.pcap", 404},
		{files + "absent.pcap", 404},
	} {
		c.call("GET", bad.path, nil, bad.want, nil)
		c.call("DELETE", bad.path, nil, bad.want, nil)
	}
	c.call("DELETE", files+"second.pcapng", nil, 409, nil)
	c.call("DELETE", files+"first.pcap", nil, 204, nil)
	waitList(func(l []captureFileReply) bool { return len(l) == 1 && l[0].FileName == "second.pcapng" })
	c.call("GET", files+"first.pcap", nil, 404, nil)
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)
}

// viewRows reads a capture view feed to its end and counts its rows.
func viewRows(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	rows, event := 0, ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "rows":
			rows += strings.Count(line, `"no":`)
		case strings.HasPrefix(line, "data: ") && event == "end":
			return rows
		}
	}
	t.Fatalf("the feed ended without an end event after %d rows: %v", rows, sc.Err())
	return 0
}

var _ = fmt.Sprint
