// Package sandbox runs the programs of lab nodes (VPCS, QEMU, swtpm,
// cpulimit) confined: as an unprivileged user, with no_new_privs, under a
// Landlock ruleset that leaves the node's folder as the only place they may
// write, in a mount namespace of their own where the kernel allows one, and
// under a seccomp filter that refuses the calls a node program has no use
// for (mount, ptrace, kexec, bpf, module loading, keyrings, namespaces...).
//
// Go cannot run code between fork and exec, so a confined program is started
// through a launcher: the agent's own executable, run again with argv[0]
// set to "labtap-sandbox". It sets up each layer on itself and then execs
// the node's program, which inherits them all. Main is the launcher's entry:
// every binary that runs nodes calls it first thing in main (and in the
// TestMain of test packages that start confined nodes).
//
// A layer the kernel or the container withholds is left out, never faked:
// New finds out which layers work by running the launcher once, and the
// Sandbox reports them (Layers) so the agent can say what its nodes get.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// launcherName is argv[0] of a launcher process: how Main knows it is one.
const launcherName = "labtap-sandbox"

// DefaultUIDs is the range node uids and gids come from unless configured:
// far above login users (1000...) and the usual subordinate-id ranges
// (100000-165535 and up) of user namespaces.
var DefaultUIDs = [2]int{1_900_000_000, 1_900_065_535}

// entered is set by Main: a binary whose main never called it would, run
// as a launcher, run its own main instead (a test binary: its tests, each
// starting launchers of its own), so New refuses to work without it.
var entered atomic.Bool

// Layers is what confinement a node program gets on this host.
type Layers struct {
	// User: the program runs as a uid and gid of its own with no
	// supplementary groups (needs an agent running as root, or with
	// CAP_SETUID and CAP_SETGID).
	User bool `json:"user"`
	// NoNewPrivs: set-user-ID binaries and file capabilities give it nothing.
	NoNewPrivs bool `json:"no_new_privs"`
	// Landlock is the Landlock ABI version in force, 0 for none.
	Landlock int `json:"landlock"`
	// MountNS: a mount namespace of its own, with private propagation and
	// fresh tmpfs over /tmp and the other shared folders (needs
	// CAP_SYS_ADMIN).
	MountNS bool `json:"mount_ns"`
	// Seccomp: the filter of denied calls is loaded.
	Seccomp bool `json:"seccomp"`
	// Missing says, for each layer left out, why.
	Missing map[string]string `json:"missing,omitempty"`
}

// String lists the layers in force, for logs.
func (l Layers) String() string {
	var on []string
	if l.User {
		on = append(on, "user")
	}
	if l.NoNewPrivs {
		on = append(on, "no_new_privs")
	}
	if l.Landlock > 0 {
		on = append(on, fmt.Sprintf("landlock(abi %d)", l.Landlock))
	}
	if l.MountNS {
		on = append(on, "mount_ns")
	}
	if l.Seccomp {
		on = append(on, "seccomp")
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// Config configures a Sandbox.
type Config struct {
	// UIDs is the inclusive range [lo, hi] node programs take their uid
	// (and gid, the same number) from; zero means DefaultUIDs.
	UIDs   [2]int
	Logger *slog.Logger
}

// Sandbox starts confined node programs. It is safe for concurrent use; a
// nil *Sandbox starts programs unconfined, with a scrubbed environment.
type Sandbox struct {
	uids   [2]int
	self   string // the launcher: this executable
	layers Layers
	log    *slog.Logger
}

// New finds which layers this host allows, by running the launcher once,
// and logs a warning naming those it lacks and why. It fails when the
// running binary does not call Main, or the launcher cannot run at all.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UIDs == [2]int{} {
		cfg.UIDs = DefaultUIDs
	}
	if err := checkRange(cfg.UIDs); err != nil {
		return nil, err
	}
	if !entered.Load() {
		return nil, errors.New("sandbox: this binary does not call sandbox.Main first thing in main")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: find this executable: %w", err)
	}
	s := &Sandbox{uids: cfg.UIDs, self: self, log: cfg.Logger}
	if s.layers, err = s.probe(ctx); err != nil {
		return nil, err
	}
	if len(s.layers.Missing) > 0 {
		args := []any{"layers", s.layers.String()}
		for _, k := range slices.Sorted(maps.Keys(s.layers.Missing)) {
			args = append(args, "missing_"+k, s.layers.Missing[k])
		}
		s.log.Warn("node programs run with fewer sandbox layers than they could", args...)
	} else {
		s.log.Info("node programs run sandboxed", "layers", s.layers.String(), "uids", fmt.Sprintf("%d-%d", s.uids[0], s.uids[1]))
	}
	return s, nil
}

// ParseUIDs reads a range "LO-HI" of node uids.
func ParseUIDs(s string) ([2]int, error) {
	if s == "" {
		return DefaultUIDs, nil
	}
	var r [2]int
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return r, fmt.Errorf("node uids %q: want LO-HI", s)
	}
	if _, err := fmt.Sscanf(lo+" "+hi, "%d %d", &r[0], &r[1]); err != nil || len(s) > 32 {
		return r, fmt.Errorf("node uids %q: want LO-HI", s)
	}
	return r, checkRange(r)
}

// checkRange refuses ranges that include root or the system users, or
// reach the numbers that mean "no user" (4294967295, and 65534 nobody).
func checkRange(r [2]int) error {
	switch {
	case r[0] < 1000 || r[1] < r[0]:
		return fmt.Errorf("node uids %d-%d: want 1000 <= LO <= HI", r[0], r[1])
	case r[1] > 4_294_967_294-1:
		return fmt.Errorf("node uids %d-%d: HI must stay below 4294967294", r[0], r[1])
	case r[0] <= 65534 && 65534 <= r[1]:
		return fmt.Errorf("node uids %d-%d: the range includes nobody (65534)", r[0], r[1])
	}
	return nil
}

// Layers returns what confinement node programs get on this host.
func (s *Sandbox) Layers() Layers {
	if s == nil {
		return Layers{Missing: map[string]string{"all": "no sandbox configured"}}
	}
	return s.layers
}

// DeviceUsable says why a node program, run as its own uid, could not
// open device dev read-write: nil where it can (or where programs run as
// the agent). A program gets the device's group unless that is root's
// (Command), so the device must let its group (not root) or everyone read
// and write it. KVM's self-test, run as the agent, passes on a /dev/kvm
// of root:root 0600 that QEMU under its node's uid then cannot open.
func (s *Sandbox) DeviceUsable(dev string) error {
	if s == nil || !s.layers.User {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dev, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dev, Err: err}
	}
	mode := st.Mode & 0o777
	if st.Gid != 0 && mode&0o060 == 0o060 || mode&0o006 == 0o006 {
		return nil
	}
	return fmt.Errorf("%s (mode %04o, group %d) cannot be opened by node programs, which run as uids of their own: give it a group such as kvm with mode 0660 (Debian's udev rule does), or run QEMU nodes under TCG", dev, mode, st.Gid)
}

// UID returns the uid (and gid) a node whose folder is dir runs as: a
// number of the range picked by the folder's path, so the same node gets the
// same one every time. Two nodes share one with odds of one in the range's
// size; the Landlock layer keeps them apart all the same. It returns -1 when
// the agent cannot change uid.
func (s *Sandbox) UID(dir string) int {
	if s == nil || !s.layers.User {
		return -1
	}
	h := fnv.New32a()
	h.Write([]byte(filepath.Clean(dir)))
	return s.uids[0] + int(h.Sum32()%uint32(s.uids[1]-s.uids[0]+1))
}

// Spec is what one node program may reach.
type Spec struct {
	// Dir is the node's folder: the program's working directory, the
	// only place it may write besides Writable, owned by the node's uid.
	Dir string
	// Writable are more folders the program may write (QEMU's private
	// runtime folder for its sockets); they are given to the node's uid.
	Writable []string
	// Readable are folders or files it may read (the images folder).
	Readable []string
	// Devices are device files it may read, write and ioctl (/dev/kvm);
	// the program gets the group of each (kvm) unless that is root's, so a
	// device only root may open stays closed to it.
	Devices []string
	// TimerSlack, when set, is the timer slack the program runs with.
	TimerSlack time.Duration
	// Nice, when not 0, is the nice value the program starts with: set by
	// the launcher before it changes uid, so no capability is needed to
	// lower the program's priority, while raising it above the agent's
	// needs CAP_SYS_NICE (without it the program keeps the agent's).
	Nice int
	// Pdeathsig is the signal the program gets when the thread that
	// started it ends (changing uid clears it, so the launcher sets it
	// again).
	Pdeathsig syscall.Signal
}

// policy is what the launcher is told to do, as JSON in argv[1].
type policy struct {
	UID       int      `json:"uid"`              // -1: keep the agent's
	Groups    []int    `json:"groups,omitempty"` // supplementary groups: the devices'
	Dir       string   `json:"dir"`
	RW        []string `json:"rw"`
	RO        []string `json:"ro"`
	Exec      []string `json:"exec"`
	Dev       []string `json:"dev"`
	MountNS   bool     `json:"mount_ns"`
	Landlock  bool     `json:"landlock"`
	Seccomp   bool     `json:"seccomp"`
	Slack     int64    `json:"slack,omitempty"`
	Nice      int      `json:"nice,omitempty"`
	Pdeathsig int      `json:"pdeathsig,omitempty"`
	Probe     bool     `json:"probe,omitempty"`
}

// keptEnv are the variables of the agent's environment a node program
// sees; nothing else (secrets and passwords included) reaches it.
var keptEnv = []string{"PATH", "LANG", "LC_ALL", "TERM", "TZ"}

// Env returns the environment of a node program whose folder is dir: a
// few harmless variables of the agent's, and HOME and TMPDIR in dir.
func Env(dir string) []string {
	env := []string{"HOME=" + dir, "TMPDIR=" + dir}
	for _, k := range keptEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return env
}

// Command returns a command that runs prog with args confined by spec, or,
// on a nil Sandbox, plainly (with Env). The caller may set Stdin, Stdout,
// Stderr and SysProcAttr (keep its Pdeathsig equal to spec's) and start it
// as any command; it must not change Path, Args, Env or Dir. Command makes
// spec.Dir if need be and gives spec's folders to the node's uid.
func (s *Sandbox) Command(spec Spec, prog string, args ...string) (*exec.Cmd, error) {
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, err
	}
	if s == nil {
		cmd := exec.Command(prog, args...)
		cmd.Dir, cmd.Env = spec.Dir, Env(spec.Dir)
		return cmd, nil
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return nil, err
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	uid := s.UID(spec.Dir)
	p := policy{
		UID:       uid,
		Dir:       spec.Dir,
		RW:        append([]string{spec.Dir}, spec.Writable...),
		RO:        spec.Readable,
		Exec:      []string{path},
		Dev:       spec.Devices,
		MountNS:   s.layers.MountNS,
		Landlock:  s.layers.Landlock > 0,
		Seccomp:   s.layers.Seccomp,
		Slack:     spec.TimerSlack.Nanoseconds(),
		Nice:      spec.Nice,
		Pdeathsig: int(spec.Pdeathsig),
	}
	if uid >= 0 {
		for _, d := range spec.Devices {
			var st syscall.Stat_t
			if err := syscall.Stat(d, &st); err == nil && st.Gid != 0 {
				p.Groups = append(p.Groups, int(st.Gid))
			}
		}
		for _, d := range p.RW {
			if err := own(d, uid); err != nil {
				return nil, fmt.Errorf("sandbox: give %s to uid %d: %w", d, uid, err)
			}
		}
		if !p.MountNS {
			// Without a mount namespace the launcher cannot hide the
			// folders above these behind fresh ones: they must let the
			// node's uid through.
			for _, d := range slices.Concat(p.RW, p.RO, p.Exec) {
				opened, err := letThrough(d, uid)
				if err != nil {
					return nil, fmt.Errorf("sandbox: %w", err)
				}
				for _, o := range opened {
					s.log.Info("folder made searchable by others, for nodes (no mount namespace to hide it)", "dir", o)
				}
			}
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.self, append([]string{string(b), path}, args...)...)
	cmd.Args[0] = launcherName
	cmd.Dir, cmd.Env = spec.Dir, Env(spec.Dir)
	return cmd, nil
}

// own gives dir and what it holds to uid (gid the same) and closes dir to
// everyone else (0700). It works through an os.Root, so a link, or a folder
// swapped for one by a process still running as the node, cannot lead it
// out of dir; links themselves are not followed, and a file with more than
// one name is left alone: it may be a hard link to something outside.
func own(dir string, uid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || (!d.IsDir() && st.Nlink > 1) {
			return nil
		}
		if int(st.Uid) == uid && int(st.Gid) == uid {
			return nil
		}
		return root.Lchown(path, uid, uid)
	})
	if err != nil {
		return err
	}
	return root.Chmod(".", 0o700)
}

// letThrough makes the folders above path searchable (x) by others where
// uid could not pass them otherwise, and returns those it changed. Nothing
// is made listable or readable.
func letThrough(path string, uid int) (opened []string, err error) {
	for d := filepath.Dir(filepath.Clean(path)); ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) {
			// A folder not made yet (an images folder nothing was
			// uploaded to) holds nothing to let the node through to.
			if d == "/" || d == "." {
				return opened, nil
			}
			continue
		}
		if err != nil {
			return opened, err
		}
		if !searchable(info, uid) {
			if err := os.Chmod(d, info.Mode().Perm()|0o001); err != nil {
				return opened, fmt.Errorf("let uid %d through %s: %w", uid, d, err)
			}
			opened = append(opened, d)
		}
		if d == "/" || d == "." {
			return opened, nil
		}
	}
}

// searchable reports whether uid (with gid the same and no other groups)
// may pass through the folder info describes.
func searchable(info fs.FileInfo, uid int) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	m := info.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return m&0o100 != 0
	case int(st.Gid) == uid:
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

// probe runs the launcher in probe mode: it tries each layer on itself and
// says which held.
func (s *Sandbox) probe(ctx context.Context) (Layers, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, _ := json.Marshal(policy{UID: s.uids[0], Probe: true, MountNS: true, Landlock: true, Seccomp: true})
	cmd := exec.CommandContext(ctx, s.self, string(b))
	cmd.Args[0] = launcherName
	cmd.Env = Env(os.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Layers{}, fmt.Errorf("sandbox: probe the launcher: %w: %s", err, bytes.TrimSpace(errb.Bytes()))
	}
	var l Layers
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		return Layers{}, fmt.Errorf("sandbox: probe the launcher: %w: %q", err, out.Bytes())
	}
	return l, nil
}
