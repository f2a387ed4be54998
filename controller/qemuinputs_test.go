package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// These tests reproduce, through the real API, the ways a QEMU node's
// properties reached host files and programs: options QEMU reads or writes
// files with, a qemu_path naming any executable, image paths outside the
// images folder, a backing file named inside a user-written overlay, and
// qemu/img on project files.

// rawCall sends a JSON request and returns the status and body, for
// requests whose answer the test judges itself.
func (c *controller) rawCall(method, path string, body any) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestSecurityQemuOptionsOutsideTheAllowlistAreRefused: -icount's record
// and replay files and -global's property values name host files QEMU
// creates, truncates or reads; the options a denylist let through are
// refused with a 409 naming the option, and QEMU never runs them.
func TestSecurityQemuOptionsOutsideTheAllowlistAreRefused(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64")
	c := startController(t)
	base, _ := newQemuProject(t, c, "qemu-options")
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(t.TempDir(), "created-by-qemu")
	for _, opt := range []string{
		"-icount shift=auto,rr=record,rrfile=" + created,
		"-icount shift=auto,rr=record,rrfile=" + victim,
		"-icount shift=auto,rr=replay,rrfile=/etc/shadow",
		"-global driver=e1000,property=romfile,value=/etc/shadow",
		"-global e1000.romfile=/etc/shadow",
		"/etc/shadow", // a bare word is a disk image to QEMU
	} {
		code, body := c.rawCall("POST", base+"/nodes", map[string]any{"name": "evil", "node_type": "qemu", "compute_id": "local",
			"properties": map[string]any{"options": opt, "ram": 64}})
		if code == 409 && strings.Contains(body, "Forbidden additional option") {
			continue
		}
		msg := fmt.Sprintf("options %q: node create answered %d %s, want 409 Forbidden additional option", opt, code, body)
		if code == 201 {
			var n nodeReply
			json.Unmarshal([]byte(body), &n)
			scode, sbody := c.rawCall("POST", base+"/nodes/"+n.NodeID+"/start", nil)
			c.rawCall("POST", base+"/nodes/"+n.NodeID+"/stop", nil)
			msg += fmt.Sprintf("; start answered %d %.200s", scode, sbody)
		}
		t.Error(msg)
	}
	if _, err := os.Stat(created); err == nil {
		t.Errorf("QEMU created %s from a node's options", created)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep me" {
		t.Errorf("QEMU truncated %s from a node's options: it holds %q", victim, got)
	}
}

// TestSecurityQemuPathMustBeAQemuTheAgentFound imports an archive holding
// an executable script and points a node's qemu_path at it: the import
// drops the exec bit, and qemu_path is refused unless it is one of the
// QEMU binaries the compute lists; the script never runs.
func TestSecurityQemuPathMustBeAQemuTheAgentFound(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64")
	c := startController(t)
	var p struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "exported"}, 201, &p)
	resp, err := http.Get(c.url + "/v2/projects/" + p.ProjectID + "/export")
	if err != nil {
		t.Fatal(err)
	}
	exported, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	zr, err := zip.NewReader(bytes.NewReader(exported), int64(len(exported)))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran-as-qemu")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		w, err := zw.CreateHeader(&f.FileHeader)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := f.Open()
		io.Copy(w, rc)
		rc.Close()
	}
	h := &zip.FileHeader{Name: "project-files/x.sh", Method: zip.Deflate}
	h.SetMode(0o755)
	w, _ := zw.CreateHeader(h)
	fmt.Fprintf(w, "#!/bin/sh\nid > %s\n", marker)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	const id = "5e1c0a11-0000-4000-8000-00000000e7ec"
	resp, err = http.Post(c.url+"/v2/projects/"+id+"/import?name=imported", "application/octet-stream", &buf)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("import: %d", resp.StatusCode)
	}
	base := "/v2/projects/" + id
	c.call("POST", base+"/open", nil, 201, nil)
	script := filepath.Join(c.data, "projects", id, "project-files", "x.sh")
	if st, err := os.Stat(script); err != nil {
		t.Fatalf("the imported script: %v", err)
	} else if st.Mode()&0o111 != 0 {
		t.Errorf("the imported %s is %v: an import keeps exec bits", script, st.Mode())
	}
	os.Chmod(script, 0o755) // as if an exec bit came another way: qemu_path must still refuse it
	for _, path := range []string{script, "/bin/sh", "sh"} {
		code, body := c.rawCall("POST", base+"/nodes", map[string]any{"name": "evil", "node_type": "qemu", "compute_id": "local",
			"properties": map[string]any{"qemu_path": path, "ram": 64}})
		if code == 409 && strings.Contains(body, "qemu_path") {
			continue
		}
		msg := fmt.Sprintf("qemu_path %s: node create answered %d %s, want 409 naming qemu_path", path, code, body)
		if code == 201 {
			var n nodeReply
			json.Unmarshal([]byte(body), &n)
			c.rawCall("POST", base+"/nodes/"+n.NodeID+"/start", nil)
			c.rawCall("POST", base+"/nodes/"+n.NodeID+"/stop", nil)
			if out, err := os.ReadFile(marker); err == nil {
				msg += fmt.Sprintf("; start ran it: %s", bytes.TrimSpace(out))
			}
		}
		t.Error(msg)
	}
	var n nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "ok", "node_type": "qemu", "compute_id": "local",
		"properties": map[string]any{"qemu_path": "qemu-system-x86_64", "ram": 64}}, 201, &n)
	real, _ := exec.LookPath("qemu-system-x86_64")
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"qemu_path": real}}, 200, nil)
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"qemu_path": script}}, 409, nil)
}

// TestSecurityQemuImagePathsStayInTheImagesFolder sets a disk image to a
// host file outside the images folder with linked_clone off: the node is
// refused, so the file is never copied into the node's folder, read back
// through the files API or shipped by an export.
func TestSecurityQemuImagePathsStayInTheImagesFolder(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64", "qemu-img")
	c := startController(t)
	base, _ := newQemuProject(t, c, "qemu-paths")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("labtap-secret-"+fmt.Sprint(time.Now().UnixNano())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{secret, "/proc/self/environ", "../../" + filepath.Base(secret)} {
		code, body := c.rawCall("POST", base+"/nodes", map[string]any{"name": "evil", "node_type": "qemu", "compute_id": "local",
			"properties": map[string]any{"hda_disk_image": img, "linked_clone": false, "ram": 64}})
		if (code == 409 || code == 400) && strings.Contains(body, "images folder") {
			continue
		}
		msg := fmt.Sprintf("hda_disk_image %s: node create answered %d %s, want 400 or 409 about the images folder", img, code, body)
		if code == 201 {
			var n qemuNode
			json.Unmarshal([]byte(body), &n)
			c.rawCall("POST", base+"/nodes/"+n.NodeID+"/start", nil)
			c.rawCall("POST", base+"/nodes/"+n.NodeID+"/stop", nil)
			for _, name := range []string{"hda_disk", "hda_disk.qcow2"} {
				if code, got := c.rawCall("GET", base+"/files/project-files/qemu/"+n.NodeID+"/"+name, nil); code == 200 {
					msg += fmt.Sprintf("; the files API reads %d bytes of it back as %s", len(got), name)
				}
			}
		}
		t.Error(msg)
	}
	images := filepath.Join(c.data, "images", "QEMU")
	os.MkdirAll(images, 0o755)
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", filepath.Join(images, "base.qcow2"), "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	var n nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "inside", "node_type": "qemu", "compute_id": "local",
		"properties": map[string]any{"hda_disk_image": filepath.Join(images, "base.qcow2"), "linked_clone": false, "ram": 64}}, 201, &n)
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"cdrom_image": "/etc/shadow"}}, 409, nil)
	resp, err := http.Get(c.url + base + "/export?include_images=yes")
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(archive, mustRead(t, secret)) {
		t.Error("the export ships the secret")
	}
}

// TestSecurityQemuOverlayBackingFileIsNotFollowed writes, through the files
// API, a node's overlay whose backing file is a host file: the start is
// refused with a message about the backing file, and QEMU never opens the
// host file.
func TestSecurityQemuOverlayBackingFileIsNotFollowed(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64", "qemu-img")
	c := startController(t)
	base, _ := newQemuProject(t, c, "qemu-backing")
	images := filepath.Join(c.data, "images", "QEMU")
	os.MkdirAll(images, 0o755)
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", filepath.Join(images, "base.qcow2"), "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, bytes.Repeat([]byte("labtap-secret"), 100), 0o600)
	evil := filepath.Join(dir, "evil.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", "-F", "raw", "-b", secret, evil, "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	var n nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "r1", "node_type": "qemu", "compute_id": "local",
		"console_type": "none", "properties": map[string]any{"hda_disk_image": "base.qcow2", "ram": 64}}, 201, &n)
	req, _ := http.NewRequest("POST", c.url+base+"/files/project-files/qemu/"+n.NodeID+"/hda_disk.qcow2", bytes.NewReader(mustRead(t, evil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("writing the overlay: %d", resp.StatusCode)
	}
	code, body := c.rawCall("POST", base+"/nodes/"+n.NodeID+"/start", nil)
	if code != 409 || !strings.Contains(body, "backing") {
		msg := fmt.Sprintf("start with an overlay backed by a host file: %d %.300s, want 409 about the backing file", code, body)
		if pid := qemuPID(n.NodeID); pid != 0 {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			for _, fd := range fds {
				if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == secret {
					msg += "; QEMU holds " + secret + " open"
				}
			}
		}
		c.rawCall("POST", base+"/nodes/"+n.NodeID+"/stop", nil)
		t.Fatal(msg)
	}
	// The overlay the agent makes itself links to the base and starts.
	var n2 nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "r2", "node_type": "qemu", "compute_id": "local",
		"console_type": "none", "properties": map[string]any{"hda_disk_image": "base.qcow2", "ram": 64}}, 201, &n2)
	c.call("POST", base+"/nodes/"+n2.NodeID+"/start", nil, 200, nil)
	c.call("POST", base+"/nodes/"+n2.NodeID+"/stop", nil, 200, nil)
}

// TestSecurityQemuImgStaysInTheImagesFolderAndNodeDisks: qemu/img may not
// grow a project file, make images among captures or in the projects
// root, nor preallocate more than the disk holds; the images folder and a
// node's disks still work, and the replies have GNS3's shapes.
func TestSecurityQemuImgStaysInTheImagesFolderAndNodeDisks(t *testing.T) {
	testenv.RequireTools(t, "qemu-system-x86_64", "qemu-img")
	c := startController(t)
	base, _ := newQemuProject(t, c, "qemu-img")
	id := strings.TrimPrefix(base, "/v2/projects/")
	projectDir := filepath.Join(c.data, "projects", id)
	gns3 := filepath.Join(projectDir, "qemu-img.gns3")
	before := mustRead(t, gns3)
	for _, r := range []struct {
		method string
		body   map[string]any
	}{
		{"PUT", map[string]any{"path": gns3, "extend": 1}},
		{"POST", map[string]any{"path": filepath.Join(projectDir, "project-files", "captures", "x.qcow2"), "format": "qcow2", "size": 1}},
		{"POST", map[string]any{"path": filepath.Join(c.data, "projects", "x.qcow2"), "format": "qcow2", "size": 1}},
		{"POST", map[string]any{"path": filepath.Join(projectDir, "x.qcow2"), "format": "qcow2", "size": 1}},
	} {
		for _, route := range []string{"/v2/compute/qemu/img", "/v2/computes/local/qemu/img"} {
			if code, body := c.rawCall(r.method, route, r.body); code != 403 {
				t.Errorf("%s %s %v: %d %s, want 403", r.method, route, r.body, code, body)
			}
		}
	}
	if got := mustRead(t, gns3); !bytes.Equal(got, before) {
		t.Errorf("qemu/img changed %s: %d bytes, were %d", gns3, len(got), len(before))
	}
	for _, f := range []string{filepath.Join(projectDir, "project-files", "captures", "x.qcow2"), filepath.Join(c.data, "projects", "x.qcow2"), filepath.Join(projectDir, "x.qcow2")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("qemu/img made %s", f)
		}
	}
	if code, body := c.rawCall("POST", "/v2/computes/local/qemu/img", map[string]any{"path": "huge.raw", "format": "raw", "size": 2 << 20, "preallocation": "full"}); code/100 != 4 {
		t.Errorf("a 2 TiB preallocated disk: %d %s, want a refusal", code, body)
	}
	if code, body := c.rawCall("POST", "/v2/computes/local/qemu/img", map[string]any{"path": "small.qcow2", "format": "qcow2", "size": 4}); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("create in the images folder: %d %q, want 200 {}", code, body)
	}
	if code, body := c.rawCall("PUT", "/v2/computes/local/qemu/img", map[string]any{"path": "small.qcow2", "extend": 4}); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("extend in the images folder: %d %q, want 200 {}", code, body)
	}
	var n nodeReply
	c.call("POST", base+"/nodes", map[string]any{"name": "r1", "node_type": "qemu", "compute_id": "local",
		"properties": map[string]any{"ram": 64}}, 201, &n)
	disk := filepath.Join(projectDir, "project-files", "qemu", n.NodeID, "hdb_disk.qcow2")
	if code, body := c.rawCall("POST", "/v2/compute/qemu/img", map[string]any{"path": disk, "format": "qcow2", "size": 4}); code != 201 {
		t.Errorf("create a node's disk: %d %s, want 201", code, body)
	}
	var bins []struct {
		Path    string `json:"path"`
		Version string `json:"version"`
	}
	c.call("GET", "/v2/computes/local/qemu/img-binaries", nil, 200, &bins)
	if len(bins) == 0 || bins[0].Version == "" {
		t.Errorf("img-binaries lists %+v, want qemu-img with its version", bins)
	}
}
