package main

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// downloadCaptureFile downloads a capture's file as it is now
// (.../capture_file), checks its headers (its name, when want is not "",
// and its length) and that capinfos reads it whole, and returns where it
// saved it.
func downloadCaptureFile(t *testing.T, url, want string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s, %v", url, resp.StatusCode, body, err)
	}
	disposition, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	name := params["filename"]
	if err != nil || disposition != "attachment" || name == "" || want != "" && name != want || name != filepath.Base(name) {
		t.Fatalf("Content-Disposition %q: want an attachment named %q", resp.Header.Get("Content-Disposition"), want)
	}
	if resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("Content-Length %q for %d bytes", resp.Header.Get("Content-Length"), len(body))
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	capinfosWhole(t, path)
	return path
}

// capinfosWhole fails the test unless capinfos reads path to its end: a
// valid capture that ends on a whole record.
func capinfosWhole(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command("capinfos", "-c", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "cut short") {
		t.Fatalf("capinfos %s: %v\n%s", filepath.Base(path), err, out)
	}
}

// logInfo waits for a log.info notification whose message holds every one
// of words, and returns the message.
func (n *notifications) logInfo(t *testing.T, within time.Duration, words ...string) string {
	t.Helper()
	return n.logMessage(t, "log.info", within, words...)
}

// captureFiles lists the files of a captures folder whose names match re.
func captureFiles(t *testing.T, dir string, re *regexp.Regexp) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if re.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestCaptureLimitsAndRingFilesThroughTheController runs the capture
// limits through the real controller, its local agent and VPCS: PC1 - SW1
// - PC2, pings of 1400 bytes. A capture with capture_max_bytes and no ring
// stops at its limit, and the notifications say so (link.updated, not
// capturing, then log.info with the reason). A ring of three files rotates
// under the pings, a capture named like one of its files is a 409 that
// touches none of them, "Download pcap" (capture_file) gives the file
// being written, whole, while it is written, and the newest three files
// stay, each valid.
func TestCaptureLimitsAndRingFilesThroughTheController(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark", "capinfos")
	c := startController(t)
	var proj struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "limits"}, 201, &proj)
	base := "/v2/projects/" + proj.ProjectID
	pcs := []*pc{{ip: "10.0.0.1"}, {ip: "10.0.0.2"}}
	for i, p := range pcs {
		c.call("POST", base+"/nodes", map[string]any{"name": fmt.Sprint("PC", i+1), "node_type": "vpcs", "compute_id": "local"}, 201, &p.node)
	}
	var sw nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "SW1", "node_type": "ethernet_switch", "compute_id": "local"}, 201, &sw)
	links := make([]linkReply, 2)
	for i, p := range pcs {
		c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
			{"node_id": p.node.NodeID, "adapter_number": 0, "port_number": 0},
			{"node_id": sw.NodeID, "adapter_number": 0, "port_number": i + 1},
		}}, 201, &links[i])
	}
	c.startPCs(t, base, pcs)
	if n := pcs[0].ping(t, pcs[1].ip, 2); n == 0 {
		t.Fatal("no ping reply: the lab does not carry frames")
	}
	n := c.follow(proj.ProjectID)
	linkPath := base + "/links/" + links[0].LinkID
	flood := func(count, interval int) {
		t.Helper()
		// About 2 x 1442 bytes a ping on the link, 100 pings a second.
		if got := pcs[0].ping(t, pcs[1].ip+fmt.Sprintf(" -l 1400 -i %d", interval), count); got == 0 {
			t.Fatal("no ping reply during the flood")
		}
	}

	// A byte limit without a ring: the capture stops by itself.
	var limited linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "limit", "capture_max_bytes": 131072}, 201, &limited)
	if !limited.Capturing || deref(limited.CaptureFileName) != "limit.pcap" {
		t.Fatalf("start_capture: %+v", limited)
	}
	flood(100, 10) // about 290 kB: over the limit
	n.linkUpdated(t, links[0].LinkID, 30*time.Second, func(l linkReply) bool { return !l.Capturing })
	// Then, in words, why (after link.updated: the notifications are read
	// in order).
	n.logInfo(t, 30*time.Second, "limit.pcap", "capture_max_bytes")
	limitFile := deref(limited.CaptureFilePath)
	if info, err := os.Stat(limitFile); err != nil || info.Size() > 131072 || info.Size() < 131072-1500 {
		t.Fatalf("the limited file: %v, %v", info, err)
	}
	capinfosWhole(t, limitFile)
	// Nothing runs: capture_file reads the stopped capture's file, whole
	// (it answered 409 before; issue 28.15).
	downloadCaptureFile(t, c.url+linkPath+"/capture_file", "limit.pcap")

	// A ring of three files of 128 KiB.
	var ring linkReply
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "ring", "capture_max_bytes": 131072, "capture_ring_files": 3}, 201, &ring)
	if deref(ring.CaptureFileName) != "ring-00001.pcap" {
		t.Fatalf("the ring's first file: %+v", ring)
	}
	dir := filepath.Dir(deref(ring.CaptureFilePath))
	first, err := os.ReadFile(deref(ring.CaptureFilePath))
	if err != nil || len(first) < 24 {
		t.Fatalf("the ring's first file: %d bytes, %v", len(first), err)
	}
	// Another link's capture named after the ring's files is a 409 (a
	// ring writes every name-NNNNN.pcap) and writes nothing. The ring
	// makes its next file, and marks it, ahead of need, after its start
	// answered: the folder is compared once that is done.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		spare, _ := os.Stat(filepath.Join(dir, "ring-00002.pcap"))
		mark, _ := os.Stat(filepath.Join(dir, "ring-00002.pcap.writing"))
		if spare != nil && mark != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ring never made its next file")
		}
	}
	before := captureFiles(t, dir, regexp.MustCompile(`.`))
	for _, name := range []string{"ring-00001.pcap", "ring-00002", "ring.pcap"} {
		c.call("POST", base+"/links/"+links[1].LinkID+"/start_capture", map[string]any{"capture_file_name": name}, 409, nil)
	}
	if after := captureFiles(t, dir, regexp.MustCompile(`.`)); !slices.Equal(after, before) {
		t.Fatalf("the captures folder went from %v to %v", before, after)
	}
	if now, err := os.ReadFile(deref(ring.CaptureFilePath)); err != nil || len(now) < len(first) || string(now[:len(first)]) != string(first) {
		t.Fatalf("the ring's first file was touched: %d bytes now, %d before, %v", len(now), len(first), err)
	}

	// Pings fill about seven files; meanwhile the file being written is
	// downloaded, whole, twice.
	pinged := make(chan error, 1)
	go func() {
		_, err := pcs[0].try(t.Context(), fmt.Sprintf("ping %s -c 300 -l 1400 -i 10", pcs[1].ip))
		pinged <- err
	}()
	ringName := regexp.MustCompile(`^ring-\d{5}\.pcap$`)
	for range 2 {
		time.Sleep(700 * time.Millisecond)
		got := downloadCaptureFile(t, c.url+linkPath+"/capture_file", "")
		if !ringName.MatchString(filepath.Base(got)) {
			t.Fatalf("downloaded %s", filepath.Base(got))
		}
	}
	if err := <-pinged; err != nil {
		t.Fatal(err)
	}
	var stopped linkReply
	c.call("POST", linkPath+"/stop_capture", nil, 201, &stopped)
	last := deref(stopped.CaptureFileName)
	kept := captureFiles(t, dir, ringName)
	lastN, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(last, "ring-"), ".pcap"))
	if lastN < 4 {
		t.Fatalf("the ring ended on %s: it did not rotate past its three files", last)
	}
	want := []string{fmt.Sprintf("ring-%05d.pcap", lastN-2), fmt.Sprintf("ring-%05d.pcap", lastN-1), last}
	if !slices.Equal(kept, want) {
		t.Fatalf("ring files left %v, want the newest three %v", kept, want)
	}
	for _, f := range kept {
		capinfosWhole(t, filepath.Join(dir, f))
		if info, _ := os.Stat(filepath.Join(dir, f)); info.Size() > 131072 {
			t.Fatalf("%s is %d bytes, over its limit", f, info.Size())
		}
		if tsharkCount(t, filepath.Join(dir, f), "icmp") == 0 {
			t.Fatalf("%s holds no ICMP", f)
		}
	}
}
