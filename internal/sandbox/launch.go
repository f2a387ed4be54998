package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Main is the launcher's entry. Call it first thing in main of every binary
// that runs nodes, and in TestMain of test packages that start confined
// nodes. In a launcher process (argv[0] "labtap-sandbox", which only
// Sandbox.Command and New make) it confines itself and execs the node's
// program, never returning; anywhere else it returns at once.
func Main() {
	entered.Store(true)
	if len(os.Args) < 2 || os.Args[0] != launcherName {
		return
	}
	// Every layer is set on this thread, and this thread execs: the
	// program inherits exactly what it set up.
	runtime.LockOSThread()
	var p policy
	if err := json.Unmarshal([]byte(os.Args[1]), &p); err != nil {
		die(fmt.Errorf("bad policy: %w", err))
	}
	if p.Probe {
		out, _ := json.Marshal(probe(p))
		os.Stdout.Write(out)
		os.Exit(0)
	}
	if len(os.Args) < 3 {
		die(errors.New("no program to run"))
	}
	if err := confine(p); err != nil {
		die(err)
	}
	err := unix.Exec(os.Args[2], os.Args[2:], os.Environ())
	die(fmt.Errorf("exec %s: %w", os.Args[2], err))
}

func die(err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", launcherName, err)
	os.Exit(126)
}

// confine sets every layer p asks for on the calling thread, or fails: a
// layer that New found working and that fails now stops the node.
func confine(p policy) error {
	ppid := os.Getppid()
	if p.MountNS {
		if err := mountNS(p); err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
	}
	if p.Dir != "" {
		if err := unix.Chdir(p.Dir); err != nil {
			return fmt.Errorf("chdir %s: %w", p.Dir, err)
		}
	}
	if p.Slack > 0 {
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(p.Slack), 0, 0, 0); err != nil {
			return fmt.Errorf("timer slack: %w", err)
		}
	}
	if p.Nice != 0 {
		// On this thread, which execs the program: its threads inherit
		// it. Best effort: the agent sets it again from outside where it
		// can, and says when it cannot.
		unix.Setpriority(unix.PRIO_PROCESS, 0, p.Nice)
	}
	if p.UID >= 0 {
		if err := becomeUser(p.UID, p.Groups); err != nil {
			return err
		}
	}
	if p.Pdeathsig > 0 {
		// Changing uid cleared it; if the parent is already gone, its
		// signal was missed.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(p.Pdeathsig), 0, 0, 0); err != nil {
			return fmt.Errorf("parent death signal: %w", err)
		}
		if os.Getppid() != ppid {
			return errors.New("the agent is gone")
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if p.Landlock {
		if err := restrictPaths(p); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if p.Seccomp {
		if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: deniedCalls()}); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}

func becomeUser(uid int, groups []int) error {
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(uid); err != nil {
		return fmt.Errorf("setgid %d: %w", uid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}

// probe tries each layer on this process, which then exits, and says what
// held and why the others did not.
func probe(p policy) Layers {
	l := Layers{Missing: map[string]string{}}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		l.Missing["mount_ns"] = fmt.Sprintf("unshare(CLONE_NEWNS): %v (needs CAP_SYS_ADMIN)", err)
	} else if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		l.Missing["mount_ns"] = fmt.Sprintf("make / private: %v", err)
	} else if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		l.Missing["mount_ns"] = fmt.Sprintf("mount a tmpfs: %v", err)
	} else {
		l.MountNS = true
	}
	if err := becomeUser(p.UID, nil); err != nil {
		l.Missing["user"] = fmt.Sprintf("%v (the agent runs as uid %d: it needs root, or CAP_SETUID and CAP_SETGID, to run nodes as users of their own)", err, os.Geteuid())
	} else {
		l.User = true
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		l.Missing["no_new_privs"] = err.Error()
	} else {
		l.NoNewPrivs = true
	}
	if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < 1 {
		l.Missing["landlock"] = fmt.Sprintf("landlock_create_ruleset: %v (the kernel lacks Landlock, it is not in lsm=, or a seccomp profile refuses it)", err)
	} else if err := restrictPaths(policy{RO: []string{"/"}}); err != nil {
		l.Missing["landlock"] = err.Error()
	} else {
		l.Landlock = abi
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: deniedCalls()}); err != nil {
		l.Missing["seccomp"] = err.Error()
	} else {
		l.Seccomp = true
	}
	if len(l.Missing) == 0 {
		l.Missing = nil
	}
	return l
}

// fsAll is every file system access right this Landlock library knows;
// the kernel's own subset is used (best effort). Network rights and scopes
// are left alone: nodes listen and connect (VNC consoles, user-mode
// networking), and cpulimit signals QEMU.
var fsAll = landlock.V7.HandledAccessFS

const (
	fsRead = landlock.AccessFSSet(ll.AccessFSReadFile | ll.AccessFSReadDir)
	fsExec = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile)
)

// restrictPaths leaves the calling thread (and what it execs) able to
// read the system's programs and libraries, and to use only p's folders.
func restrictPaths(p policy) error {
	rules := []landlock.Rule{
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt").IgnoreIfMissing(),
		landlock.PathAccess(fsRead, "/proc", "/sys").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty").IgnoreIfMissing(),
		landlock.PathAccess(fsAll&^landlock.AccessFSSet(ll.AccessFSExecute), "/dev/pts").IgnoreIfMissing(),
	}
	if len(p.RW) > 0 {
		rules = append(rules, landlock.PathAccess(fsAll&^landlock.AccessFSSet(ll.AccessFSExecute), p.RW...))
	}
	if len(p.RO) > 0 {
		rules = append(rules, landlock.PathAccess(fsRead, p.RO...).IgnoreIfMissing())
	}
	for _, f := range p.Exec {
		rules = append(rules, landlock.PathAccess(fsExec, f))
	}
	if len(p.Dev) > 0 {
		rules = append(rules, landlock.RWFiles(p.Dev...).WithIoctlDev().IgnoreIfMissing())
	}
	cfg, err := landlock.NewConfig(fsAll)
	if err != nil {
		return err
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("the kernel has no Landlock")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return ll.LandlockRestrictSelf(fd, flags)
}

// deniedCalls is the seccomp policy: every call allowed but those a node
// program has no use for and that reach beyond it (the kernel's mounts,
// other processes' memory, kernel code, keyrings, namespaces, the clock).
func deniedCalls() seccomp.Policy {
	var nsClone []seccomp.NameWithConditions
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
		unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP} {
		nsClone = append(nsClone, seccomp.NameWithConditions{Name: "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: flag}}})
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: []string{
				"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
				"fsmount", "fspick", "mount_setattr",
				"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
				"kexec_load", "kexec_file_load", "reboot",
				"bpf", "perf_event_open", "userfaultfd",
				"init_module", "finit_module", "delete_module",
				"keyctl", "add_key", "request_key",
				"unshare", "setns",
				"swapon", "swapoff", "acct", "quotactl",
				"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
				"open_by_handle_at", "name_to_handle_at",
				"iopl", "ioperm", "uselib", "vhangup", "sethostname", "setdomainname",
				"io_uring_setup", "io_uring_enter", "io_uring_register",
			}},
			{Action: seccomp.ActionErrno, NamesWithCondtions: nsClone},
			// clone3 passes its flags in memory, where a filter cannot
			// look: "not implemented" makes the C library use clone.
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// sharedDirs are folders every user may write or that hold other users'
// files: a node's mount namespace has a fresh, empty tmpfs over each.
var sharedDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "/root", "/home", "/run", "/mnt", "/media", "/srv"}

// mountNS gives the calling thread a mount namespace of its own with
// private propagation, and hides the shared folders, and the folders above
// p's that the node's uid could not pass, behind fresh tmpfs mounts into
// which only p's paths are bound back.
func mountNS(p policy) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	allowed := slices.Concat(p.RW, p.RO, p.Exec, p.Dev)
	var masks []string
	for _, d := range sharedDirs {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			masks = append(masks, d)
		}
	}
	for _, a := range allowed {
		if m := firstBlocked(a, p.UID); m != "" {
			masks = append(masks, m)
		}
	}
	masks = outermost(masks)
	type kept struct {
		path string
		fd   int
		dir  bool
	}
	var keep []kept
	slices.SortFunc(allowed, func(a, b string) int { return len(a) - len(b) })
	for _, a := range allowed {
		a = filepath.Clean(a)
		if !slices.ContainsFunc(masks, func(m string) bool { return within(a, m) }) {
			continue
		}
		fd, err := unix.Open(a, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", a, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		keep = append(keep, kept{a, fd, st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	for _, m := range masks {
		if err := unix.Mount("tmpfs", m, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
			return fmt.Errorf("tmpfs over %s: %w", m, err)
		}
	}
	for _, k := range keep {
		if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
			return err
		}
		if k.dir {
			if err := os.Mkdir(k.path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		} else if f, err := os.OpenFile(k.path, os.O_CREATE|os.O_RDONLY, 0o644); err != nil {
			return err
		} else {
			f.Close()
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", k.fd), k.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", k.path, err)
		}
		unix.Close(k.fd)
	}
	return nil
}

// firstBlocked returns the outermost folder above path that uid cannot
// pass, "" if none.
func firstBlocked(path string, uid int) string {
	if uid < 0 {
		return ""
	}
	var dirs []string
	for d := filepath.Dir(filepath.Clean(path)); d != "/" && d != "."; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	for _, d := range slices.Backward(dirs) {
		info, err := os.Stat(d)
		if err != nil {
			return ""
		}
		if !searchable(info, uid) {
			return d
		}
	}
	return ""
}

// outermost drops the folders that lie inside another one of dirs.
func outermost(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if !slices.ContainsFunc(dirs, func(o string) bool { return o != d && within(d, o) }) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// within reports whether path is dir or lies inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
