package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/confined"
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

// checkUnprivileged checks what a node's "! id -u > uid" line wrote: a uid
// other than root's, where the agent can change uid.
func checkUnprivileged(t *testing.T, s *sandbox.Sandbox, dir, got string) {
	t.Helper()
	uid, err := strconv.Atoi(strings.TrimSpace(got))
	if err != nil {
		t.Fatalf("id -u printed %q", got)
	}
	if s.Layers().User {
		if uid == 0 || uid != s.UID(dir) {
			t.Errorf("VPCS's shell lines run as uid %d, want %d", uid, s.UID(dir))
		}
	} else if os.Geteuid() == 0 {
		t.Errorf("the agent is root and nodes keep its uid: %v", s.Layers().Missing["user"])
	}
}

// checkHostTmp checks that a node's "! id > /tmp/..." line made nothing in
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

// The reproduction of issue 25: a startup.vpc (the files API writes it)
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
	if err := confined.Write(dir, "startup.vpc", []byte(script), 0o644); err != nil {
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
	if err := confined.Write(dir, "a.vpc", []byte("! id -u > uid\n! id > "+tmp+"\n! echo done > done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := con.Run(t.Context(), "load a"); err != nil {
		t.Fatalf("load a: %q %v", out, err)
	}
	waitFile(t, filepath.Join(dir, "done"))
	checkUnprivileged(t, s, dir, waitFile(t, filepath.Join(dir, "uid")))
	checkHostTmp(t, s, tmp)
}
