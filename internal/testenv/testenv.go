// Package testenv holds what the tests of several packages need from the
// machine they run on: the tools they drive, and whether a test that cannot
// run here may skip. It is imported by tests only.
package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RequireTools skips the test when one of tools is not on PATH, or fails it
// when LABTAP_REQUIRE_TOOLS is set (scripts/test sets it and installs them).
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			SkipOrFail(t, "LABTAP_REQUIRE_TOOLS", tool+" is not installed; scripts/test installs it")
		}
	}
}

// HaveTool reports whether tool is on PATH, for a check a test adds where
// the tool is (a second reader of a file, say). Where it is not, the test
// logs that it made the check without it, or fails when
// LABTAP_REQUIRE_TOOLS is set: scripts/test installs the tool, so a check
// left out there is a hole, not a skip.
func HaveTool(t testing.TB, tool string) bool {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("LABTAP_REQUIRE_TOOLS") != "" {
			t.Fatalf("%s is not installed; scripts/test installs it", tool)
		}
		t.Logf("%s is not installed: its check is left out", tool)
		return false
	}
	return true
}

// SkipOrFail skips a test that cannot run here, or fails it when the
// environment variable require is set: a run that asked for every test of
// that kind must not pass by skipping them.
func SkipOrFail(t testing.TB, require, why string) {
	t.Helper()
	if os.Getenv(require) != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Long skips a test under -short, the unit tier: one that builds and runs
// labtap's binaries, needs Docker, QEMU or network namespaces, or drives a
// whole lab. why says which; scripts/test runs it.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + why)
	}
}

// RequireUserNamespaces skips the test where unshare cannot make a user
// namespace (with a mount namespace), or fails it when LABTAP_REQUIRE_USERNS
// is set (scripts/test sets it where they work).
func RequireUserNamespaces(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		SkipOrFail(t, "LABTAP_REQUIRE_USERNS", "unshare (util-linux) is not installed; scripts/test installs it")
	}
	if out, err := exec.Command("unshare", "-rm", "true").CombinedOutput(); err != nil {
		SkipOrFail(t, "LABTAP_REQUIRE_USERNS", fmt.Sprintf("this kernel refuses user namespaces: %v %s", err, out))
	}
}

// LoopbackUDP returns a UDP socket on 127.0.0.1 at an ephemeral port, closed
// when the test ends.
func LoopbackUDP(t testing.TB) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// UnusedUDPPort returns a UDP port of 127.0.0.1 that is free now, for a
// test that must name the port a labtap part binds (a cloud node's lport).
// A port the kernel handed out for port 0 and the test closed can be handed
// to any other socket of the machine before the part binds it (the tests of
// several packages bind relays, fakes and consoles at once); this one is
// below the kernel's ephemeral range, which only an explicit bind to it
// takes. It never returns a port twice in a process.
func UnusedUDPPort(t testing.TB) int {
	t.Helper()
	low := 32768 // the kernel's default ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const first = 10000 // above the well-known ports and VPCS's defaults
	if low <= first+100 {
		t.Fatalf("the ephemeral port range starts at %d: no port below it to take", low)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := first + rand.IntN(low-first)
		if portsGiven[p] {
			continue
		}
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			continue // taken
		}
		c.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("no free UDP port in %d-%d", first, low-1)
	return 0
}

// UnusedTCPPorts returns the first of n consecutive TCP ports on
// 127.0.0.1, each free now, below the ephemeral range (so no port-0
// socket or outgoing connection takes one before the test binds them), and
// never given to another test of this process: for a program that binds
// ports it is told, as docker-compose publishing a lab's ports.
func UnusedTCPPorts(t testing.TB, n int) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const first = 10000
	if low <= first+n+100 {
		t.Fatalf("the ephemeral port range starts at %d: no %d ports below it to take", low, n)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
search:
	for range 1000 {
		p := first + rand.IntN(low-first-n)
		for q := p; q < p+n; q++ {
			if portsGiven[q] {
				continue search
			}
			ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				continue search // taken
			}
			ln.Close()
		}
		for q := p; q < p+n; q++ {
			portsGiven[q] = true
		}
		return p
	}
	t.Fatalf("no %d free TCP ports in a row in %d-%d", n, first, low-1)
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Docker skips a test (or fails it, under LABTAP_DOCKER=1) when no Docker
// Engine answers, when it is root-less, or under -short, and makes sure the
// images it needs exist: scripts/node-images builds labtap/frr:bookworm and
// labtap/host:bookworm from the local Debian base (nothing is pulled), and
// is run here once when one is missing.
func Docker(t testing.TB, images ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Docker Engine")
	}
	if os.Geteuid() != 0 {
		// scripts/test asks for the tests that need root with LABTAP_REQUIRE_NETNS.
		SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "docker nodes need root (veths in the containers' network namespaces)")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		SkipOrFail(t, "LABTAP_DOCKER", "docker is not installed")
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.APIVersion}}").CombinedOutput(); err != nil {
		SkipOrFail(t, "LABTAP_DOCKER", "no Docker Engine answers: "+string(out))
	}
	for _, im := range images {
		if exec.Command("docker", "image", "inspect", im).Run() == nil {
			continue
		}
		imagesOnce.Do(func() {
			root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
			if err != nil {
				imagesErr = err
				return
			}
			cmd := exec.Command(filepath.Join(strings.TrimSpace(string(root)), "scripts", "node-images"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				imagesErr = fmt.Errorf("scripts/node-images: %v: %s", err, out)
			}
		})
		if imagesErr != nil {
			SkipOrFail(t, "LABTAP_DOCKER", imagesErr.Error())
		}
		if exec.Command("docker", "image", "inspect", im).Run() != nil {
			SkipOrFail(t, "LABTAP_DOCKER", "no image "+im+" after scripts/node-images")
		}
	}
}

var (
	imagesOnce sync.Once
	imagesErr  error
)
