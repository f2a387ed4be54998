package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
)

// These reproduce escapes from docker nodes through the controller's API
// with the real Docker Engine; each failed on the code before the fix.

// capEff reads the effective capabilities of a container's PID 1.
func capEff(t *testing.T, n nodeReply) uint64 {
	t.Helper()
	out, err := inNode(t, n, "grep", "^CapEff:", "/proc/1/status")
	if err != nil {
		t.Fatalf("CapEff: %v: %s", err, out)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "CapEff:")), 16, 64)
	if err != nil {
		t.Fatalf("CapEff %q: %v", out, err)
	}
	return v
}

const (
	capSysModule = 16
	capSysAdmin  = 21
)

// startedNode creates a docker node of the host image with props added and
// starts it.
func (c *controller) startedNode(base, name string, props map[string]any) dockerReply {
	c.t.Helper()
	p := map[string]any{"image": hostImage, "start_command": "sleep infinity"}
	for k, v := range props {
		p[k] = v
	}
	var n dockerReply
	c.call("POST", base+"/nodes", map[string]any{"name": name, "node_type": "docker", "compute_id": "local", "properties": p}, 201, &n)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n.nodeReply)
	return n
}

func TestSecurityDefaultDockerNodeCannotWriteCorePatternAndLacksSysAdmin(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "confined")
	n := c.startedNode(base, "h", nil)
	// The same value written back: harmless if it went through, and on
	// the unfixed code it did (the host's core_pattern was the container's).
	if out, err := inNode(t, n.nodeReply, "sh", "-c", "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern"); err == nil {
		t.Fatalf("a default node wrote /proc/sys/kernel/core_pattern: %s", out)
	}
	if eff := capEff(t, n.nodeReply); eff&(1<<capSysAdmin) != 0 {
		t.Fatalf("PID 1 of a default node holds CAP_SYS_ADMIN: CapEff %016x", eff)
	}
	// What the aux console runs (docker exec) gets no more than PID 1.
	if out, _ := inNode(t, n.nodeReply, "grep", "^CapEff:", "/proc/self/status"); !strings.Contains(out, "CapEff") {
		t.Fatalf("exec CapEff: %q", out)
	} else if v, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "CapEff:")), 16, 64); v&(1<<capSysAdmin) != 0 {
		t.Fatalf("a shell exec'd in a default node holds CAP_SYS_ADMIN: %s", out)
	}
	// Docker's masked paths: each that exists on this host is a mount
	// point inside (a file hidden under /dev/null, a directory under an
	// empty read-only tmpfs), and /proc/sys is read-only.
	mounts, err := inNode(t, n.nodeReply, "cat", "/proc/1/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	masked := 0
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/acpi", "/sys/firmware", "/proc/scsi"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		masked++
		if !strings.Contains(mounts, " "+p+" ") {
			t.Errorf("%s is not masked in a default node", p)
		}
	}
	if masked == 0 {
		t.Fatal("none of Docker's masked paths exists on this host: nothing checked")
	}
	roSys := false
	for line := range strings.SplitSeq(mounts, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/proc/sys" && strings.HasPrefix(f[5], "ro") {
			roSys = true
		}
	}
	if !roSys {
		t.Errorf("/proc/sys is not mounted read-only in a default node:\n%s", mounts)
	}
	if out, _ := inNode(t, n.nodeReply, "grep", "^Seccomp:", "/proc/1/status"); !strings.Contains(out, "2") {
		t.Errorf("PID 1 of a default node runs without Docker's seccomp filter: %q", out)
	}
	if data, err := os.ReadFile("/sys/module/apparmor/parameters/enabled"); err == nil && strings.TrimSpace(string(data)) == "Y" {
		if out, _ := inNode(t, n.nodeReply, "cat", "/proc/1/attr/current"); !strings.Contains(out, "docker-default") {
			t.Errorf("PID 1 of a default node is not confined by docker-default: %q", out)
		}
	}
	c.call("DELETE", base, nil, 204, nil)
}

func TestSecurityDockerCapAddOutsideTheAllowlistAndPrivilegedNeedTheOperatorsFlag(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "caps")
	var e struct {
		Message string `json:"message"`
	}
	for _, props := range []map[string]any{
		{"cap_add": []string{"SYS_MODULE"}},
		{"cap_add": []string{"NET_ADMIN", "CAP_SYS_RAWIO"}},
		{"cap_add": []string{"dac_read_search"}},
		{"cap_add": []string{"SYS_ADMIN"}},
		{"cap_add": []string{"ALL"}},
		{"privileged": true},
	} {
		props["image"] = hostImage
		c.call("POST", base+"/nodes", map[string]any{"name": "bad", "node_type": "docker", "compute_id": "local", "properties": props}, 403, &e)
		if !strings.Contains(e.Message, "--docker-allow-unsafe") {
			t.Errorf("%v: message %q does not name the operator's flag", props, e.Message)
		}
	}
	for _, caps := range []any{[]string{"NOT_A_CAP"}, []string{""}, []any{7}, "NET_ADMIN", []string{strings.Repeat("A", 100)}} {
		c.call("POST", base+"/nodes", map[string]any{"name": "bad", "node_type": "docker", "compute_id": "local",
			"properties": map[string]any{"image": hostImage, "cap_add": caps}}, 400, &e)
	}
	c.call("POST", base+"/nodes", map[string]any{"name": "bad", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "privileged": "yes"}}, 400, &e)
	// Nothing was made by the refusals.
	var nodes []nodeReply
	c.call("GET", base+"/nodes", nil, 200, &nodes)
	if len(nodes) != 0 {
		t.Fatalf("refused nodes were made: %+v", nodes)
	}
	// An allowed capability: the node starts and uses it; one without it
	// starts too, and cannot.
	n := c.startedNode(base, "r", map[string]any{"cap_add": []string{"NET_ADMIN"}})
	if out, err := inNode(t, n.nodeReply, "ip", "addr", "add", "10.99.0.1/24", "dev", "eth0"); err != nil {
		t.Fatalf("NET_ADMIN node: ip addr add: %v: %s", err, out)
	}
	bare := c.startedNode(base, "bare", map[string]any{"cap_add": []string{}})
	if out, err := inNode(t, bare.nodeReply, "ip", "addr", "add", "10.99.0.2/24", "dev", "eth0"); err == nil {
		t.Fatalf("a node without NET_ADMIN configured an address: %s", out)
	}
	if out, _ := inNode(t, bare.nodeReply, "ip", "link", "show", "eth0"); !strings.Contains(out, "state UP") && !strings.Contains(out, ",UP") {
		t.Fatalf("the agent did not bring eth0 of a node without NET_ADMIN up: %s", out)
	}
	// An update cannot make an existing node unsafe either.
	c.call("POST", base+"/nodes/"+n.NodeID+"/stop", nil, 200, nil)
	c.call("PUT", base+"/nodes/"+n.NodeID, map[string]any{"properties": map[string]any{"privileged": true}}, 403, &e)
	c.call("DELETE", base, nil, 204, nil)

	// With the operator's flag: allowed, with a warning naming the node.
	u := startControllerWith(t, t.TempDir(), append(dockerInit(t), "LABTAP_DOCKER_ALLOW_UNSAFE=true"))
	base = newProject(u, "unsafe")
	m := u.startedNode(base, "modloader", map[string]any{"cap_add": []string{"SYS_MODULE"}})
	if eff := capEff(t, m.nodeReply); eff&(1<<capSysModule) == 0 {
		t.Fatalf("cap_add SYS_MODULE with the flag: CapEff %016x lacks it", eff)
	}
	if !strings.Contains(u.log.String(), "modloader") || !strings.Contains(u.log.String(), "unsafe") {
		t.Fatalf("no warning names the unsafe node:\n%s", u.log.String())
	}
	var p dockerReply
	u.call("POST", base+"/nodes", map[string]any{"name": "priv", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "privileged": true}}, 201, &p)
	u.call("DELETE", base, nil, 204, nil)
}

func TestSecurityDockerNodeWhoseCommandExitsAtOnceIsNotReportedStarted(t *testing.T) {
	testenv.Docker(t, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	base := newProject(c, "exits")
	var n dockerReply
	c.call("POST", base+"/nodes", map[string]any{"name": "h", "node_type": "docker", "compute_id": "local",
		"properties": map[string]any{"image": hostImage, "start_command": "sh -c 'echo it broke here; exit 3'"}}, 201, &n)
	var e struct {
		Message string `json:"message"`
	}
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 409, &e)
	if !strings.Contains(e.Message, "it broke here") {
		t.Fatalf("start of a node whose command exits: message %q lacks its output", e.Message)
	}
	c.call("GET", base+"/nodes/"+n.NodeID, nil, 200, &n)
	if n.Status != "stopped" {
		t.Fatalf("status %q after a failed start", n.Status)
	}
	c.call("DELETE", base, nil, 204, nil)
}
