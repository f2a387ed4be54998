// Package testenv holds what the tests of several packages need from the
// machine they run on: the tools they drive, and whether a test that cannot
// run here may skip. It is imported by tests only.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
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
