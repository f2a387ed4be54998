package main

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// qemuNode is a QEMU node as the controller answers it.
type qemuNode struct {
	nodeReply
	ConsoleType   string         `json:"console_type"`
	NodeDirectory string         `json:"node_directory"`
	Properties    map[string]any `json:"properties"`
}

// newQemuProject opens a project and follows its notifications.
func newQemuProject(t *testing.T, c *controller, name string) (string, *syncBuffer) {
	t.Helper()
	var project struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": name}, 201, &project)
	base := "/v2/projects/" + project.ProjectID
	return base, followNotifications(t, c.url+base+"/notifications")
}

// processesWith lists the PIDs of processes whose command line holds all
// of words.
func processesWith(words ...string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		keep := len(cmdline) > 0
		for _, w := range words {
			keep = keep && bytes.Contains(cmdline, []byte(w))
		}
		if keep {
			out = append(out, pid)
		}
	}
	return out
}

// niceOfTask reads the nice value of a thread from /proc.
func niceOfTask(t *testing.T, pid int, tid string) int {
	t.Helper()
	stat := string(mustRead(t, fmt.Sprintf("/proc/%d/task/%s/stat", pid, tid)))
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	n, err := strconv.Atoi(fields[16]) // field 19 of stat, counted after the name
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQemuVNCConsoleConfigDiskPriorityThrottlingMD5AndRAMWarning runs a
// VM with no OS (QEMU's BIOS finds nothing to boot) and checks what the
// host sees: the VNC console answers RFB on the node's console port; the
// config disk is a FAT disk made from the node's configs/ files, and what
// is written on it comes back there at stop; every QEMU thread runs at
// the nice value of process_priority; cpulimit holds it to cpu_throttling
// and ends with it; the CD image's md5 is reported. A VM asking for more
// RAM than the host has is announced with GNS3's warning.
func TestQemuVNCConsoleConfigDiskPriorityThrottlingMD5AndRAMWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs QEMU")
	}
	testenv.RequireTools(t, "qemu-system-x86_64", "qemu-img", "cpulimit", "mkfs.fat", "mcopy", "mtype")
	c := startController(t)
	images := filepath.Join(c.data, "images", "QEMU")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 64<<10)
	rand.Read(blob)
	if err := os.WriteFile(filepath.Join(images, "blob.iso"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	base, events := newQemuProject(t, c, "qemu-props")
	var vm qemuNode
	c.call("POST", base+"/nodes", map[string]any{"name": "box", "node_type": "qemu", "compute_id": "local", "console_type": "vnc",
		"properties": map[string]any{"ram": 64, "cdrom_image": "blob.iso", "create_config_disk": true,
			"process_priority": "very low", "cpu_throttling": 50}}, 201, &vm)
	if want := fmt.Sprintf("%x", md5.Sum(blob)); vm.Properties["cdrom_image_md5sum"] != want || vm.Properties["hda_disk_image_md5sum"] != nil {
		t.Fatalf("md5 sums cdrom %v hda %v, want %s and null", vm.Properties["cdrom_image_md5sum"], vm.Properties["hda_disk_image_md5sum"], want)
	}
	if vm.ConsoleType != "vnc" || vm.Console < 5900 {
		t.Fatalf("console %s %d, want vnc on 5900 or above", vm.ConsoleType, vm.Console)
	}
	nodePath := base + "/nodes/" + vm.NodeID
	startup := "hostname box\n" + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n"
	resp, err := http.Post(c.url+nodePath+"/files/configs/startup.cfg", "application/octet-stream", strings.NewReader(startup))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("writing configs/startup.cfg: %d", resp.StatusCode)
	}

	c.call("POST", nodePath+"/start", nil, 200, &vm)
	pid := qemuPID(vm.NodeID)
	if pid == 0 {
		t.Fatal("no QEMU process")
	}
	t.Cleanup(func() {
		if !processGone(pid) {
			killPID(pid)
		}
	})
	// The console speaks RFB (QEMU's VNC server): its greeting first.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(vm.ConsoleHost, strconv.Itoa(vm.Console)), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(conn, greeting); err != nil || string(greeting) != "RFB 003.008\n" {
		t.Fatalf("VNC console greeting %q (%v), want RFB 003.008", greeting, err)
	}
	conn.Close()

	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if n := niceOfTask(t, pid, task.Name()); n != 19 {
			t.Errorf("QEMU thread %s runs at nice %d, want 19 (very low)", task.Name(), n)
		}
	}
	limiters := processesWith("cpulimit", fmt.Sprintf("--pid=%d", pid), "--limit=50")
	if len(limiters) != 1 {
		t.Fatalf("%d cpulimit processes on QEMU (pid %d), want 1", len(limiters), pid)
	}

	// The config disk holds configs/; the guest's writes come back.
	img := filepath.Join(vm.NodeDirectory, "config.img")
	if out, err := exec.Command("mtype", "-i", img, "::/startup.cfg").Output(); err != nil || string(out) != startup {
		t.Fatalf("config disk's startup.cfg: %q (%v), want %q", out, err, startup)
	}
	written := filepath.Join(t.TempDir(), "fromguest.txt")
	if err := os.WriteFile(written, []byte("written in the guest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mcopy", "-i", img, written, "::/fromguest.txt").CombinedOutput(); err != nil {
		t.Fatalf("mcopy: %s", out)
	}
	c.call("POST", nodePath+"/stop", nil, 200, &vm)
	if !processGone(pid) || !processGone(limiters[0]) {
		t.Fatalf("after stop: QEMU gone %v, cpulimit gone %v", processGone(pid), processGone(limiters[0]))
	}
	resp, err = http.Get(c.url + nodePath + "/files/configs/fromguest.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "written in the guest\n" {
		t.Fatalf("configs/fromguest.txt after stop: %d %q", resp.StatusCode, got)
	}

	// More RAM than the host has: GNS3's warning, whether QEMU then
	// manages to start or not.
	var total int64
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			total, _ = strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	f.Close()
	want := total/1024*2 + 1024
	var big qemuNode
	c.call("POST", base+"/nodes", map[string]any{"name": "big", "node_type": "qemu", "compute_id": "local", "console_type": "none",
		"properties": map[string]any{"ram": want}}, 201, &big)
	req, _ := http.NewRequest("POST", c.url+base+"/nodes/"+big.NodeID+"/start", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	re := regexp.MustCompile(fmt.Sprintf(`"big\\" requires %dMB of RAM to run but there is only \d+MB - \d+%% of RAM left on`, want))
	deadline := time.Now().Add(30 * time.Second)
	for !re.MatchString(events.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no RAM warning for a %d MB VM; notifications:\n%s", want, events.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.call("POST", base+"/close", nil, 204, nil)
}

func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// TestQemuUEFIAndTPMGuest boots the tiny guest with uefi and tpm: the
// guest sees EFI firmware and a TPM 2.0, swtpm runs with its control
// socket in the node's private runtime folder and ends with the VM; a
// bios image with uefi is refused.
func TestQemuUEFIAndTPMGuest(t *testing.T) {
	guest := tinyGuest(t)
	testenv.RequireTools(t, "swtpm")
	if _, err := os.Stat("/usr/share/OVMF/OVMF_CODE_4M.fd"); err != nil {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_TOOLS", "no OVMF (Debian package ovmf)")
	}
	c := startController(t)
	copyImages(t, c, guest)
	base, _ := newQemuProject(t, c, "qemu-uefi")
	var vm qemuNode
	c.call("POST", base+"/nodes", map[string]any{"name": "efi", "node_type": "qemu", "compute_id": "local", "properties": map[string]any{
		"kernel_image": "vmlinuz", "initrd": "initrd.img", "ram": 256, "uefi": true, "tpm": true,
		"kernel_command_line": "console=ttyS0 no_timer_check labtap.name=efi",
	}}, 201, &vm)
	nodePath := base + "/nodes/" + vm.NodeID
	var e struct {
		Message string `json:"message"`
	}
	c.call("PUT", nodePath, map[string]any{"properties": map[string]any{"bios_image": "vmlinuz"}}, 409, &e)
	if !strings.Contains(e.Message, "Cannot use a bios image and the UEFI boot mode at the same time") {
		t.Fatalf("bios image with uefi: %q", e.Message)
	}
	c.call("POST", nodePath+"/start", nil, 200, &vm)
	con := dialGuest(t, vm.ConsoleHost, vm.Console)
	con.expect(t, 0, regexp.MustCompile(`labtap-guest ready efi`), 8*time.Minute) // OVMF under TCG on a loaded host is slow
	if out := con.run(t, "test -d /sys/firmware/efi && echo efi", time.Minute); strings.TrimSpace(out) != "efi" {
		t.Fatalf("the guest sees no EFI firmware: %q", out)
	}
	if out := con.run(t, "cat /sys/class/tpm/tpm0/tpm_version_major", time.Minute); strings.TrimSpace(out) != "2" {
		t.Fatalf("the guest's TPM version: %q, want 2", out)
	}
	swtpm := processesWith("swtpm", "socket", "--tpm2", vm.NodeID+"/swtpm.sock")
	if len(swtpm) != 1 {
		t.Fatalf("%d swtpm processes with a control socket in the node's runtime folder, want 1", len(swtpm))
	}
	cmdline := string(mustRead(t, fmt.Sprintf("/proc/%d/cmdline", swtpm[0])))
	sock := cmdline[strings.Index(cmdline, "path=")+5:]
	sock = sock[:strings.IndexByte(sock, 0)]
	if st, err := os.Stat(filepath.Dir(sock)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("swtpm socket folder %s: %v %v, want private (0700)", filepath.Dir(sock), st.Mode(), err)
	}
	c.call("POST", nodePath+"/stop", nil, 200, &vm)
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(swtpm[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("swtpm (pid %d) outlived its VM", swtpm[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, f := range []string{"OVMF_VARS.fd", "tpm-state/tpm2-00.permall"} {
		if _, err := os.Stat(filepath.Join(vm.NodeDirectory, f)); err != nil {
			t.Errorf("the node keeps no %s: %v", f, err)
		}
	}
	c.call("POST", base+"/close", nil, 204, nil)
}

// qemuImgInfo returns a disk's virtual size and snapshot list.
func qemuImgInfo(t *testing.T, disk string) (size int64, snapshots string) {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", disk).Output()
	if err != nil {
		t.Fatalf("qemu-img info %s: %v", disk, err)
	}
	m := regexp.MustCompile(`"virtual-size": (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("qemu-img info %s: %s", disk, out)
	}
	size, _ = strconv.ParseInt(string(m[1]), 10, 64)
	return size, string(out)
}

// TestQemuDiskRoutesResizeDiskAndSavedState makes a disk with the web UI's
// qemu-img route, grows it, reads images back through the /v2/compute
// aliases, grows a node's own disk with resize_disk (never the base), and
// runs a guest whose on_close is save_vm_state: what it held in memory is
// there again after a stop and a start.
func TestQemuDiskRoutesResizeDiskAndSavedState(t *testing.T) {
	guest := tinyGuest(t)
	c := startController(t)
	copyImages(t, c, guest)
	images := filepath.Join(c.data, "images", "QEMU")
	var e struct {
		Message string `json:"message"`
	}
	c.call("POST", "/v2/compute/qemu/img", map[string]any{"qemu_img": "/usr/bin/qemu-img", "path": "disk.qcow2", "format": "qcow2", "size": 16}, 201, nil)
	c.call("POST", "/v2/computes/local/qemu/img", map[string]any{"path": "disk.qcow2", "format": "qcow2", "size": 16}, 409, &e)
	if !strings.Contains(e.Message, "already exists") {
		t.Fatalf("creating an existing disk: %q", e.Message)
	}
	for _, bad := range []string{"../escape.qcow2", "/tmp/labtap-escape.qcow2", filepath.Join(c.data, "escape.qcow2")} {
		c.call("POST", "/v2/compute/qemu/img", map[string]any{"path": bad, "format": "qcow2", "size": 1}, 403, nil)
	}
	c.call("POST", "/v2/compute/qemu/img", map[string]any{"path": "x.qcow2", "format": "qcow2", "size": 1 << 30}, 400, nil)
	c.call("PUT", "/v2/computes/local/qemu/img", map[string]any{"path": "disk.qcow2", "extend": 8}, 200, nil)
	if size, _ := qemuImgInfo(t, filepath.Join(images, "disk.qcow2")); size != 24<<20 {
		t.Fatalf("disk.qcow2 is %d bytes after growing 16 MB by 8, want %d", size, 24<<20)
	}
	for _, f := range []string{"labtap-escape.qcow2", "escape.qcow2"} {
		if _, err := os.Stat(filepath.Join("/tmp", f)); err == nil {
			t.Fatalf("a disk was made outside the images folder: /tmp/%s", f)
		}
	}
	var list []struct {
		Path string `json:"path"`
	}
	c.call("GET", "/v2/compute/qemu/images", nil, 200, &list)
	if fmt.Sprint(list) != "[{disk.qcow2} {initrd.img} {vmlinuz}]" {
		t.Fatalf("/v2/compute/qemu/images lists %v", list)
	}
	resp, err := http.Get(c.url + "/v2/compute/qemu/images/vmlinuz")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, mustRead(t, filepath.Join(images, "vmlinuz"))) {
		t.Fatalf("reading vmlinuz back: %d, %d bytes", resp.StatusCode, len(got))
	}
	var ep struct {
		Endpoint string `json:"endpoint"`
	}
	c.call("GET", "/v2/computes/endpoint/local/qemu/images/new.qcow2", nil, 200, &ep)
	if !strings.HasSuffix(ep.Endpoint, "/v2/computes/local/qemu/images/new.qcow2") || !strings.HasPrefix(ep.Endpoint, "http://") {
		t.Fatalf("upload endpoint %q", ep.Endpoint)
	}

	base, _ := newQemuProject(t, c, "qemu-disks")
	var vm qemuNode
	c.call("POST", base+"/nodes", map[string]any{"name": "disk", "node_type": "qemu", "compute_id": "local", "properties": map[string]any{
		"kernel_image": "vmlinuz", "initrd": "initrd.img", "ram": 128, "hda_disk_image": "disk.qcow2", "hda_disk_interface": "ide",
		"on_close": "save_vm_state", "kernel_command_line": "console=ttyS0 no_timer_check labtap.name=disk",
	}}, 201, &vm)
	nodePath := base + "/nodes/" + vm.NodeID
	c.call("POST", nodePath+"/resize_disk", map[string]any{"drive_name": "hda", "extend": 8}, 201, nil)
	c.call("POST", nodePath+"/resize_disk", map[string]any{"drive_name": "hdz", "extend": 8}, 400, nil)
	c.call("POST", nodePath+"/resize_disk", map[string]any{"drive_name": "hda", "extend": 0}, 400, nil)
	c.call("POST", nodePath+"/resize_disk", map[string]any{"drive_name": "hdb", "extend": 8}, 409, nil)
	overlay := filepath.Join(vm.NodeDirectory, "hda_disk.qcow2")
	if size, _ := qemuImgInfo(t, overlay); size != 32<<20 {
		t.Fatalf("the node's hda is %d bytes after resize_disk +8 MB, want %d", size, 32<<20)
	}
	if size, _ := qemuImgInfo(t, filepath.Join(images, "disk.qcow2")); size != 24<<20 {
		t.Fatalf("resize_disk changed the base image: %d bytes", size)
	}

	c.call("POST", nodePath+"/start", nil, 200, &vm)
	c.call("POST", nodePath+"/resize_disk", map[string]any{"drive_name": "hda", "extend": 8}, 409, &e)
	if !strings.Contains(e.Message, "Cannot resize hda while the VM is running") {
		t.Fatalf("resize_disk while running: %q", e.Message)
	}
	con := dialGuest(t, vm.ConsoleHost, vm.Console)
	con.expect(t, 0, regexp.MustCompile(`labtap-guest ready disk`), 3*time.Minute)
	marker := "saved-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	con.run(t, "echo "+marker+" > /tmp/marker", time.Minute)
	c.call("POST", nodePath+"/stop", nil, 200, &vm)
	if _, info := qemuImgInfo(t, overlay); !strings.Contains(info, "GNS3_SAVED_STATE") {
		t.Fatalf("no saved state in the node's disk after a save_vm_state stop:\n%s", info)
	}
	c.call("POST", nodePath+"/start", nil, 200, &vm)
	con = dialGuest(t, vm.ConsoleHost, vm.Console)
	if out := con.run(t, "cat /tmp/marker", 2*time.Minute); strings.TrimSpace(out) != marker {
		t.Fatalf("after a restart the guest's /tmp/marker is %q, want %q (its saved state)", out, marker)
	}
	// With another on_close the saved state is dropped at the next start.
	c.call("POST", nodePath+"/stop", nil, 200, &vm)
	c.call("PUT", nodePath, map[string]any{"properties": map[string]any{"on_close": "power_off"}}, 200, nil)
	c.call("POST", nodePath+"/start", nil, 200, &vm)
	if _, info := qemuImgInfo(t, overlay); strings.Contains(info, "GNS3_SAVED_STATE") {
		t.Fatalf("the saved state survived a start with on_close power_off:\n%s", info)
	}
	c.call("POST", base+"/close", nil, 204, nil)
}
