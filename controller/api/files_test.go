package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	rProjectFile = "/v2/projects/{project_id}/files/{path:.+}"
	rNodeFile    = "/v2/projects/{project_id}/nodes/{node_id}/files/{path:.+}"
)

// The GUI's README editor and a VPCS's Edit config: files read and
// written inside their directory only, 404 with "status" when absent (the
// GUI's editor keys on it), the project file never written by a client.
func TestProjectAndNodeFilesStayInTheirDirectory(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	r := l.do("GET", p+"/files/README.txt", nil)
	if r.status != 404 || r.body["status"] != 404.0 || r.header.Get("X-Route") != rProjectFile {
		t.Fatalf("absent README: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", p+"/files/README.txt", "Lab notes\n"); r.status != 201 || len(r.raw) != 0 {
		t.Fatalf("write README: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", p+"/files/README.txt", nil); r.status != 200 || string(r.raw) != "Lab notes\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("read README: %d %q %q", r.status, r.raw, r.header.Get("Content-Type"))
	}
	outside := filepath.Join(l.data, "outside.txt")
	os.WriteFile(outside, []byte("keep"), 0o644)
	for _, path := range []string{"../../outside.txt", "..%2F..%2Foutside.txt", "a/../../../outside.txt"} {
		l.do("POST", p+"/files/"+path, "pwned")
		if r := l.do("GET", p+"/files/"+path, nil); r.status == 200 && string(r.raw) == "keep" {
			t.Errorf("%s read a file outside the project", path)
		}
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Fatalf("a file outside the project was written: %q", data)
	}
	if r := l.do("POST", p+"/files/lab.gns3", "{}"); r.status != 403 {
		t.Fatalf("the project file was writable: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", p+"/files/project-files", nil); r.status != 400 {
		t.Fatalf("a directory: %d %s", r.status, r.raw)
	}

	// Node files: VPCS startup.vpc.
	n := p + "/nodes/" + l.a
	if r := l.do("GET", n+"/files/nothere.txt", nil); r.status != 404 || r.body["status"] != 404.0 || strings.Contains(string(r.raw), l.data) {
		t.Fatalf("absent file: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", n+"/files/startup.vpc", "ip 10.0.0.1/24\n"); r.status != 201 || r.header.Get("X-Route") != rNodeFile {
		t.Fatalf("write startup.vpc: %d %s", r.status, r.raw)
	}
	if r := l.do("GET", n+"/files/startup.vpc", nil); r.status != 200 || string(r.raw) != "ip 10.0.0.1/24\n" {
		t.Fatalf("read startup.vpc: %d %q", r.status, r.raw)
	}
	for _, path := range []string{".hidden", "../" + l.b + "/startup.vpc"} {
		if r := l.do("POST", n+"/files/"+path, "x"); r.status == 201 && path == ".hidden" {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	if r := l.do("GET", p+"/nodes/"+l.b+"/files/startup.vpc", nil); string(r.raw) != "set pcname PC2\n" {
		t.Fatalf("a write reached another node's directory: %d %s", r.status, r.raw)
	}
	if r := l.do("POST", n+"/files/big.txt", strings.Repeat("x", 600<<10)); r.status != 413 {
		t.Fatalf("oversized node file: %d", r.status)
	}
}

// Duplicate copies a stopped VPCS with its startup.vpc under the next
// free name; a started one is refused; console resets answer 204.
func TestNodeDuplicateAndConsoleReset(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	l.do("POST", p+"/nodes/"+l.a+"/files/startup.vpc", "ip 10.0.0.1/24\n")
	d := l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 20, "y": 30, "z": 1}, 201, rNode+"/duplicate")
	if d.body["name"] != "PC3" || d.body["node_id"] == l.a || d.body["x"] != 20.0 || d.body["node_type"] != "vpcs" {
		t.Fatalf("duplicate %s", d.raw)
	}
	if r := l.do("GET", p+"/nodes/"+d.body["node_id"].(string)+"/files/startup.vpc", nil); r.status != 200 || string(r.raw) != "ip 10.0.0.1/24\n" {
		t.Fatalf("startup.vpc of the copy: %d %q", r.status, r.raw)
	}
	l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 1}, 400, rNode+"/duplicate")
	l.must("POST", p+"/nodes/"+l.a+"/start", nil, 200, rNode+"/start")
	if r := l.must("POST", p+"/nodes/"+l.a+"/duplicate", map[string]any{"x": 1, "y": 2}, 409, rNode+"/duplicate"); r.body["message"] != "Cannot duplicate node data while the node is running" {
		t.Fatalf("running %s", r.raw)
	}
	l.must("POST", p+"/nodes/console/reset", nil, 204, "/v2/projects/{project_id}/nodes/console/reset")
	l.must("POST", p+"/nodes/"+l.a+"/console/reset", nil, 204, rNode+"/console/reset")
	l.must("POST", p+"/close", nil, 204, rProject+"/close")
	l.must("POST", p+"/nodes/console/reset", nil, 403, "/v2/projects/{project_id}/nodes/console/reset")
}

// A duplicate keeps what labtap does not model: the node entry's unknown
// members and properties, and every file of the node's directory (regular
// files and folders only: a link to elsewhere is not followed).
func TestNodeDuplicateKeepsWhatLabtapDoesNotModel(t *testing.T) {
	t.Parallel()
	f := mixedLabFile(t, func(typ string) bool { return typ == "vpcs" })
	pc := f["topology"].(map[string]any)["nodes"].([]any)[0].(map[string]any)
	pc["future_member"] = map[string]any{"depth": []any{json.Number("1"), "two"}}
	pc["application_id"] = json.Number("7")
	pc["properties"].(map[string]any)["future_property"] = "kept"
	pc["properties"].(map[string]any)["mac_address"] = "00:50:79:66:68:00"
	const id = "a0000001-0000-4000-8000-000000000001"
	var dir string
	s := newServerWith(t, func(data string) {
		writeProjectFile(t, data, mixedLab, "mixed-lab.gns3", f)
		dir = filepath.Join(data, "projects", mixedLab, "project-files", "vpcs", id)
		os.MkdirAll(filepath.Join(dir, "notes"), 0o755)
		os.WriteFile(filepath.Join(dir, "notes", "extra.bin"), []byte{0, 1, 2}, 0o600)
		os.WriteFile(filepath.Join(dir, "startup.vpc"), []byte("ip 10.0.0.9/24\n"), 0o644)
		os.Symlink("/etc/hostname", filepath.Join(dir, "elsewhere"))
	})
	p := "/v2/projects/" + mixedLab
	s.must("POST", p+"/open", nil, 201, rProject+"/open")
	d := s.must("POST", p+"/nodes/"+id+"/duplicate", map[string]any{"x": 20, "y": 30}, 201, rNode+"/duplicate")
	dupID := d.body["node_id"].(string)
	props := d.body["properties"].(map[string]any)
	if props["future_property"] != "kept" || props["mac_address"] != nil {
		t.Errorf("properties of the copy: %v", props)
	}
	dupDir := filepath.Join(filepath.Dir(dir), dupID)
	if b, err := os.ReadFile(filepath.Join(dupDir, "notes", "extra.bin")); err != nil || string(b) != "\x00\x01\x02" {
		t.Errorf("notes/extra.bin of the copy: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dupDir, "startup.vpc")); err != nil || string(b) != "ip 10.0.0.9/24\n" {
		t.Errorf("startup.vpc of the copy: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dupDir, "elsewhere")); err == nil {
		t.Errorf("a link was copied")
	}
	s.must("POST", p+"/close", nil, 204, rProject+"/close")
	var copied map[string]any
	for _, n := range s.projectFile(mixedLab, "mixed-lab.gns3")["topology"].(map[string]any)["nodes"].([]any) {
		if n.(map[string]any)["node_id"] == dupID {
			copied = n.(map[string]any)
		}
	}
	if copied == nil {
		t.Fatal("the copy is not in the file")
	}
	if d := jsonDiff("", pc["future_member"], copied["future_member"]); len(d) > 0 || copied["application_id"] != nil {
		t.Errorf("the copy's entry: %v", copied)
	}
	if copied["properties"].(map[string]any)["future_property"] != "kept" {
		t.Errorf("the copy's properties in the file: %v", copied["properties"])
	}
}

// A capture's file and a snapshot are the server's: a client's project
// file write there would replace them (the agent then writes on into an
// unlinked file and the capture is lost), so it is refused and they stay.
func TestProjectFileWritesNeverReplaceCapturesOrSnapshots(t *testing.T) {
	l := newLab(t, true)
	p := "/v2/projects/" + l.project
	r := l.must("POST", l.linkPath("/start_capture"), map[string]any{"capture_file_name": "cap"}, 201, rStart)
	capPath := r.body["capture_file_path"].(string)
	for _, name := range []string{"project-files/captures/cap.pcap", "project-files/captures/new.pcap", "project-files//captures/./cap.pcap"} {
		r := l.do("POST", p+"/files/"+name, "OVERWRITTEN")
		if r.status != 403 || r.body["message"] == nil {
			t.Errorf("write %s: %d %s, want 403 with a message", name, r.status, r.raw)
		}
	}
	if data, _ := os.ReadFile(capPath); len(data) < 24 || string(data[:11]) == "OVERWRITTEN" {
		t.Fatalf("the running capture's file was replaced: %q", data)
	}
	if got := l.captureFiles(); slices.Contains(got, "new.pcap") {
		t.Fatalf("a client wrote into the captures folder: %v", got)
	}
	l.must("POST", l.linkPath("/stop_capture"), nil, 201, rStop)
	l.must("POST", p+"/nodes/stop", nil, 204, rNodes+"/stop")
	s := l.must("POST", p+"/snapshots", map[string]any{"name": "s1"}, 201, "/v2/projects/{project_id}/snapshots")
	snap := "snapshots/" + s.body["filename"].(string)
	before, err := os.ReadFile(filepath.Join(l.data, "projects", l.project, snap))
	if err != nil {
		t.Fatal(err)
	}
	if r := l.do("POST", p+"/files/"+snap, "OVERWRITTEN"); r.status != 403 {
		t.Errorf("write %s: %d %s, want 403", snap, r.status, r.raw)
	}
	if after, _ := os.ReadFile(filepath.Join(l.data, "projects", l.project, snap)); string(after) != string(before) {
		t.Fatalf("the snapshot was replaced: %q", after[:min(len(after), 20)])
	}
	// Reading them stays allowed (GNS3 serves any project file).
	if r := l.do("GET", p+"/files/project-files/captures/cap.pcap", nil); r.status != 200 || len(r.raw) < 24 {
		t.Fatalf("read the capture: %d", r.status)
	}
}

// A FIFO, a device or a symbolic link in a project's directory is refused
// at once with a 409 "not a regular file"; a read of a FIFO used to block
// its request for ever. Writing to such a name replaces it and writes
// nothing through it.
func TestSecurityProjectFileNotRegularIsRefused(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	p := "/v2/projects/" + l.project
	dir := filepath.Join(l.data, "projects", l.project)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(host, []byte("secret"), 0o600)
	os.Symlink(host, filepath.Join(dir, "out"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	for _, name := range []string{"pipe", "out", "zero"} {
		done := make(chan reply, 1)
		go func() { done <- l.do("GET", p+"/files/"+name, nil) }()
		select {
		case r := <-done:
			if r.status != 409 || !strings.Contains(string(r.raw), "not a regular file") || strings.Contains(string(r.raw), l.data) {
				t.Errorf("GET %s = %d %s, want 409 not a regular file", name, r.status, r.raw)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("GET %s did not answer in 10 s", name)
		}
	}
	for _, name := range []string{"pipe", "out"} {
		done := make(chan reply, 1)
		go func() { done <- l.do("POST", p+"/files/"+name, "mine") }()
		select {
		case r := <-done:
			if r.status != 201 {
				t.Errorf("POST %s = %d %s", name, r.status, r.raw)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("POST %s did not answer in 10 s", name)
		}
	}
	if data, _ := os.ReadFile(host); string(data) != "secret" {
		t.Fatalf("the host file became %q", data)
	}
}
