package docker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"

	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

const hostImage = "labtap/host:bookworm"

// buildInit builds the static init once per test binary.
func buildInit(t *testing.T) string {
	t.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("labtap-init-test-%d", os.Getpid()))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	cmd := exec.Command("go", "build", "-o", path, "./init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build init: %v: %s", err, out)
	}
	return path
}

func testEngine(t *testing.T) *Engine {
	t.Helper()
	testenv.Docker(t, hostImage)
	e, err := Connect(context.Background())
	if err != nil {
		testenv.SkipOrFail(t, "LABTAP_DOCKER", err.Error())
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// dexec runs a command in a container and returns its output.
func dexec(t *testing.T, id string, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", id}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %v: %v: %s", args, err, out)
	}
	return string(out)
}

func newTestContainer(t *testing.T, e *Engine, adapters int, stopped *atomic.Int32) (*Container, Config) {
	t.Helper()
	var ads []Adapter
	for i := range adapters {
		ads = append(ads, Adapter{MAC: net.HardwareAddr{0x02, 0x42, 0xaa, 0xbb, 0xcc, byte(i)}})
	}
	cfg := Config{
		Engine:    e,
		ComputeID: "test-" + uuid.NewString()[:8],
		ProjectID: uuid.NewString(),
		NodeID:    uuid.NewString(),
		Name:      "host-1",
		Dir:       t.TempDir(),
		Props:     Properties{Image: hostImage, StartCommand: ptr("sleep infinity")},
		Adapters:  ads,
		InitPath:  buildInit(t),
		OnStop:    func() { stopped.Add(1) },
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background()) })
	return c, cfg
}

func ptr[T any](v T) *T { return &v }

func TestContainerLifecycleAndInterfaces(t *testing.T) {
	e := testEngine(t)
	var stopped atomic.Int32
	c, cfg := newTestContainer(t, e, 2, &stopped)
	ctx := context.Background()
	id := c.ID()
	ins, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct := ins.Container
	if ct.Name != "/labtap-"+cfg.NodeID || ct.Config.Labels[LabelNode] != cfg.NodeID || ct.Config.Labels[LabelProject] != cfg.ProjectID ||
		ct.HostConfig.NetworkMode != "none" || ct.HostConfig.Privileged || ct.Config.Entrypoint[0] != "/labtap/init" {
		t.Fatalf("container %s: name %s labels %v network %s privileged %v entrypoint %v", id, ct.Name, ct.Config.Labels,
			ct.HostConfig.NetworkMode, ct.HostConfig.Privileged, ct.Config.Entrypoint)
	}
	if got := c.Properties()["container_id"]; got != id {
		t.Fatalf("properties container_id %v", got)
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Status() != node.Started {
		t.Fatalf("status %s", c.Status())
	}
	// Inside: eth0 and eth1 with the adapters' MACs, up, TX checksumming off.
	links := dexec(t, id, "ip", "-o", "link")
	for i := range 2 {
		want := fmt.Sprintf("eth%d@", i)
		line := ""
		for l := range strings.SplitSeq(links, "\n") {
			if strings.Contains(l, want) {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, cfg.Adapters[i].MAC.String()) || !strings.Contains(line, "UP") || !strings.Contains(line, "mtu 1500") {
			t.Fatalf("eth%d in the container: %q (all: %s)", i, line, links)
		}
		idx, ok := c.HostEnd(i)
		host, err := netlink.LinkByIndex(idx)
		if !ok || err != nil || host.Attrs().Name != HostEndName(cfg.ProjectID, cfg.NodeID, i) || host.Attrs().MTU != hostMTU {
			t.Fatalf("host end %d: %v %v %+v", i, ok, err, host)
		}
	}
	var txcsum uint32
	if err := inNetns(c.run.ns, func() error {
		fd, _ := syscallSocket()
		defer closeFd(fd)
		var err error
		txcsum, err = ethtoolGet(fd, "eth0", 0x16 /* ETHTOOL_GTXCSUM */)
		return err
	}); err != nil || txcsum != 0 {
		t.Fatalf("eth0 tx checksumming %d, %v; want off", txcsum, err)
	}

	// Suspend pauses; start resumes.
	if err := c.Suspend(ctx); err != nil || c.Status() != Suspended {
		t.Fatalf("suspend: %v, %s", err, c.Status())
	}
	if err := c.Start(ctx); err != nil || c.Status() != node.Started {
		t.Fatalf("resume: %v, %s", err, c.Status())
	}

	// An agent restart: a new runner for the same node adopts the running
	// container and its veths, untouched.
	first, _ := c.HostEnd(0)
	cfg2 := cfg
	cfg2.OnStop = func() { stopped.Add(1) }
	c2, err := New(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if c2.ID() != id || c2.Status() != node.Started {
		t.Fatalf("after restart: container %s status %s, want %s started", c2.ID(), c2.Status(), id)
	}
	if again, ok := c2.HostEnd(0); !ok || again != first {
		t.Fatalf("host end after adoption %d, want %d", again, first)
	}
	c.mu.Lock()
	c.run.stop() // the old runner stops watching, as a dead agent would
	c.mu.Unlock()

	// Stop: the node is marked stopped, the veths are gone with the netns.
	if err := c2.Stop(ctx); err != nil || c2.Status() != node.Stopped {
		t.Fatalf("stop: %v %s", err, c2.Status())
	}
	if _, err := netlink.LinkByName(HostEndName(cfg.ProjectID, cfg.NodeID, 0)); err == nil {
		t.Fatal("host end still there after stop")
	}
	// Start again: new veths, same container.
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c2.ID() != id {
		t.Fatal("restart made a new container")
	}
	// A container that exits by itself is noticed.
	before := stopped.Load()
	if out, err := exec.Command("docker", "kill", id).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c2.Status() != node.Stopped || stopped.Load() == before {
		if time.Now().After(deadline) {
			t.Fatalf("a killed container still %s", c2.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Delete removes the container.
	if err := c2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("container still there after delete")
	}
}

func TestContainerConsoleRunsWhatIsTyped(t *testing.T) {
	e := testEngine(t)
	var stopped atomic.Int32
	c, _ := newTestContainer(t, e, 1, &stopped)
	c.cfg.Props.StartCommand = nil // the image's own command: a login shell on the TTY
	ctx := context.Background()
	if err := c.Delete(ctx); err != nil { // made again with the image's command
		t.Fatal(err)
	}
	if err := c.create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	port, kind := c.Console()
	if kind != "telnet" {
		t.Fatalf("console type %s", kind)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// NAWS: a 132×40 window, then a command that shows it took.
	conn.Write([]byte{255, 250, 31, 0, 132, 0, 40, 255, 240})
	marker := "lt" + uuid.NewString()[:8]
	fmt.Fprintf(conn, "stty size; echo %s-$((6*7)) > /tmp/console-proof\r", marker)
	var got []byte
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for !bytes.Contains(got, []byte("console is now available")) || !bytes.Contains(got, []byte("40 132")) {
		if time.Now().After(deadline) {
			t.Fatalf("console said %q", got)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := conn.Read(buf)
		got = append(got, buf[:n]...)
	}
	for {
		out, _ := exec.Command("docker", "exec", c.ID(), "cat", "/tmp/console-proof").CombinedOutput()
		if strings.TrimSpace(string(out)) == marker+"-42" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command typed on the console did not run: %q; console: %q", out, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
