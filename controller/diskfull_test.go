package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// mountNamespaceWrapper returns a command prefix that runs a program in a
// user and mount namespace of its own with a tmpfs of size on dir: a disk
// that fills, seen by that program only. The test is skipped where the
// kernel refuses user namespaces.
func mountNamespaceWrapper(t *testing.T, dir, size string) []string {
	t.Helper()
	testenv.RequireTools(t, "mount")
	testenv.RequireUserNamespaces(t)
	return []string{"unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"`, "sh", size, dir}
}

func TestACaptureThatFillsItsDiskEndsValidAndTheLinkSaysSo(t *testing.T) {
	testenv.RequireTools(t, "tshark", "capinfos")
	data := t.TempDir()
	// 4 MiB: room for the bound below many times over, whatever the
	// machine's pace (the records a failed write got in are kept; those
	// after are dropped, up to a FlushInterval or two of them).
	c := startControllerUnder(t, mountNamespaceWrapper(t, data, "4m"), data, nil)

	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "full"}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	// Two clouds, each a UDP port facing a socket of the test: frames go in
	// at one and come out of the other.
	gen, sink := testenv.LoopbackUDP(t), testenv.LoopbackUDP(t)
	cloud := func(name string, peer *net.UDPConn) (string, int) {
		lport := freeUDPPort(t)
		var n nodeReply
		c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "cloud", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": []any{map[string]any{
				"name": "UDP tunnel 1", "port_number": 0, "type": "udp", "lport": lport, "rhost": "127.0.0.1",
				"rport": peer.LocalAddr().(*net.UDPAddr).Port}}}}, 201, &n)
		return n.NodeID, lport
	}
	a, into := cloud("Gen", gen)
	b, _ := cloud("Sink", sink)
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a, "adapter_number": 0, "port_number": 0},
		{"node_id": b, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	notes := c.follow(project.ProjectID)
	var started linkReply
	c.call("POST", base+"/links/"+link.LinkID+"/start_capture", map[string]any{}, 201, &started)

	// Frames until the capture has filled the disk and ended.
	ended := make(chan linkReply, 1)
	go func() {
		l, err := notes.waitLink(link.LinkID, 60*time.Second, func(l linkReply) bool { return !l.Capturing })
		if err != nil {
			t.Error(err)
		}
		ended <- l
	}()
	frame := make([]byte, 1400)
	buf := make([]byte, 2048)
	dest := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: into}
	var got linkReply
send:
	for i := 0; ; i++ {
		copy(frame, fmt.Sprintf("frame %d", i))
		if _, err := gen.WriteToUDP(frame, dest); err != nil {
			t.Fatal(err)
		}
		sink.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := sink.ReadFromUDP(buf); err != nil {
			t.Fatalf("frame %d did not cross the link: %v", i, err)
		}
		select {
		case got = <-ended:
			break send
		default:
		}
		if i > 20000 {
			t.Fatal("the capture never ended, though its disk holds 4 MiB")
		}
	}
	if deref(got.CaptureFilePath) != deref(started.CaptureFilePath) || got.CaptureComputeID != nil {
		t.Fatalf("link after its disk filled: %+v", got)
	}
	// Then the listeners are told why, in words.
	t.Logf("log.warning: %s", notes.logWarning(t, 10*time.Second, deref(started.CaptureFileName), "no space left on device"))
	var now linkReply
	c.call("GET", base+"/links/"+link.LinkID, nil, 200, &now)
	if now.Capturing {
		t.Fatalf("GET link says capturing: %+v", now)
	}
	// The file, seen through the controller's own mounts, holds whole
	// records only; the link still carries frames.
	path := filepath.Join(fmt.Sprintf("/proc/%d/root", c.cmd.Process.Pid), deref(got.CaptureFilePath))
	out, err := exec.Command("capinfos", "-c", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "cut short") {
		t.Fatalf("capinfos: %v\n%s", err, out)
	}
	if n := tsharkCount(t, path, "frame.len == 1400"); n < 500 {
		t.Fatalf("the capture holds %d frames before the disk filled", n)
	}
	if _, err := os.Stat(path + ".writing"); !os.IsNotExist(err) {
		t.Fatalf("the capture is still marked as being written: %v", err)
	}
	gen.WriteToUDP([]byte("after"), dest)
	sink.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _, err := sink.ReadFromUDP(buf); err != nil || string(buf[:n]) != "after" {
		t.Fatalf("the link stopped carrying frames when its capture ended: %q %v", buf[:n], err)
	}
}

// A capture that cannot start because its disk is full (its header cannot
// be written) is a 500 whose JSON message says why; the link is not
// capturing, no file or mark is left in the captures folder, and once the
// disk has room the same name starts.
func TestACaptureStartOnAFullDiskFailsWithItsReasonAndLeavesNoFile(t *testing.T) {
	data := t.TempDir()
	c := startControllerUnder(t, mountNamespaceWrapper(t, data, "1m"), data, nil)
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "full"}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	var ids []string
	for _, name := range []string{"A", "B"} {
		peer := testenv.LoopbackUDP(t)
		var n nodeReply
		c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "cloud", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": []any{map[string]any{
				"name": "UDP tunnel 1", "port_number": 0, "type": "udp", "lport": freeUDPPort(t), "rhost": "127.0.0.1",
				"rport": peer.LocalAddr().(*net.UDPAddr).Port}}}}, 201, &n)
		ids = append(ids, n.NodeID)
	}
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": ids[0], "adapter_number": 0, "port_number": 0},
		{"node_id": ids[1], "adapter_number": 0, "port_number": 0},
	}}, 201, &link)

	// Fill the controller's disk, seen through its own mounts.
	inside := func(p string) string { return filepath.Join(fmt.Sprintf("/proc/%d/root", c.cmd.Process.Pid), p) }
	filler := inside(filepath.Join(data, "filler"))
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break // full
		}
	}
	f.Close()

	var refused struct {
		Message string `json:"message"`
	}
	c.call("POST", base+"/links/"+link.LinkID+"/start_capture", map[string]any{"capture_file_name": "full"}, 500, &refused)
	if !strings.Contains(refused.Message, "no space left on device") {
		t.Fatalf("start_capture on a full disk: message %q, want the reason", refused.Message)
	}
	var now linkReply
	c.call("GET", base+"/links/"+link.LinkID, nil, 200, &now)
	if now.Capturing {
		t.Fatalf("the link captures after its start failed: %+v", now)
	}
	folder := inside(filepath.Join(data, "projects", project.ProjectID, "project-files", "captures"))
	if names, err := os.ReadDir(folder); err != nil || len(names) != 0 {
		t.Fatalf("the failed start left %v in the captures folder (%v)", names, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var started linkReply
	c.call("POST", base+"/links/"+link.LinkID+"/start_capture", map[string]any{"capture_file_name": "full"}, 201, &started)
	if deref(started.CaptureFileName) != "full.pcap" {
		t.Fatalf("the start once the disk has room: %+v, want full.pcap", started)
	}
}

// freeUDPPort is a port for a cloud node's lport: see testenv.UnusedUDPPort.
func freeUDPPort(t *testing.T) int { return testenv.UnusedUDPPort(t) }
