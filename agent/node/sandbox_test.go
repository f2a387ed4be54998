package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labtap/labtap/internal/sandbox"
	"github.com/labtap/labtap/internal/testenv"
)

func TestMain(m *testing.M) {
	sandbox.Main() // this binary starts confined nodes: it is their launcher
	os.Exit(m.Run())
}

// newSandbox returns a sandbox with the layers this host allows.
func newSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(t.Context(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox layers: %s; missing: %v", s.Layers(), s.Layers().Missing)
	return s
}

// hostTmpName is a name in the host's /tmp that nothing uses.
func hostTmpName(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	name := filepath.Join("/tmp", "labtap-sec-"+hex.EncodeToString(b))
	t.Cleanup(func() { os.Remove(name) })
	return name
}

// waitFile waits for a file a node writes, and returns its content.
func waitFile(t testing.TB, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			time.Sleep(50 * time.Millisecond) // the shell may still be writing
			b, _ = os.ReadFile(path)
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkUnprivileged checks what a node's "id -u > uid" wrote: a uid
// other than root's, where the agent can change uid.
func checkUnprivileged(t *testing.T, s *sandbox.Sandbox, dir, got string) {
	t.Helper()
	uid, err := strconv.Atoi(strings.TrimSpace(got))
	if err != nil {
		t.Fatalf("id -u printed %q", got)
	}
	if s.Layers().User {
		if uid == 0 || uid != s.UID(dir) {
			t.Errorf("the node's program runs as uid %d, want %d", uid, s.UID(dir))
		}
	} else if os.Geteuid() == 0 {
		t.Errorf("the agent is root and nodes keep its uid: %v", s.Layers().Missing["user"])
	}
}

// checkHostTmp checks that a node's "id > /tmp/..." made nothing in
// the host's /tmp, where a layer can keep it out.
func checkHostTmp(t *testing.T, s *sandbox.Sandbox, name string) {
	t.Helper()
	l := s.Layers()
	if l.Landlock == 0 && !l.MountNS {
		t.Logf("no Landlock and no mount namespace here: the host's /tmp is not checked")
		return
	}
	if b, err := os.ReadFile(name); err == nil {
		t.Errorf("a node's shell line wrote the host's %s: %q", name, b)
	}
}

// The reproduction of issue 25: a startup.vpc (as the files API writes it)
// with '!' lines runs them on the agent's host. Confined, they run as the
// node's own user, see none of the agent's secrets and reach nothing
// outside the node's folder.
func TestSecurityVPCSShellLineRunsUnprivileged(t *testing.T) {
	t.Setenv("LABTAP_SECRET", "s3cret-vpcs-test")
	t.Setenv("LABTAP_PASSWORD", "passw0rd-vpcs-test")
	prog := findVPCS(t)
	s := newSandbox(t)
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	other := filepath.Join(base, "other-node")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "startup.vpc"), []byte("ip 10.9.9.9/24\n"), 0o644)
	tmp := hostTmpName(t)
	script := strings.Join([]string{
		"! id -u > uid",
		"! id > " + tmp,
		"! tr '\\0' '\\n' < /proc/self/environ > environ",
		"! cat " + other + "/startup.vpc > stolen",
		"! echo planted > " + other + "/planted",
		"! echo done > done",
	}, "\n") + "\n"
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "startup.vpc"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     dir,
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
		Sandbox: s,
	})
	waitFile(t, filepath.Join(dir, "done"))
	checkUnprivileged(t, s, dir, waitFile(t, filepath.Join(dir, "uid")))
	checkHostTmp(t, s, tmp)
	env, _ := os.ReadFile(filepath.Join(dir, "environ"))
	if strings.Contains(string(env), "s3cret") || strings.Contains(string(env), "passw0rd") || strings.Contains(string(env), "LABTAP_") {
		t.Errorf("VPCS's environment holds the agent's secrets:\n%s", env)
	}
	if _, err := os.Stat(filepath.Join(other, "planted")); err == nil {
		t.Error("a node wrote into another node's folder")
	}
	if l := s.Layers(); l.Landlock > 0 || l.MountNS {
		if b, _ := os.ReadFile(filepath.Join(dir, "stolen")); len(b) > 0 {
			t.Errorf("a node read another node's folder: %q", b)
		}
	}
}

// The console route to the same hole: "save a" on the console, a.vpc
// overwritten through the files API, "load a". The console's guard lets
// the load through (the name is one it saved); the sandbox keeps what it
// runs unprivileged and inside the node's folder.
func TestSecurityVPCSSaveOverwriteLoadRunsUnprivileged(t *testing.T) {
	prog := findVPCS(t)
	s := newSandbox(t)
	dir := filepath.Join(t.TempDir(), "node")
	v := startVPCS(t, VPCSConfig{
		Program: prog,
		Dir:     dir,
		Agent:   testenv.LoopbackUDP(t).LocalAddr().(*net.UDPAddr).AddrPort(),
		Sandbox: s,
	})
	port, _ := v.Console()
	con, err := DialConsole(t.Context(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if out, err := con.Run(t.Context(), "save a"); err != nil {
		t.Fatalf("save a: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.vpc")); err != nil {
		t.Fatalf("save a: %v", err)
	}
	tmp := hostTmpName(t)
	// As the files API writes it: a new file, the agent's.
	os.Remove(filepath.Join(dir, "a.vpc"))
	if err := os.WriteFile(filepath.Join(dir, "a.vpc"), []byte("! id -u > uid\n! id > "+tmp+"\n! echo done > done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := con.Run(t.Context(), "load a"); err != nil {
		t.Fatalf("load a: %q %v", out, err)
	}
	waitFile(t, filepath.Join(dir, "done"))
	checkUnprivileged(t, s, dir, waitFile(t, filepath.Join(dir, "uid")))
	checkHostTmp(t, s, tmp)
}

// qemuNode makes a QEMU node under base (its folder base/node, images in
// base/images), with no disk and no console unless props say otherwise.
func qemuNode(t *testing.T, base string, s *sandbox.Sandbox, props QemuProps) *Qemu {
	t.Helper()
	testenv.RequireTools(t, "qemu-system-x86_64")
	if props.RAM == 0 {
		props.RAM = 64
	}
	if props.ConsoleType == "" {
		props.ConsoleType = "none"
	}
	os.MkdirAll(filepath.Join(base, "images"), 0o755)
	q, err := NewQemu(QemuConfig{
		NodeID:     uuid.NewString(),
		Name:       "sec",
		Dir:        filepath.Join(base, "node"),
		RuntimeDir: filepath.Join(base, "run"),
		ImagesDir:  filepath.Join(base, "images"),
		Accel:      "tcg",
		Props:      props,
		Sandbox:    s,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop(context.Background()) })
	return q
}

func startQemu(t *testing.T, q *Qemu) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	return q.Start(ctx)
}

// runUnderQemuSpec runs prog with args as the QEMU runner of a node made
// under base runs QEMU (its own sandbox spec), for at most 10 s, and
// returns what it printed. The runner refuses these inputs before they
// reach QEMU (qemu_path, options and image chains pass allowlists); these
// tests go around those checks on purpose, to show that what slips past
// one still reaches nothing.
func runUnderQemuSpec(t *testing.T, base string, s *sandbox.Sandbox, prog string, args ...string) ([]byte, error) {
	t.Helper()
	q := qemuNode(t, base, s, QemuProps{})
	cmd, err := s.Command(q.setup().sandboxSpec("tcg"), prog, args...)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		err = <-done
	}
	return []byte(out.String()), err
}

// Whatever runs as QEMU (a project file named as qemu_path, were it to
// pass the allowlist of QEMU binaries) runs confined, as the node's user,
// without the agent's secrets.
func TestSecurityQemuPathRunsConfined(t *testing.T) {
	t.Setenv("LABTAP_SECRET", "s3cret-qemu-test")
	s := newSandbox(t)
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	os.MkdirAll(dir, 0o755)
	tmp := hostTmpName(t)
	fake := filepath.Join(dir, "imported-file")
	os.WriteFile(fake, []byte("#!/bin/sh\nid -u > uid\nid > "+tmp+"\ntr '\\0' '\\n' < /proc/self/environ > environ\necho done > done\nexit 1\n"), 0o755)
	if q := qemuNode(t, base, s, QemuProps{}); q.Update(mustJSON(t, map[string]any{"qemu_path": fake}), nil) == nil {
		t.Error("qemu_path took a project file")
	}
	if _, err := runUnderQemuSpec(t, base, s, fake); err == nil {
		t.Fatal("the script did not fail as written")
	}
	waitFile(t, filepath.Join(dir, "done"))
	checkUnprivileged(t, s, dir, waitFile(t, filepath.Join(dir, "uid")))
	checkHostTmp(t, s, tmp)
	if env, _ := os.ReadFile(filepath.Join(dir, "environ")); strings.Contains(string(env), "s3cret") {
		t.Errorf("the program run as QEMU sees the agent's secret:\n%s", env)
	}
}

// QEMU options and backing files that name host files outside the node's
// and the images folders reach nothing, were they to pass the options
// allowlist and the chain check: "-icount rr=record,rrfile=FILE"
// truncates FILE, and a qcow2 image whose backing file is a host file
// would have QEMU read it.
func TestSecurityQemuCannotReachHostFiles(t *testing.T) {
	testenv.RequireTools(t, "qemu-img", "qemu-system-x86_64")
	s := newSandbox(t)
	if l := s.Layers(); l.Landlock == 0 && !l.MountNS && !l.User {
		t.Skipf("no layer here keeps QEMU from host files: %v", l.Missing)
	}
	t.Run("icount rrfile", func(t *testing.T) {
		base := t.TempDir()
		host := filepath.Join(base, "host-file")
		os.WriteFile(host, []byte("keep me\n"), 0o644)
		opts := "-icount shift=auto,rr=record,rrfile=" + host
		if q := qemuNode(t, base, s, QemuProps{}); q.Update(mustJSON(t, map[string]any{"options": opts}), nil) == nil {
			t.Error("the options allowlist took rrfile")
		}
		out, err := runUnderQemuSpec(t, base, s, "qemu-system-x86_64", "-machine", "accel=tcg", "-display", "none",
			"-nodefaults", "-m", "64", "-icount", "shift=auto,rr=record,rrfile="+host)
		if b, _ := os.ReadFile(host); string(b) != "keep me\n" {
			t.Fatalf("QEMU wrote a host file (%v): %q\n%s", err, b, out)
		}
		if err == nil || !strings.Contains(string(out), host) {
			t.Fatalf("QEMU failed for another reason than the host file (%v):\n%s", err, out)
		}
	})
	t.Run("backing file", func(t *testing.T) {
		if l := s.Layers(); l.Landlock == 0 && !l.MountNS {
			t.Skip("the host file is world-readable and neither Landlock nor a mount namespace is here")
		}
		base := t.TempDir()
		host := filepath.Join(base, "host-disk")
		if err := os.WriteFile(host, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(base, "images"), 0o755)
		img := filepath.Join(base, "images", "evil.qcow2")
		if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", "-F", "raw", "-b", host, img).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v: %s", err, out)
		}
		if err := startQemu(t, qemuNode(t, base, s, QemuProps{HDA: "evil.qcow2"})); err == nil {
			t.Error("the chain check took an image whose backing file is a host file")
		}
		out, err := runUnderQemuSpec(t, base, s, "qemu-system-x86_64", "-machine", "accel=tcg", "-display", "none",
			"-nodefaults", "-m", "64", "-drive", "file="+img+",format=qcow2,if=ide,readonly=on")
		if err == nil {
			t.Fatalf("QEMU started on an image whose backing file is a host file outside its folders:\n%s", out)
		}
		if !strings.Contains(string(out), host) {
			t.Fatalf("QEMU failed for another reason than the backing file (%v):\n%s", err, out)
		}
	})
}

// QEMU's helpers run confined too, as the node's user (cpulimit must be, to
// stop and continue QEMU), and a VM with a TPM and CPU throttling still
// starts.
func TestSecurityQemuAndItsHelpersRunAsTheNodeUser(t *testing.T) {
	testenv.RequireTools(t, "swtpm", "cpulimit")
	s := newSandbox(t)
	base := t.TempDir()
	q := qemuNode(t, base, s, QemuProps{TPM: true, CPUThrottling: 80})
	if err := startQemu(t, q); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	p := q.proc
	q.mu.Unlock()
	dir := filepath.Join(base, "node")
	self, _ := os.ReadFile("/proc/self/comm")
	for _, c := range append([]*child{p.child}, p.helpers...) {
		// A helper just started may still be the launcher.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.pid())); string(comm) != string(self) {
				break
			}
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid()))
		if err != nil {
			t.Fatal(err)
		}
		var uid int
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				uid, _ = strconv.Atoi(f[1])
			}
		}
		if s.Layers().User && uid != s.UID(dir) {
			t.Errorf("pid %d (%s) runs as uid %d, want %d", c.pid(), c.cmd.Path, uid, s.UID(dir))
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
