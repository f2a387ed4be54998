package node

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"go.uber.org/goleak"
)

func TestUDPWatchWakesWaitersOfBoundPortsOnly(t *testing.T) {
	w := &udpWatch{every: 5 * time.Millisecond, files: udpWatcher.files}
	free, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.LocalAddr().(*net.UDPAddr).Port
	free.Close() // now unbound: its waiter must not wake

	idle, forgetIdle := w.bound(freePort)
	defer forgetIdle()

	// Many waiters on ports bound after they start waiting: all wake.
	var conns []net.PacketConn
	var chans []<-chan struct{}
	for range 20 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		ch, forget := w.bound(c.LocalAddr().(*net.UDPAddr).Port)
		defer forget()
		chans = append(chans, ch)
	}
	c6, err := net.ListenPacket("udp6", "[::1]:0")
	if err == nil { // IPv6 loopback may be off
		conns = append(conns, c6)
		ch, forget := w.bound(c6.LocalAddr().(*net.UDPAddr).Port)
		defer forget()
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d: port %s bound but never reported", i, conns[i].LocalAddr())
		}
	}
	select {
	case <-idle:
		t.Fatalf("port %d is not bound but its waiter woke", freePort)
	case <-time.After(50 * time.Millisecond):
	}
	port := conns[0].LocalAddr().(*net.UDPAddr).Port
	if !udpBound(port) {
		t.Fatalf("udpBound(%d) = false while bound", port)
	}
	for _, c := range conns {
		c.Close()
	}
	if udpBound(port) {
		t.Fatalf("udpBound(%d) = true after close", port)
	}
}

// The last waiter to leave stops the poller and waits for it: once its
// forget returns, no goroutine of the watch is left, though the poller's
// next tick is an hour away.
func TestUDPWatchPollerEndsWithItsLastWaiter(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := &udpWatch{every: time.Hour, files: udpWatcher.files}
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 { // and again: a poller after a poller
		// A bound port's waiter wakes at the poller's first tick; port 1's
		// (nobody binds it here) keeps the poller waiting for its next.
		seen, forgetSeen := w.bound(c.LocalAddr().(*net.UDPAddr).Port)
		_, forget := w.bound(1)
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			t.Fatal("the poller never ticked")
		}
		forgetSeen()
		forget()
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("a poller outlived its waiters: %v", err)
	}
	for i, f := range w.open {
		if f != nil {
			t.Errorf("table %s still open after the poller ended", w.files[i])
		}
	}
}

func TestLocalPortParsesProcNetUDPLines(t *testing.T) {
	for _, c := range []struct {
		line string
		port int
		ok   bool
	}{
		{"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops", 0, false},
		{"  130: 0100007F:A3F1 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 123 2 0000000000000000 0", 0xA3F1, true},
		{"  7: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 1 2 0 0", 53, true},
		{"garbage", 0, false},
	} {
		port, ok := localPort([]byte(c.line))
		if port != c.port || ok != c.ok {
			t.Errorf("localPort(%q) = %d, %v; want %d, %v", c.line, port, ok, c.port, c.ok)
		}
	}
}

// udpBound reports whether a UDP socket of this network namespace is bound
// to port, from /proc/net/udp and /proc/net/udp6.
func udpBound(port int) bool {
	// A watch of its own: a watch is scanned by one goroutine only.
	return (&udpWatch{files: udpWatcher.files}).scan(map[int]bool{port: true})[port]
}

// BenchmarkUDPWatchTick measures one poll of the table (every 20 ms while
// a node starts) with 200 sockets bound, as a 200-VPCS lab has, and 20
// nodes waiting for ports nobody binds: its time and allocations per tick.
func BenchmarkUDPWatchTick(b *testing.B) {
	for range 200 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
	}
	w := &udpWatch{every: time.Hour, files: udpWatcher.files}
	w.manual = true // no poller: the benchmark ticks
	for port := 1; port <= 20; port++ {
		_, forget := w.bound(port)
		defer forget()
	}
	b.ReportAllocs()
	for b.Loop() {
		if !w.tick(nil) {
			b.Fatal("the waiters were woken")
		}
	}
}

// The poller keeps the tables open from tick to tick: each tick must read
// them anew, whole (here through a buffer far smaller than a table), and
// the poller closes them when no one waits any more.
func TestUDPWatchTicksSeeSocketsBoundSinceTheLastTick(t *testing.T) {
	w := &udpWatch{every: time.Hour, files: udpWatcher.files}
	w.manual = true // no poller: the test ticks
	w.buf = make([]byte, 0, 16)
	var conns []net.PacketConn
	for range 50 { // a table of several reads
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	free, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.LocalAddr().String()
	port := free.LocalAddr().(*net.UDPAddr).Port
	free.Close()
	ch, forget := w.bound(port)
	defer forget()
	for range 3 {
		if !w.tick(nil) {
			t.Fatal("a waiter of an unbound port was woken")
		}
	}
	// Every socket of a table read in pieces is seen.
	want := map[int]bool{}
	for _, c := range conns {
		want[c.LocalAddr().(*net.UDPAddr).Port] = true
	}
	if found := w.scan(want); len(found) != len(want) {
		t.Fatalf("%d of %d bound ports found", len(found), len(want))
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("port %d taken meanwhile: %v", port, err)
	}
	defer c.Close()
	if w.tick(nil) {
		t.Fatalf("port %d bound, but the tick after did not see it", port)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the waiter of a bound port was not woken")
	}
	for i, f := range w.open {
		if f != nil {
			t.Errorf("table %s still open after the poller ended", w.files[i])
		}
	}
}

// BenchmarkUDPWatchTickProcfs is what a tick would cost through
// prometheus/procfs's /proc/net/udp parser, with the sockets of
// BenchmarkUDPWatchTick: the reason the poller keeps its own parser.
func BenchmarkUDPWatchTickProcfs(b *testing.B) {
	for range 200 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		b.Skip(err)
	}
	want := map[int]bool{}
	for port := 1; port <= 20; port++ {
		want[port] = true
	}
	b.ReportAllocs()
	for b.Loop() {
		found := 0
		for _, read := range []func() (procfs.NetUDP, error){fs.NetUDP, fs.NetUDP6} {
			lines, err := read()
			if err != nil {
				continue
			}
			for _, l := range lines {
				if want[int(l.LocalPort)] {
					found++
				}
			}
		}
		if found != 0 {
			b.Fatal("a wanted port is bound")
		}
	}
}
