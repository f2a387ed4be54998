package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layers: %s; missing: %v", s.Layers(), s.Layers().Missing)
	return s
}

// run runs a shell script confined to dir, and returns what it printed.
func run(t *testing.T, s *Sandbox, spec Spec, script string) string {
	t.Helper()
	cmd, err := s.Command(spec, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	return out.String()
}

func randName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Every layer is either in force or named missing with a reason, and an
// agent running as root always gets the user layer.
func TestSecuritySandboxSaysWhatItLacks(t *testing.T) {
	l := newSandbox(t).Layers()
	for name, on := range map[string]bool{"user": l.User, "no_new_privs": l.NoNewPrivs, "landlock": l.Landlock > 0,
		"mount_ns": l.MountNS, "seccomp": l.Seccomp} {
		if !on && l.Missing[name] == "" {
			t.Errorf("layer %s is off and nothing says why: %+v", name, l)
		}
	}
	if os.Geteuid() == 0 && !l.User {
		t.Errorf("the agent runs as root but nodes keep its uid: %v", l.Missing["user"])
	}
}

// A confined program runs as a uid of its own, with no_new_privs and
// the seccomp filter, sees none of the agent's secrets, and writes nothing
// outside its folder: not another node's folder, not a host file, not /tmp.
func TestSecurityConfinedProgramReachesOnlyItsFolder(t *testing.T) {
	t.Setenv("LABTAP_SECRET", "s3cret-sandbox-test")
	t.Setenv("LABTAP_PASSWORD", "passw0rd-sandbox-test")
	s := newSandbox(t)
	t.Run("every layer here", func(t *testing.T) { checkConfined(t, s) })
	// As in a container without CAP_SYS_ADMIN: the folders above the
	// node's must then let its uid through, and the other layers hold.
	noNS := *s
	noNS.layers.MountNS = false
	t.Run("no mount namespace", func(t *testing.T) { checkConfined(t, &noNS) })
}

func checkConfined(t *testing.T, s *Sandbox) {
	l := s.Layers()
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	other := filepath.Join(base, "other")
	hostFile := filepath.Join(base, "host-file")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "secret"), []byte("other node's secret\n"), 0o644)
	os.WriteFile(hostFile, []byte("host\n"), 0o644)
	tmpName := filepath.Join("/tmp", randName("labtap-sec-"))
	t.Cleanup(func() { os.Remove(tmpName) })

	out := run(t, s, Spec{Dir: dir}, `
		id -u > uid
		grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status > status
		tr '\0' '\n' < /proc/self/environ > environ
		cat `+other+`/secret > read-other 2>/dev/null
		cat `+hostFile+` > read-host 2>/dev/null
		echo pwned >> `+hostFile+`
		echo pwned > `+other+`/new
		echo pwned > `+tmpName+`
		echo done`)
	if !strings.Contains(out, "done") {
		t.Fatalf("the script did not finish: %s", out)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	uid, err := strconv.Atoi(strings.TrimSpace(read("uid")))
	if err != nil {
		t.Fatalf("uid: %q", read("uid"))
	}
	if l.User && (uid != s.UID(dir) || uid == 0) {
		t.Errorf("ran as uid %d, want %d", uid, s.UID(dir))
	}
	status := read("status")
	if l.NoNewPrivs && !strings.Contains(status, "NoNewPrivs:\t1") {
		t.Errorf("no_new_privs is not set: %q", status)
	}
	if l.Seccomp && !strings.Contains(status, "Seccomp:\t2") {
		t.Errorf("no seccomp filter: %q", status)
	}
	if env := read("environ"); strings.Contains(env, "s3cret") || strings.Contains(env, "passw0rd") || strings.Contains(env, "LABTAP_") {
		t.Errorf("the agent's secrets reach the program: %q", env)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "host\n" {
		t.Errorf("a host file outside the folder was written: %q", b)
	}
	if _, err := os.Stat(filepath.Join(other, "new")); err == nil {
		t.Error("another node's folder was written")
	}
	if l.Landlock > 0 || l.MountNS {
		if got := read("read-other") + read("read-host"); got != "" {
			t.Errorf("files outside the folder were read: %q", got)
		}
		if _, err := os.Stat(tmpName); err == nil {
			t.Errorf("%s was made in the host's /tmp", tmpName)
		}
	} else {
		t.Logf("neither Landlock nor a mount namespace here: reads of 0644 files and writes to /tmp are not checked")
	}
}

func TestParseUIDs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [2]int
		ok   bool
	}{
		{"", DefaultUIDs, true},
		{"200000-200099", [2]int{200000, 200099}, true},
		{"0-100", [2]int{}, false},
		{"5000-70000", [2]int{}, false}, // nobody
		{"300-200", [2]int{}, false},
		{"abc", [2]int{}, false},
		{"100000-99999999999", [2]int{}, false},
	} {
		got, err := ParseUIDs(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseUIDs(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// Giving a node its folder gives it nothing outside: not what a symbolic
// link in it names, not a file hard-linked into it.
func TestSecurityOwningAFolderLeavesWhatItLinksToAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives folders away")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	outside := filepath.Join(base, "outside")
	os.WriteFile(outside, []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "mine"), []byte("y"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Symlink(base, filepath.Join(dir, "uplink"))
	if err := os.Link(outside, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	const uid = 1_900_000_123
	if err := own(dir, uid); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) int {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Uid)
	}
	for _, p := range []string{outside, base} {
		if owner(p) == uid {
			t.Errorf("%s outside the folder was given to the node", p)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "mine"), filepath.Join(dir, "link")} {
		if owner(p) != uid {
			t.Errorf("%s is not the node's", p)
		}
	}
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("the folder is %v, want 0700", info.Mode().Perm())
	}
}

// A device a node may use (/dev/kvm, 0660 root:kvm on most hosts) gives the
// program its group, and only that one.
func TestConfinedProgramGetsItsDevicesGroup(t *testing.T) {
	s := newSandbox(t)
	if !s.Layers().User {
		t.Skip("the agent cannot change uid here")
	}
	base := t.TempDir()
	dev := filepath.Join(base, "fake-kvm")
	os.WriteFile(dev, nil, 0o660)
	const gid = 1_900_100_007
	os.Chown(dev, 0, gid)
	os.Chmod(dev, 0o660) // past the umask
	dir := filepath.Join(base, "node")
	out := run(t, s, Spec{Dir: dir, Devices: []string{dev}}, `id -G; echo hi > `+dev+` && echo wrote`)
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != strconv.Itoa(s.UID(dir)) || f[1] != strconv.Itoa(gid) || f[len(f)-1] != "wrote" {
		t.Fatalf("groups and write: %q, want %d %d wrote", out, s.UID(dir), gid)
	}
}

// A folder a node may read that is not made yet (an images folder nothing
// was uploaded to) is no reason to refuse the node, with a mount namespace
// or without one (a container's CI, where the folders above must be opened
// to the node's uid instead).
func TestAReadableFolderNotMadeYetIsNoReasonToRefuse(t *testing.T) {
	s := newSandbox(t)
	noNS := *s
	noNS.layers.MountNS = false
	for name, sb := range map[string]*Sandbox{"as the host allows": s, "no mount namespace": &noNS} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			missing := filepath.Join(base, "images", "QEMU")
			out := run(t, sb, Spec{Dir: filepath.Join(base, "node"), Readable: []string{missing}}, `echo ran`)
			if !strings.Contains(out, "ran") {
				t.Fatalf("the program did not run: %q", out)
			}
		})
	}
}
