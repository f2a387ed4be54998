package bridge

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

var loopback0 = netip.MustParseAddrPort("127.0.0.1:0")

// emulator is a UDP socket standing in for an emulator's NIC.
type emulator struct {
	t    *testing.T
	conn *net.UDPConn
}

func newEmulator(t *testing.T) *emulator {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loopback0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadBuffer(4 << 20) // tests send bursts before they read
	return &emulator{t: t, conn: c}
}

func (e *emulator) addr() netip.AddrPort { return e.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (e *emulator) sendTo(to netip.AddrPort, frame []byte) {
	e.t.Helper()
	if _, err := e.conn.WriteToUDPAddrPort(frame, to); err != nil {
		e.t.Fatal(err)
	}
}

// recv returns the next frame, or nil after d.
func (e *emulator) recv(d time.Duration) []byte {
	e.t.Helper()
	buf := make([]byte, 65536)
	e.conn.SetReadDeadline(time.Now().Add(d))
	n, _, err := e.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// facing opens an unconnected port facing em and serves it until the test ends.
func facing(t *testing.T, em *emulator) *UDPPort {
	t.Helper()
	p, err := ListenUDP(UDPConfig{Local: loopback0, Peer: em.addr()})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p)
	return p
}

func serve(t *testing.T, p *UDPPort) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

type recordingTap struct {
	mu     sync.Mutex
	frames [][]byte
	dirs   []Direction
}

func (r *recordingTap) WritePackets(dir Direction, frames [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range frames {
		r.frames = append(r.frames, bytes.Clone(f))
		r.dirs = append(r.dirs, dir)
	}
}

func (r *recordingTap) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

func TestLinkRelaysBothDirectionsAndTapsEveryForwardedFrame(t *testing.T) {
	emA, emB := newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	l := NewLink(pa, pb, nil)
	defer l.Close()
	tap := &recordingTap{}
	l.SetTap(tap)

	emA.sendTo(pa.LocalAddr(), []byte("from A"))
	if got := emB.recv(2 * time.Second); string(got) != "from A" {
		t.Fatalf("B received %q, want %q", got, "from A")
	}
	emB.sendTo(pb.LocalAddr(), []byte("from B"))
	if got := emA.recv(2 * time.Second); string(got) != "from B" {
		t.Fatalf("A received %q, want %q", got, "from B")
	}
	big := bytes.Repeat([]byte{7}, 9000) // a jumbo frame survives whole
	emA.sendTo(pa.LocalAddr(), big)
	if got := emB.recv(2 * time.Second); !bytes.Equal(got, big) {
		t.Fatalf("B received %d bytes, want the 9000-byte frame", len(got))
	}
	if tap.len() != 3 || string(tap.frames[0]) != "from A" || tap.dirs[0] != AtoB ||
		string(tap.frames[1]) != "from B" || tap.dirs[1] != BtoA || !bytes.Equal(tap.frames[2], big) {
		t.Fatalf("tap saw %d frames %q dirs %v", tap.len(), tap.frames[:min(2, tap.len())], tap.dirs)
	}
	// The counter moves just after the send: wait for it.
	waitFor(t, func() bool { return l.Stats()[AtoB].Forwarded == 2 && l.Stats()[BtoA].Forwarded == 1 })
}

func TestSuspendedLinkDropsEverythingAndResumes(t *testing.T) {
	emA, emB := newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	l := NewLink(pa, pb, mustFilters(t, FilterConfig{Suspend: true}))
	defer l.Close()
	tap := &recordingTap{}
	l.SetTap(tap)
	emA.sendTo(pa.LocalAddr(), []byte("lost"))
	if got := emB.recv(200 * time.Millisecond); got != nil {
		t.Fatalf("suspended link forwarded %q", got)
	}
	l.SetFilters(nil)
	emA.sendTo(pa.LocalAddr(), []byte("kept"))
	if got := emB.recv(2 * time.Second); string(got) != "kept" {
		t.Fatalf("resumed link delivered %q, want %q", got, "kept")
	}
	if tap.len() != 1 {
		t.Fatalf("tap saw %d frames, want only the forwarded one", tap.len())
	}
	waitFor(t, func() bool { return l.Stats()[AtoB].Filtered == 1 })
}

func TestUnconnectedPortIgnoresStrangersAndFollowsItsPeer(t *testing.T) {
	emA, emB, stranger := newEmulator(t), newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	defer NewLink(pa, pb, nil).Close()
	stranger.sendTo(pa.LocalAddr(), []byte("spoofed"))
	if got := emB.recv(200 * time.Millisecond); got != nil {
		t.Fatalf("a frame from a stranger was forwarded: %q", got)
	}
	waitFor(t, func() bool { return pa.Stats().Strays == 1 })
	// The emulator behind B restarts on a new port: the port follows it.
	emB2 := newEmulator(t)
	pb.SetPeer(emB2.addr())
	emA.sendTo(pa.LocalAddr(), []byte("to the new B"))
	if got := emB2.recv(2 * time.Second); string(got) != "to the new B" {
		t.Fatalf("new peer received %q", got)
	}
	// No peer: frames are dropped and counted, not an error.
	pb.SetPeer(netip.AddrPort{})
	emA.sendTo(pa.LocalAddr(), []byte("nowhere"))
	waitFor(t, func() bool { return pb.Stats().Unrouted == 1 })
}

func TestConnectedPortsFormATunnel(t *testing.T) {
	// Two agents' tunnel ends, each bound to its own port and connected to
	// the other's, so that each takes frames from its peer only.
	t1, err := ListenUDP(UDPConfig{Local: loopback0})
	if err != nil {
		t.Fatal(err)
	}
	a1 := t1.LocalAddr()
	t1.Close()
	t2, err := ListenUDP(UDPConfig{Local: loopback0, Peer: a1, Connect: true})
	if err != nil {
		t.Fatal(err)
	}
	t1, err = ListenUDP(UDPConfig{Local: a1, Peer: t2.LocalAddr(), Connect: true})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, t1)
	serve(t, t2)
	emA, emB := newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	defer NewLink(pa, t1, nil).Close() // agent 1: node port ↔ tunnel
	defer NewLink(t2, pb, nil).Close() // agent 2: tunnel ↔ node port
	emA.sendTo(pa.LocalAddr(), []byte("across"))
	if got := emB.recv(2 * time.Second); string(got) != "across" {
		t.Fatalf("B received %q through the tunnel", got)
	}
	emB.sendTo(pb.LocalAddr(), []byte("back"))
	if got := emA.recv(2 * time.Second); string(got) != "back" {
		t.Fatalf("A received %q through the tunnel", got)
	}
}

func TestSendToAbsentPeerIsNotAnError(t *testing.T) {
	gone := newEmulator(t)
	addr := gone.addr()
	gone.conn.Close()
	p, err := ListenUDP(UDPConfig{Local: loopback0, Peer: addr, Connect: true})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p)
	for range 3 { // the second send sees the ICMP port-unreachable of the first
		p.Send([][]byte{[]byte("x")}) // must neither fail nor block
		time.Sleep(10 * time.Millisecond)
	}
	if st := p.Stats(); st.TxFrames+st.TxErrors != 3 {
		t.Fatalf("port stats %+v: every frame is either sent or counted as an error", st)
	}
}

func TestLinkCloseStopsRelaying(t *testing.T) {
	emA, emB := newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	l := NewLink(pa, pb, nil)
	l.Close()
	l.Close() // twice is fine
	emA.sendTo(pa.LocalAddr(), []byte("after close"))
	if got := emB.recv(200 * time.Millisecond); got != nil {
		t.Fatalf("closed link forwarded %q", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	// Often at first (what it waits for takes microseconds), then every 5 ms.
	for wait := 10 * time.Microsecond; !cond(); wait = min(2*wait, 5*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(wait)
	}
}

func mustFilters(t testing.TB, cfg FilterConfig) *Filters {
	t.Helper()
	f, err := NewFilters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
