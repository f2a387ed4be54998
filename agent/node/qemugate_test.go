package node

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// TestQemuTelnetConsolePassesTheGate: a QEMU node's telnet console (the
// agent's listener in front of QEMU's serial socket) lets in only the
// addresses granted for the node, and a revocation cuts one off.
func TestQemuTelnetConsolePassesTheGate(t *testing.T) {
	testenv.Long(t, "runs QEMU")
	if len(QemuBinaries()) == 0 {
		testenv.SkipOrFail(t, "LABTAP_QEMU", "no qemu-system binary")
	}
	gate := NewConsoleGate(true)
	key := ConsoleKey("p", "n")
	dir := t.TempDir()
	q, err := NewQemu(QemuConfig{NodeID: "0f0e0d0c-0b0a-4908-8706-050403020100", Name: "r1", Dir: dir, ImagesDir: t.TempDir(),
		RuntimeDir: filepath.Join(os.TempDir(), "labtap-qemugate-"+filepath.Base(dir)), Accel: "tcg",
		ConsoleGate: gate.Wrap(key)})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop(context.Background()) })
	port, kind := q.Console()
	if kind != "telnet" {
		t.Fatalf("console type %s", kind)
	}
	dial := func(from string) (net.Conn, *bufio.Reader) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial("127.0.0.3")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line := readLine(t, r); !strings.Contains(line, "not open to 127.0.0.3") {
		t.Fatalf("an address not granted read %q", line)
	}
	gate.Grant(key, netip.MustParseAddr("127.0.0.3"), time.Minute)
	c, r = dial("127.0.0.3")
	// Let in: the telnet options come first (the console's greeting).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := r.ReadByte(); err != nil || b != iac {
		t.Fatalf("the granted address read %v, %v; want the telnet greeting", b, err)
	}
	gate.Revoke(key, netip.MustParseAddr("127.0.0.3"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := r.ReadByte(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the revoked connection was not closed")
			}
			break
		}
	}
}
