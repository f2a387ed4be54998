package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// fdCount is how many descriptors process pid has open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFds waits until process pid has at most max descriptors open.
func waitFds(t *testing.T, pid, max int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for n := fdCount(t, pid); n > max; n = fdCount(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors still open %v after the clients left, want at most %d", n, within, max)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// TestTheControllerOutlivesIdleConnectionsAndAbandonedStreams runs the
// controller with an open-file limit of 512 and throws at it many more idle
// connections than that, then many capture streams that read their headers
// and leave, on a capture that writes nothing (so no frame ever shows the
// stream's writer that its client left). It must keep answering, and give
// back every descriptor.
func TestTheControllerOutlivesIdleConnectionsAndAbandonedStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller")
	}
	testenv.RequireTools(t, "sh")
	const limit = 512
	wrapper := []string{"sh", "-c", fmt.Sprintf(`ulimit -Sn 256 && ulimit -Hn %d && exec "$@"`, limit), "sh"}
	c := startControllerUnder(t, wrapper, t.TempDir(), nil, "--max-conns-per-ip", "100")
	pid := c.cmd.Process.Pid
	// The Go runtime raises the soft limit to one under the hard one (so it
	// can tell a later prlimit from its own raise).
	if !strings.Contains(c.log.String(), fmt.Sprintf(`msg="open-file limit" limit=%d`, limit-1)) {
		t.Fatalf("the controller's soft open-file limit is not raised to the hard one:\n%s", c.log.String())
	}
	addr := strings.TrimPrefix(c.url, "http://")

	// An idle capture: two clouds linked, nothing sent.
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "exhaust"}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	cloud := func(name string) string {
		var n nodeReply
		c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "cloud", "compute_id": "local",
			"properties": map[string]any{"ports_mapping": []any{map[string]any{
				"name": "UDP tunnel 1", "port_number": 0, "type": "udp", "lport": freeUDPPort(t), "rhost": "127.0.0.1",
				"rport": freeUDPPort(t)}}}}, 201, &n)
		return n.NodeID
	}
	a, b := cloud("A"), cloud("B")
	var link linkReply
	c.call("POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": a, "adapter_number": 0, "port_number": 0},
		{"node_id": b, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	c.call("POST", base+"/links/"+link.LinkID+"/start_capture", map[string]any{}, 201, nil)
	c.call("GET", "/v2/version", nil, 200, nil)
	http.DefaultClient.CloseIdleConnections()
	baseline := fdCount(t, pid)

	// Idle connections from 127.0.0.2: three times the limit. Those over
	// the caps are refused; the rest wait.
	var idle []net.Conn
	for range 3 * limit {
		conn, err := dialFrom("127.0.0.2", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(idle), err)
		}
		idle = append(idle, conn)
	}
	// Another client still gets answers.
	c.call("GET", "/v2/version", nil, 200, nil)
	c.call("GET", base+"/links/"+link.LinkID, nil, 200, nil)
	for _, conn := range idle {
		conn.Close()
	}

	// Abandoned streams, from 127.0.0.3: each holds a connection to the
	// controller, one from it to the agent, the agent's end and a file
	// handle until noticed: more than the limit if any were kept.
	path := base + "/links/" + link.LinkID + "/pcap"
	for i := range 2 * limit {
		conn, err := dialFrom("127.0.0.3", addr)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d: %d %s", i, resp.StatusCode, body)
		}
		header := make([]byte, 24)
		if _, err := io.ReadFull(resp.Body, header); err != nil {
			t.Fatalf("stream %d: pcap header: %v", i, err)
		}
		conn.Close()
		if i%50 == 49 {
			// Every 50, the streams left so far are all released: the
			// loop is bounded by how fast the controller notices, not by
			// the per-address cap.
			waitFds(t, pid, baseline+8, 10*time.Second)
		}
	}

	c.call("GET", "/v2/version", nil, 200, nil)
	http.DefaultClient.CloseIdleConnections()
	waitFds(t, pid, baseline+2, 10*time.Second)
	select {
	case err := <-c.done:
		t.Fatalf("the controller exited: %v", err)
	default:
	}
	c.call("POST", base+"/links/"+link.LinkID+"/stop_capture", nil, 201, nil)
}
