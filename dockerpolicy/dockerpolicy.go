// Package dockerpolicy is the one rule of what a docker node may ask of the
// host it runs on: the capabilities it may add, whether it may run
// privileged, and where its persistent volumes may be. The controller
// checks a node's properties with it before it asks an agent for
// anything, and the agent checks them again before it builds the
// container, so both refuse the same requests with the same message.
//
// A container runs with the Engine's defaults: its masked and read-only
// paths (/proc/kcore, /proc/keys, /sys/firmware... hidden, /proc/sys
// read-only, so no core_pattern of the host's), its seccomp profile and
// its AppArmor profile where AppArmor is on, and the Engine's default
// capabilities plus DefaultCapAdd. A node may add the capabilities of
// Allowed; anything else, and privileged, only where the operator allows
// it (Policy.Unsafe).
package dockerpolicy

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// Errors of Check, each for a status: the request is malformed (400),
// needs what the operator did not allow (403), or names a volume where
// none may be (409, as GNS3 answers it).
var (
	ErrInvalid = errors.New("invalid docker node request")
	ErrUnsafe  = errors.New("unsafe docker node request")
	ErrVolume  = errors.New("invalid persistent volume")
)

// Error is a refusal: Msg for people, Err one of the sentinels.
type Error struct {
	Err error
	Msg string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Flag is the operator's switch, on the agent and on the controller (for
// its embedded agent): the refusals name it.
const Flag = "--docker-allow-unsafe"

// Policy is what the operator allows beyond the rule. Its zero value
// confines every node.
type Policy struct {
	// Unsafe allows privileged nodes and capabilities outside Allowed.
	// Such a node can take the host: only for images the operator trusts
	// as much as the host's root.
	Unsafe bool
}

// Request is what a node asks for.
type Request struct {
	Node         string // the node's name, for messages
	Privileged   bool
	CapAdd       []string // nil means DefaultCapAdd
	ExtraVolumes []string
	// Sysctls are set by the Engine as the container starts. /proc/sys is
	// read-only inside, so these are how a node turns forwarding on or
	// IPv6 off; only net.* (each network namespace has its own).
	Sysctls map[string]string
}

// Bounds of a request.
const (
	MaxCapAdd     = 64
	MaxVolumes    = 64
	MaxVolumePath = 255
	MaxSysctls    = 64
	maxCapName    = 32
	maxSysctl     = 128 // bytes of a sysctl's name, and of its value
)

// DefaultCapAdd is what a node gets when it names no capabilities: enough
// for routers and hosts in their own network namespace (FRR's zebra,
// ospfd, bgpd, isisd; ip, tc, ping, tcpdump). FRR 8 also asks for
// SYS_ADMIN as it starts and exits without it: scripts/node-images shows
// how an image leaves it out of the request.
var DefaultCapAdd = []string{"NET_ADMIN", "NET_RAW"}

// Allowed are the capabilities a node may add without the operator's
// flag, each with why it is safe: every node has a network namespace of
// its own (NetworkMode none), a mount, PID, IPC and UTS namespace, and
// the Engine's seccomp profile.
var Allowed = map[string]string{
	"NET_ADMIN": "interfaces, addresses, routes (FRR's zebra), tc, netfilter, bridges, VRFs and tunnels: " +
		"of the node's own network namespace only",
	"NET_RAW": "raw and packet sockets on the node's own interfaces: OSPF (IP protocol 89), IS-IS, " +
		"ping, tcpdump, DHCP clients",
	"NET_BIND_SERVICE": "ports below 1024 for non-root daemons (bgpd's 179, web servers)",
	"NET_BROADCAST":    "broadcast and multicast sockets; grants nothing else on Linux",
	"IPC_LOCK":         "mlock: routing daemons and user-space data planes lock their memory; memory, not privilege",
	"SYS_NICE": "priorities and CPU affinity of the node's own processes for timing-sensitive daemons " +
		"(BFD, packet generators): it can cost the host CPU time, not privilege (the Engine gives " +
		"containers no real-time budget)",
	// The Engine's defaults: every container has them, naming them
	// changes nothing.
	"AUDIT_WRITE":  "an Engine default",
	"CHOWN":        "an Engine default",
	"DAC_OVERRIDE": "an Engine default",
	"FOWNER":       "an Engine default",
	"FSETID":       "an Engine default",
	"KILL":         "an Engine default",
	"MKNOD":        "an Engine default (the device cgroup still limits which devices open)",
	"SETFCAP":      "an Engine default",
	"SETGID":       "an Engine default",
	"SETPCAP":      "an Engine default",
	"SETUID":       "an Engine default",
	"SYS_CHROOT":   "an Engine default",
}

// known are every Linux capability's name, and ALL: a name outside them
// is a typo, refused as such.
var known = []string{
	"ALL", "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE",
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL",
	"LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_ADMIN",
	"SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
}

// Capability returns a capability's name as Allowed spells it: upper
// case, without CAP_ (the Engine takes either).
func Capability(name string) (string, error) {
	c := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")
	if len(name) > maxCapName || !slices.Contains(known, c) {
		return "", fmt.Errorf("%q is not a Linux capability", Truncate(name))
	}
	return c, nil
}

// Check applies the rule to r: nil, or an *Error. With p.Unsafe it still
// refuses malformed requests and volumes where none may be.
func (p Policy) Check(r Request) error {
	bad := func(err error, format string, a ...any) error {
		return &Error{Err: err, Msg: fmt.Sprintf("Node %s: ", r.Node) + fmt.Sprintf(format, a...)}
	}
	if len(r.CapAdd) > MaxCapAdd {
		return bad(ErrInvalid, "cap_add must be a list of at most %d capabilities", MaxCapAdd)
	}
	for _, c := range r.CapAdd {
		if _, err := Capability(c); err != nil {
			return bad(ErrInvalid, "cap_add: %v", err)
		}
	}
	if len(r.ExtraVolumes) > MaxVolumes {
		return &Error{Err: ErrVolume, Msg: fmt.Sprintf("at most %d extra volumes", MaxVolumes)}
	}
	for _, v := range r.ExtraVolumes {
		if _, err := Volume(v); err != nil {
			return err
		}
	}
	if len(r.Sysctls) > MaxSysctls {
		return bad(ErrInvalid, "sysctls must be at most %d", MaxSysctls)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Sysctls)) {
		if err := Sysctl(k, r.Sysctls[k]); err != nil {
			return bad(ErrInvalid, "sysctls: %v", err)
		}
	}
	if unsafe := Unsafe(r); len(unsafe) > 0 && !p.Unsafe {
		return bad(ErrUnsafe, "%s can take this host's root: refused unless the operator starts the agent with %s (LABTAP_DOCKER_ALLOW_UNSAFE=true); the capabilities a node may add are %s",
			strings.Join(unsafe, ", "), Flag, strings.Join(slices.Sorted(maps.Keys(Allowed)), ", "))
	}
	return nil
}

// Unsafe returns what of r needs the operator's flag: "privileged" and
// each capability outside Allowed, in r's order; nil for a confined node.
// Names that are no capability are left to Check.
func Unsafe(r Request) []string {
	var out []string
	if r.Privileged {
		out = append(out, "privileged")
	}
	for _, c := range r.CapAdd {
		if n, err := Capability(c); err == nil && Allowed[n] == "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Sysctl checks one of a node's sysctls: a net.* name (the node's own
// network namespace: a kernel setting of the host's is no node's to
// change) of letters, digits, '_', '-' and '.', and a value of at most
// 128 printable bytes. A name that the kernel does not know, or that
// names an interface (they appear after the start), fails the start.
func Sysctl(name, value string) error {
	if len(name) > maxSysctl || !strings.HasPrefix(name, "net.") || strings.Contains(name, "..") || strings.HasSuffix(name, ".") ||
		strings.ContainsFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
		}) {
		return fmt.Errorf("%q is not a net.* sysctl", Truncate(name))
	}
	if len(value) > maxSysctl || strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
		return fmt.Errorf("%s: value of more than %d bytes or with control characters", name, maxSysctl)
	}
	return nil
}

// notVolumes are where no persistent volume may be: the kernel's file
// systems (a bind of the node's directory over /proc or /sys would undo
// the masks that keep the node off the host's kernel settings) and
// labtap's own mounts.
var notVolumes = []string{"/proc", "/sys", "/dev", "/labtap", "/gns3volumes"}

// Volume checks one persistent volume path and returns it cleaned: an
// absolute path without "..", not the root, not in a kernel file system
// or labtap's mounts, without ':' (GNS3_VOLUMES joins them with it) or a
// control character, at most MaxVolumePath bytes. Its refusal is GNS3's
// message.
func Volume(v string) (string, error) {
	c := path.Clean(v)
	bad := !strings.HasPrefix(v, "/") || strings.Contains(v, "..") || c == "/" || len(v) > MaxVolumePath ||
		strings.ContainsFunc(v, func(r rune) bool { return r == ':' || r < 0x20 || r == 0x7f })
	for _, n := range notVolumes {
		bad = bad || c == n || strings.HasPrefix(c, n+"/")
	}
	if bad {
		return "", &Error{Err: ErrVolume, Msg: fmt.Sprintf("Persistent volume '%s' has invalid format. It must start with a '/' and not contain '..'.", Truncate(v))}
	}
	return c, nil
}

// Truncate shortens what a message quotes of a client's string.
func Truncate(s string) string {
	if len(s) > MaxVolumePath+1 {
		return s[:MaxVolumePath] + "…"
	}
	return s
}
