package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file holds the QEMU node properties beyond the command line's
// core (nodes-docker-qemu.md 4.1, 4.7): TPM (swtpm), UEFI (OVMF), the
// config disk, CPU throttling (cpulimit), process priority, the saved VM
// state of on_close save_vm_state, the images' md5 sums and the RAM check.

// savedState is the name of the snapshot on_close save_vm_state keeps in
// the node's qcow2 overlays (GNS3's name, so a GNS3 project's saved state
// resumes here too).
const savedState = "GNS3_SAVED_STATE"

// qemuImageProps are the properties naming image files, with their md5
// sum members (<name>_md5sum).
var qemuImageProps = []string{"hda_disk_image", "hdb_disk_image", "hdc_disk_image", "hdd_disk_image", "cdrom_image", "bios_image", "initrd", "kernel_image"}

func (p QemuProps) imageProp(name string) string {
	switch name {
	case "hda_disk_image":
		return p.HDA
	case "hdb_disk_image":
		return p.HDB
	case "hdc_disk_image":
		return p.HDC
	case "hdd_disk_image":
		return p.HDD
	case "cdrom_image":
		return p.CDROM
	case "bios_image":
		return p.BIOS
	case "initrd":
		return p.Initrd
	case "kernel_image":
		return p.Kernel
	}
	return ""
}

// imageMD5s returns the <image>_md5sum members: the md5 of each image
// file set, null when none is set or the file is missing (GNS3).
func (q *Qemu) imageMD5s() map[string]any {
	out := make(map[string]any, len(qemuImageProps))
	for _, k := range qemuImageProps {
		out[k+"_md5sum"] = nil
		name := q.cfg.Props.imageProp(k)
		if name == "" {
			continue
		}
		path, err := q.image(name)
		if err != nil {
			continue
		}
		if sum, err := FileMD5(path); err == nil {
			out[k+"_md5sum"] = sum
		}
	}
	return out
}

// FileMD5 returns a file's md5 (hex), from its cache <file>.md5sum when
// the cache is not older than the file (GNS3's cache format: 32 hex
// digits), else computed and cached.
func FileMD5(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	cache := path + ".md5sum"
	if st, err := os.Stat(cache); err == nil && !st.ModTime().Before(info.ModTime()) {
		if b, err := os.ReadFile(cache); err == nil {
			if s := strings.TrimSpace(string(b)); len(s) == 32 {
				return s, nil
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	m := md5.New()
	if _, err := io.Copy(m, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(m.Sum(nil))
	_ = os.WriteFile(cache, []byte(sum), 0o644) // a cache: failing to write it costs time only
	return sum, nil
}

// ramWarning is GNS3's warning when the VM wants more RAM than the host
// has available, "" otherwise.
func ramWarning(name string, ramMB int) string {
	avail, total, err := memInfo()
	if err != nil || total == 0 || int64(ramMB) <= avail {
		return ""
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%q requires %dMB of RAM to run but there is only %dMB - %d%% of RAM left on %q",
		name, ramMB, avail, avail*100/total, host)
}

// memInfo reads MemAvailable and MemTotal, in MB.
func memInfo() (avail, total int64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemAvailable:":
			avail = kb / 1024
		case "MemTotal:":
			total = kb / 1024
		}
	}
	return avail, total, sc.Err()
}

// niceOf maps GNS3's process_priority to a nice value ("" is GNS3's node
// default, low).
func niceOf(priority string) int {
	switch priority {
	case "realtime":
		return -20
	case "very high":
		return -15
	case "high":
		return -5
	case "normal":
		return 0
	case "very low":
		return 19
	}
	return 5
}

// renice sets the nice value of every thread of a process (setpriority
// on a pid changes its main thread only). QEMU is still paused (-S) when
// this runs; the threads it makes later inherit it. Linux derives the
// I/O priority of a thread from its nice value unless it was set, so the
// I/O priority follows.
func renice(pid, nice int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startThrottle runs cpulimit on the QEMU process (GNS3's cpu_throttling:
// percent of one CPU, up to 800). --lazy makes it end with QEMU.
func (q *Qemu) startThrottle(pid int) (*child, error) {
	bin, err := exec.LookPath("cpulimit")
	if err != nil {
		return nil, errors.New("Could not throttle CPU: cpulimit is not installed (Debian package cpulimit)")
	}
	cmd := exec.Command(bin, "--lazy", "--pid="+strconv.Itoa(pid), "--limit="+strconv.Itoa(q.cfg.Props.CPUThrottling))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c, err := startChild(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("Could not throttle CPU: %v", err)
	}
	return c, nil
}

// swtpmVersion matches "TPM emulator version 0.7.1".
var swtpmVersion = regexp.MustCompile(`version (\d+)\.(\d+)`)

// startTPM runs swtpm for the VM: a TPM 2.0 whose state lives in the
// node's folder (tpm-state), its control socket in the private runtime
// folder. It ends when QEMU disconnects (--terminate). GNS3 wants swtpm
// 0.8; Debian 12 ships 0.7.1, which serves QEMU 7.2 well, so 0.7 is the
// floor here.
func (q *Qemu) startTPM(ctx context.Context) (*child, string, error) {
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		return nil, "", errors.New("swtpm is required for the TPM: install it (Debian package swtpm)")
	}
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	m := swtpmVersion.FindSubmatch(out)
	if m == nil {
		return nil, "", fmt.Errorf("swtpm: no version in %q", bytes.TrimSpace(out))
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major == 0 && minor < 7 {
		return nil, "", fmt.Errorf("swtpm version 0.7.0 or above must be installed (found %s.%s)", m[1], m[2])
	}
	state := filepath.Join(q.cfg.Dir, "tpm-state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, "", fmt.Errorf("swtpm: %w", err)
	}
	sock := filepath.Join(q.cfg.RuntimeDir, "swtpm.sock")
	os.Remove(sock)
	cmd := exec.Command(bin, "socket", "--tpm2", "--terminate",
		"--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+sock,
		"--log", "file="+filepath.Join(q.cfg.Dir, "swtpm.log")+",level=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c, err := startChild(cmd, nil)
	if err != nil {
		return nil, "", fmt.Errorf("swtpm: %w", err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(sock); err == nil {
			return c, sock, nil
		}
		select {
		case <-c.exited:
			return nil, "", fmt.Errorf("swtpm exited: %s", bytes.TrimSpace(stderr.Bytes()))
		case <-deadline.C:
			c.end(0)
			return nil, "", errors.New("swtpm opened no control socket within 10s")
		case <-tick.C:
		}
	}
}

// ovmfFiles are the OVMF firmware pairs searched, code and variables.
var ovmfFiles = [][2]string{{"OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"}, {"OVMF_CODE.fd", "OVMF_VARS.fd"}}

// ovmfDirs are where OVMF is looked for after the images folder.
var ovmfDirs = []string{"/usr/share/OVMF", "/usr/share/edk2/ovmf", "/usr/share/qemu"}

// uefiArgs gives the UEFI firmware as GNS3 does: OVMF's code read-only
// and a per-node copy of its variables (made once, kept across starts),
// both as pflash.
func (q *Qemu) uefiArgs() ([]string, error) {
	dirs := append([]string{q.cfg.ImagesDir}, ovmfDirs...)
	for _, pair := range ovmfFiles {
		for _, d := range dirs {
			code, vars := filepath.Join(d, pair[0]), filepath.Join(d, pair[1])
			if !isFile(code) || !isFile(vars) {
				continue
			}
			nodeVars := filepath.Join(q.cfg.Dir, "OVMF_VARS.fd")
			if !isFile(nodeVars) {
				if err := copyFile(vars, nodeVars); err != nil {
					return nil, fmt.Errorf("Cannot copy the UEFI variables %s: %v", vars, err)
				}
			}
			return []string{
				"-drive", "if=pflash,format=raw,readonly=on,file=" + commas(code),
				"-drive", "if=pflash,format=raw,file=" + commas(nodeVars),
			}, nil
		}
	}
	return nil, errors.New("The UEFI boot mode needs OVMF (OVMF_CODE_4M.fd and OVMF_VARS_4M.fd): install the ovmf package or put them in the images folder")
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// configDir is where a node's config disk files live between runs: the
// node folder's configs/, reachable through the node files routes.
func (q *Qemu) configDir() string { return filepath.Join(q.cfg.Dir, "configs") }

// configImage is the config disk's file.
func (q *Qemu) configImage() string { return filepath.Join(q.cfg.Dir, "config.img") }

// maxConfigDisk bounds the config disk (its files are configurations).
const maxConfigDisk = 256 << 20

// buildConfigDisk makes the config disk (create_config_disk, when no hdd
// image is set): a FAT file system holding the node's configs/ files,
// made afresh at each start with dosfstools and mtools, as GNS3 does.
func (q *Qemu) buildConfigDisk(ctx context.Context) (string, error) {
	for _, tool := range []string{"mkfs.fat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("The config disk needs %s: install dosfstools and mtools", tool)
		}
	}
	dir := q.configDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			size += info.Size() + 4096
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	size = max(2*size, 16<<20)
	if size > maxConfigDisk {
		return "", fmt.Errorf("config disk: the files of configs/ take over %d MB", maxConfigDisk>>21)
	}
	img := q.configImage()
	os.Remove(img)
	if out, err := exec.CommandContext(ctx, "mkfs.fat", "-C", "-n", "CONFIG", img, strconv.FormatInt(size>>10, 10)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("config disk: mkfs.fat: %s", bytes.TrimSpace(out))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("config disk: %w", err)
	}
	if len(entries) > 0 {
		args := []string{"-i", img, "-s", "-m", "-o", "-Q", "--"}
		for _, e := range entries {
			args = append(args, filepath.Join(dir, e.Name()))
		}
		args = append(args, "::/")
		if out, err := exec.CommandContext(ctx, "mcopy", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("config disk: mcopy: %s", bytes.TrimSpace(out))
		}
	}
	return img, nil
}

// exportConfigDisk copies the config disk's files back to configs/ once
// the VM is gone (what the guest wrote there is kept).
func (q *Qemu) exportConfigDisk() error {
	img := q.configImage()
	if !isFile(img) {
		return nil
	}
	out, err := exec.Command("mdir", "-i", img, "-b", "::/").Output()
	if err != nil {
		return fmt.Errorf("config disk: mdir: %v", err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			files = append(files, l)
		}
	}
	if len(files) == 0 {
		return nil
	}
	args := append([]string{"-i", img, "-s", "-m", "-n", "-o", "-Q", "--"}, files...)
	args = append(args, q.configDir())
	if out, err := exec.Command("mcopy", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("config disk: mcopy: %s", bytes.TrimSpace(out))
	}
	return nil
}

// qemuImg finds qemu-img: next to the QEMU binary, else in PATH.
func (q *Qemu) qemuImg() (string, error) {
	if img, err := exec.LookPath(filepath.Join(filepath.Dir(q.binary), "qemu-img")); err == nil {
		return img, nil
	}
	if img, err := exec.LookPath("qemu-img"); err == nil {
		return img, nil
	}
	return "", errors.New("Could not find qemu-img (install qemu-utils)")
}

// overlays are the node's qcow2 disks that exist (linked clones).
func (q *Qemu) overlays() []string {
	var out []string
	for _, d := range []string{"hda", "hdb", "hdc", "hdd"} {
		p := filepath.Join(q.cfg.Dir, d+"_disk.qcow2")
		if isFile(p) {
			out = append(out, p)
		}
	}
	return out
}

// hasSavedState reports whether a disk holds the saved VM state.
func hasSavedState(ctx context.Context, img, disk string) bool {
	out, err := exec.CommandContext(ctx, img, "snapshot", "-l", "-U", disk).Output()
	return err == nil && bytes.Contains(out, []byte(savedState))
}

// savedStateArgs gives -loadvm when on_close is save_vm_state and the
// node's disks hold a saved state; with any other on_close a saved state
// is deleted, so a later save_vm_state never resumes an old one (GNS3).
func (q *Qemu) savedStateArgs(ctx context.Context) []string {
	disks := q.overlays()
	if len(disks) == 0 {
		return nil
	}
	img, err := q.qemuImg()
	if err != nil {
		return nil
	}
	found := false
	for _, d := range disks {
		if !hasSavedState(ctx, img, d) {
			continue
		}
		found = true
		if q.cfg.Props.OnClose != "save_vm_state" {
			if out, err := exec.CommandContext(ctx, img, "snapshot", "-d", savedState, d).CombinedOutput(); err != nil {
				q.cfg.OnWarning(fmt.Sprintf("%s: could not delete the saved state of %s: %s", q.cfg.Name, filepath.Base(d), bytes.TrimSpace(out)))
			}
		}
	}
	if found && q.cfg.Props.OnClose == "save_vm_state" {
		return []string{"-loadvm", savedState}
	}
	return nil
}

// saveState pauses the VM and saves its state into its qcow2 disks
// (HMP savevm through QMP: QEMU 7.2 has no QMP command of its own for it
// outside jobs). QEMU words its failures in the command's reply.
func (q *Qemu) saveState(p *qemuProc) error {
	if _, err := p.mon.Run([]byte(`{"execute": "stop"}`)); err != nil {
		return err
	}
	cmd, _ := json.Marshal(map[string]any{"execute": "human-monitor-command", "arguments": map[string]any{"command-line": "savevm " + savedState}})
	raw, err := p.mon.Run(cmd)
	if err != nil {
		return err
	}
	var reply struct {
		Return string `json:"return"`
	}
	_ = json.Unmarshal(raw, &reply)
	if s := strings.TrimSpace(reply.Return); s != "" {
		return errors.New(s)
	}
	return nil
}

// MaxDiskExtendMB bounds one resize_disk or qemu-img resize: 2 TiB.
const MaxDiskExtendMB = 2 << 20

// ResizeDisk grows one of the node's disks by extendMB (GNS3's
// resize_disk): the node's own disk (its overlay, made first when it is
// a linked clone and was never started), never the base image. The VM
// must be stopped.
func (q *Qemu) ResizeDisk(ctx context.Context, drive string, extendMB int) error {
	q.ops.Lock()
	defer q.ops.Unlock()
	q.mu.Lock()
	running := q.proc != nil
	q.mu.Unlock()
	if running {
		return fmt.Errorf("Cannot resize %s while the VM is running", drive)
	}
	if extendMB < 1 || extendMB > MaxDiskExtendMB {
		return fmt.Errorf("extend must be from 1 to %d MB", MaxDiskExtendMB)
	}
	var name string
	switch drive {
	case "hda":
		name = q.cfg.Props.HDA
	case "hdb":
		name = q.cfg.Props.HDB
	case "hdc":
		name = q.cfg.Props.HDC
	case "hdd":
		name = q.cfg.Props.HDD
	default:
		return fmt.Errorf("Invalid drive name %q: hda, hdb, hdc or hdd", drive)
	}
	if name == "" {
		return fmt.Errorf("%s has no disk image to resize", drive)
	}
	base, err := q.image(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(q.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	disk, err := q.nodeDisk(drive, base)
	if err != nil {
		return err
	}
	img, err := q.qemuImg()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, img, "resize", disk, fmt.Sprintf("+%dM", extendMB)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("Could not resize %s: %s", drive, bytes.TrimSpace(out))
	}
	return nil
}
