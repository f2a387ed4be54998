package bridge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/labtap/labtap/internal/testenv"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// auxCmsg builds the PACKET_AUXDATA control message the kernel writes for
// a received frame.
func auxCmsg(status uint32, tci, tpid uint16) []byte {
	b := make([]byte, unix.CmsgSpace(sizeofAuxdata))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_PACKET, unix.PACKET_AUXDATA
	h.SetLen(unix.CmsgLen(sizeofAuxdata))
	aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&b[unix.CmsgLen(0)]))
	*aux = unix.TpacketAuxdata{Status: status, Len: 60, Snaplen: 60, Vlan_tci: tci, Vlan_tpid: tpid}
	return b
}

func TestPacketVLANTagPutBackFromAuxdata(t *testing.T) {
	dst := []byte{0x02, 0x42, 0, 0, 0, 1}
	src := []byte{0x02, 0x42, 0, 0, 0, 2}
	payload := []byte{0x08, 0x00, 0x45, 0x00, 0xde, 0xad}
	untagged := append(append(append([]byte{}, dst...), src...), payload...)
	for _, tc := range []struct {
		name      string
		ctrl      []byte
		tagged    bool
		tpid, tci uint16
	}{
		{"no auxdata", nil, false, 0, 0},
		{"no tag", auxCmsg(unix.TP_STATUS_USER, 0, 0), false, 0, 0},
		{"tag, tpid unknown (old kernel)", auxCmsg(unix.TP_STATUS_VLAN_VALID, 0x200a, 0), true, 0x8100, 0x200a},
		{"802.1Q tag", auxCmsg(unix.TP_STATUS_VLAN_VALID|unix.TP_STATUS_VLAN_TPID_VALID, 10, 0x8100), true, 0x8100, 10},
		{"802.1ad tag", auxCmsg(unix.TP_STATUS_VLAN_VALID|unix.TP_STATUS_VLAN_TPID_VALID, 4094, 0x88a8), true, 0x88a8, 4094},
		{"tpid valid without a tag", auxCmsg(unix.TP_STATUS_VLAN_TPID_VALID, 10, 0x8100), false, 0, 0},
		{"other control message", func() []byte {
			b := auxCmsg(unix.TP_STATUS_VLAN_VALID, 10, 0)
			(*unix.Cmsghdr)(unsafe.Pointer(&b[0])).Type = unix.PACKET_AUXDATA + 1
			return b
		}(), false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpid, tci, ok := auxVLAN(tc.ctrl)
			if ok != tc.tagged || tpid != tc.tpid || tci != tc.tci {
				t.Fatalf("auxVLAN = %#x %#x %v, want %#x %#x %v", tpid, tci, ok, tc.tpid, tc.tci, tc.tagged)
			}
			if !ok {
				return
			}
			slot := make([]byte, vlanRoom+len(untagged)+8)
			copy(slot[vlanRoom:], untagged)
			got := insertVLAN(slot, len(untagged), tpid, tci)
			var want []byte
			want = append(want, dst...)
			want = append(want, src...)
			want = binary.BigEndian.AppendUint16(want, tc.tpid)
			want = binary.BigEndian.AppendUint16(want, tc.tci)
			want = append(want, payload...)
			if !bytes.Equal(got, want) {
				t.Fatalf("frame %x, want %x", got, want)
			}
		})
	}
}

// vethPair makes a veth pair in a network namespace of the test's own and
// returns its ends' ifindexes, and a function that runs f in that netns.
func vethPair(t *testing.T) (a, b int, in func(f func())) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a network namespace")
	}
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "network namespaces need root")
	}
	var ns netns.NsHandle = -1
	setup := make(chan error, 1)
	go func() {
		// netns.New moves this thread into the new namespace: the thread
		// stays locked and ends with the goroutine, never running others.
		runtime.LockOSThread()
		var err error
		if ns, err = netns.New(); err != nil {
			setup <- fmt.Errorf("cannot make a network namespace: %w", err)
			return
		}
		a, b, err = makeVeth()
		setup <- err
	}()
	if err := <-setup; err != nil {
		if !ns.IsOpen() {
			testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	// f runs on a thread of its own that enters the netns and is never
	// handed back to other goroutines (it ends with its locked goroutine).
	in = func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			if err := netns.Set(ns); err != nil {
				t.Error(err)
				return
			}
			f()
		}()
		<-done
	}
	return a, b, in
}

// makeVeth makes the veth pair pa–pb, up, without IPv6, in the calling
// thread's network namespace.
func makeVeth() (a, b int, err error) {
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU = "pa", 65535
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "pb", PeerMTU: 65535}); err != nil {
		return 0, 0, err
	}
	for _, name := range []string{"pa", "pb"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return 0, 0, err
		}
		// No IPv6 neighbour discovery or MLD of the kernel's own on the wire.
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0); err != nil {
			return 0, 0, err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return 0, 0, err
		}
		if name == "pa" {
			a = l.Attrs().Index
		} else {
			b = l.Attrs().Index
		}
	}
	return a, b, nil
}

type collector struct {
	mu     sync.Mutex
	frames [][]byte
	got    chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1)} }

func (c *collector) HandleFrames(frames [][]byte) {
	c.mu.Lock()
	for _, f := range frames {
		c.frames = append(c.frames, bytes.Clone(f))
	}
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
}

// wait returns the first n frames once they are there.
func (c *collector) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		if len(c.frames) >= n {
			fs := c.frames[:n]
			c.mu.Unlock()
			return fs
		}
		have := len(c.frames)
		c.mu.Unlock()
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("%d frames received, want %d", have, n)
		}
	}
}

// numberedFrame is a frame of size bytes from src whose payload counts i; an
// EtherType of the local experimental range, so the kernel ignores it.
func numberedFrame(i, size int) []byte {
	f := make([]byte, size)
	copy(f, []byte{0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5})
	binary.BigEndian.PutUint32(f[14:], uint32(i))
	for j := 18; j < size; j++ {
		f[j] = byte(i + j)
	}
	return f
}

func TestPacketPortRelaysFramesAcrossAVeth(t *testing.T) {
	ia, ib, in := vethPair(t)
	pa, pb := NewPacketPort(0), NewPacketPort(0)
	t.Cleanup(func() { pa.Close(); pb.Close() })
	in(func() {
		if err := pa.Attach(ia); err != nil {
			t.Error(err)
		}
		if err := pb.Attach(ib); err != nil {
			t.Error(err)
		}
	})
	got := newCollector()
	pb.SetHandler(got)
	// A batch of mixed sizes: minimal, full-size, jumbo, one over the
	// UDP relay's usual sizes; sent in one call, received in order.
	var frames [][]byte
	for i := range 300 {
		size := []int{60, 1514, 9014, 14 + 65535}[i%4]
		frames = append(frames, numberedFrame(i, size))
	}
	if sent := pa.Send(frames); sent != len(frames) {
		t.Fatalf("Send = %d of %d; stats %+v", sent, len(frames), pa.Stats())
	}
	for i, f := range got.wait(t, len(frames)) {
		if !bytes.Equal(f, frames[i]) {
			t.Fatalf("frame %d: %d bytes %x…, want %d bytes %x…", i, len(f), f[:18], len(frames[i]), frames[i][:18])
		}
	}
	// Nothing of its own came back to the sender (PACKET_IGNORE_OUTGOING).
	if st := pa.Stats(); st.RxFrames != 0 || st.TxFrames != uint64(len(frames)) {
		t.Fatalf("sender stats %+v", st)
	}
	// A frame shorter than an Ethernet header is refused, counted, and the
	// frames after it in the batch still leave.
	if sent := pa.Send([][]byte{{1, 2, 3}, numberedFrame(1000, 64)}); sent != 1 {
		t.Fatalf("Send of a runt and a frame = %d, want 1", sent)
	}
	if f := got.wait(t, len(frames)+1)[len(frames)]; !bytes.Equal(f, numberedFrame(1000, 64)) {
		t.Fatalf("frame after the runt: %x", f[:18])
	}
	if st := pa.Stats(); st.TxErrors != 1 {
		t.Fatalf("runt not counted: %+v", st)
	}

	// Detached, the port drops and counts; attached again, it relays again.
	pb.Detach()
	pa.Detach()
	if sent := pa.Send([][]byte{numberedFrame(2000, 64)}); sent != 0 || pa.Stats().Detached != 1 {
		t.Fatalf("detached Send = %d, stats %+v", sent, pa.Stats())
	}
	in(func() {
		if err := pa.Attach(ia); err != nil {
			t.Error(err)
		}
		if err := pb.Attach(ib); err != nil {
			t.Error(err)
		}
	})
	if sent := pa.Send([][]byte{numberedFrame(3000, 64)}); sent != 1 {
		t.Fatalf("Send after attach = %d", sent)
	}
	if f := got.wait(t, len(frames)+2)[len(frames)+1]; !bytes.Equal(f, numberedFrame(3000, 64)) {
		t.Fatalf("frame after re-attach: %x", f[:18])
	}
}

// TestPacketPortAttachedPromiscuousHoldsItsInterfacePromiscuousWhileOpen:
// a cloud's port on a host NIC must hear frames to every MAC address, and
// the NIC goes back to what it was when the port closes.
func TestPacketPortAttachedPromiscuousHoldsItsInterfacePromiscuousWhileOpen(t *testing.T) {
	_, ib, in := vethPair(t)
	promiscuity := func() int {
		var n int
		in(func() {
			l, err := netlink.LinkByIndex(ib)
			if err != nil {
				t.Error(err)
				return
			}
			n = l.Attrs().Promisc
		})
		return n
	}
	if n := promiscuity(); n != 0 {
		t.Fatalf("promiscuity %d before any port", n)
	}
	p := NewPacketPort(0)
	in(func() {
		if err := p.AttachPromiscuous(ib); err != nil {
			t.Error(err)
		}
	})
	if n := promiscuity(); n != 1 {
		t.Fatalf("promiscuity %d with the port attached, want 1", n)
	}
	p.Close()
	if n := promiscuity(); n != 0 {
		t.Fatalf("promiscuity %d after the port closed, want 0", n)
	}
}

func TestPacketPortOnALinkWithACapture(t *testing.T) {
	ia, ib, in := vethPair(t)
	pa, pb := NewPacketPort(0), NewPacketPort(0)
	t.Cleanup(func() { pa.Close(); pb.Close() })
	in(func() {
		if err := pa.Attach(ia); err != nil {
			t.Error(err)
		}
		if err := pb.Attach(ib); err != nil {
			t.Error(err)
		}
	})
	// A link from pb to a UDP port: frames into the veth at pa come out of
	// the UDP port's peer, and the tap sees each one.
	em := newEmulator(t)
	up, err := ListenUDP(UDPConfig{Local: loopback0, Peer: em.addr()})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, up)
	l := NewLink(pb, up, nil)
	t.Cleanup(l.Close)
	tap := &countTap{}
	l.SetTap(tap)
	for i := range 50 {
		if pa.Send([][]byte{numberedFrame(i, 100)}) != 1 {
			t.Fatal("send failed")
		}
	}
	for i := range 50 {
		if got := em.recv(5 * time.Second); !bytes.Equal(got, numberedFrame(i, 100)) {
			t.Fatalf("datagram %d: %x; pa %+v pb %+v udp %+v", i, got, pa.Stats(), pb.Stats(), up.Stats())
		}
	}
	if n := tap.n.Load(); n != 50 {
		t.Fatalf("tap saw %d frames, want 50", n)
	}
}

type countTap struct{ n atomic.Int64 }

func (c *countTap) WritePackets(_ Direction, frames [][]byte) { c.n.Add(int64(len(frames))) }
