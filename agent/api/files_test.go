package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/labtap/labtap/proto"
)

// nodeDir makes a project with one node, writes a file in the node's
// directory so the directory exists, and returns the directory.
func nodeDir(t *testing.T, a *agent) string {
	t.Helper()
	a.must("PUT", proto.ProjectPath(projectID), proto.ProjectSpec{Name: "lab"}, nil, 204)
	var st proto.NodeState
	a.must("PUT", proto.NodePath(projectID, nodeA), proto.NodeSpec{NodeType: "vpcs", Name: "PC1"}, &st, 200)
	a.must("PUT", proto.NodeFilePath(projectID, nodeA, "startup.vpc"), proto.NodeFile{Content: []byte("ip 10.0.0.1/24\n")}, nil, 204)
	if st.NodeDirectory == "" {
		t.Fatal("the node has no directory")
	}
	return st.NodeDirectory
}

// getFile reads a node file with a client that gives up after 5 s: a
// read the agent does not answer in time fails the test instead of
// hanging it.
func getFile(t *testing.T, a *agent, name string) (int, proto.Error) {
	t.Helper()
	req, _ := http.NewRequest("GET", a.url+proto.NodeFilePath(projectID, nodeA, name), nil)
	req.Header.Set(proto.SecretHeader, secret)
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	defer resp.Body.Close()
	var e proto.Error
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	json.Unmarshal(buf.Bytes(), &e)
	return resp.StatusCode, e
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(entries)
}

// A FIFO a node's process made in its directory is refused at once, 200
// times over, and no read of it is left behind holding a goroutine or a
// file descriptor (each one used to hang for ever, and the agent ran out
// of threads and descriptors).
func TestSecurityNodeFileFIFOIsRefusedPromptly(t *testing.T) {
	a := newAgent(t)
	dir := nodeDir(t, a)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Warm up the client's and server's connection goroutines first.
	if code, e := getFile(t, a, "pipe"); code != http.StatusConflict {
		t.Fatalf("GET pipe = %d %+v, want 409", code, e)
	}
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	start := time.Now()
	for range 200 {
		code, e := getFile(t, a, "pipe")
		if code != http.StatusConflict || e.Code != proto.CodeConflict {
			t.Fatalf("GET pipe = %d %+v, want 409 conflict", code, e)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("200 refusals took %v", d)
	}
	// Let idle connections and finished goroutines settle, then compare.
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, f := runtime.NumGoroutine(), openFDs(t)
		if g <= goroutines+5 && f <= fds+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 200 reads of a FIFO: %d goroutines (was %d), %d fds (was %d)", g, goroutines, f, fds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The node's real files still read.
	var f proto.NodeFile
	a.must("GET", proto.NodeFilePath(projectID, nodeA, "startup.vpc"), nil, &f, 200)
	if string(f.Content) != "ip 10.0.0.1/24\n" {
		t.Fatalf("startup.vpc = %q", f.Content)
	}
}

// A symbolic link in a node's directory is refused, whether it leads to
// a host file or to a file of the directory itself; a device too.
func TestSecurityNodeFileSymlinkIsRefused(t *testing.T) {
	a := newAgent(t)
	dir := nodeDir(t, a)
	host := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(host, []byte("secret"), 0o600)
	os.Symlink(host, filepath.Join(dir, "out"))
	os.Symlink("startup.vpc", filepath.Join(dir, "in"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	for _, name := range []string{"out", "in", "zero"} {
		code, e := getFile(t, a, name)
		if code/100 != 4 || bytes.Contains([]byte(e.Message), []byte("secret")) {
			t.Errorf("GET %s = %d %+v, want a 4xx", name, code, e)
		}
	}
	// A write to the link's name replaces the link, never its target.
	a.must("PUT", proto.NodeFilePath(projectID, nodeA, "out"), proto.NodeFile{Content: []byte("mine")}, nil, 204)
	if data, _ := os.ReadFile(host); string(data) != "secret" {
		t.Fatalf("the host file became %q", data)
	}
	if st, err := os.Lstat(filepath.Join(dir, "out")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("out after the write: %v %v", st, err)
	}
}
