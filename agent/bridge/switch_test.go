package bridge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ethFrame builds an Ethernet frame from src to dst (MACs 02:00:00:00:00:xx),
// tagged with vlan when vlan > 0.
func ethFrame(dst, src byte, vlan int, payload string) []byte {
	f := []byte{2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src}
	if dst == 0xff {
		copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	if vlan > 0 {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, uint16(vlan))
	}
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	return append(f, payload...)
}

// station is a node behind one switch port: a link joins the port to an
// in-memory port the test sends from and reads.
type station struct {
	m *memPort
	l *Link
}

func attach(t *testing.T, s *Switch, i int) *station {
	t.Helper()
	st := &station{m: &memPort{}}
	st.l = NewLink(st.m, s.Port(i), nil)
	t.Cleanup(st.l.Close)
	return st
}

// settle waits until the switch has forwarded everything queued.
func settle(t *testing.T, stations []*station, want []int) {
	t.Helper()
	waitFor(t, func() bool {
		for i, s := range stations {
			if s.m.count() != want[i] {
				return false
			}
		}
		return true
	})
	time.Sleep(20 * time.Millisecond) // and nothing more comes
	for i, s := range stations {
		if s.m.count() != want[i] {
			t.Fatalf("station %d received %d frames, want %d", i, s.m.count(), want[i])
		}
	}
}

func last(s *station) []byte {
	frames, _ := s.m.received()
	return frames[len(frames)-1]
}

func TestSwitchLearnsFloodsAndIsolatesVLANs(t *testing.T) {
	sw, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}, {VLAN: 1}, {VLAN: 20}, {Trunk: true, VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	st := make([]*station, 5)
	for i := range st {
		st[i] = attach(t, sw, i)
	}
	// A broadcast from 1 floods VLAN 1: ports 2, 3 (not 4, VLAN 20), and
	// the trunk, untagged (VLAN 1 is its native VLAN).
	st[0].m.inject(ethFrame(0xff, 1, 0, "who has"))
	settle(t, st, []int{0, 1, 1, 0, 1})
	if !bytes.Equal(last(st[4]), ethFrame(0xff, 1, 0, "who has")) {
		t.Fatalf("trunk got %x, want the frame untagged", last(st[4]))
	}
	// The answer goes to port 0 only: the switch learned where MAC 1 is.
	st[1].m.inject(ethFrame(1, 2, 0, "is at"))
	settle(t, st, []int{1, 1, 1, 0, 1})
	// Unknown unicast floods.
	st[0].m.inject(ethFrame(9, 1, 0, "to nobody"))
	settle(t, st, []int{1, 2, 2, 0, 2})
	// VLAN 20: from the access port, it reaches the trunk tagged, and
	// nobody in VLAN 1.
	st[3].m.inject(ethFrame(0xff, 4, 0, "vlan 20"))
	settle(t, st, []int{1, 2, 2, 0, 3})
	if want := ethFrame(0xff, 4, 20, "vlan 20"); !bytes.Equal(last(st[4]), want) {
		t.Fatalf("trunk got %x, want %x", last(st[4]), want)
	}
	// A tagged VLAN 20 frame from the trunk reaches port 3 untagged.
	st[4].m.inject(ethFrame(4, 5, 20, "back"))
	settle(t, st, []int{1, 2, 2, 1, 3})
	if want := ethFrame(4, 5, 0, "back"); !bytes.Equal(last(st[3]), want) {
		t.Fatalf("port 3 got %x, want %x", last(st[3]), want)
	}
	// A VLAN 1 unicast to MAC 4 is not delivered to VLAN 20: flooded in VLAN 1.
	st[0].m.inject(ethFrame(4, 1, 0, "wrong vlan"))
	settle(t, st, []int{1, 3, 3, 1, 4})
	// Runts and priority-tagged frames are dropped.
	st[4].m.inject([]byte{1, 2, 3}, ethFrame(0xff, 5, 0x2000 /* PCP 1, VID 0 */, "prio"))
	settle(t, st, []int{1, 3, 3, 1, 4})
	if d := sw.Stats()[4].Drops; d != 2 {
		t.Fatalf("trunk port drops = %d, want 2", d)
	}
}

func TestSwitchReconfigureMovesAPortToAnotherVLAN(t *testing.T) {
	sw, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	st := []*station{attach(t, sw, 0), attach(t, sw, 1)}
	st[0].m.inject(ethFrame(0xff, 1, 0, "x"))
	settle(t, st, []int{0, 1})
	if err := sw.Reconfigure([]SwitchPort{{VLAN: 1}, {VLAN: 2}}); err != nil {
		t.Fatal(err)
	}
	st[0].m.inject(ethFrame(0xff, 1, 0, "y"))
	settle(t, st, []int{0, 1})
	if err := sw.Reconfigure([]SwitchPort{{VLAN: 1}}); err == nil {
		t.Fatal("a switch changed its number of ports")
	}
	if _, err := NewSwitch([]SwitchPort{{VLAN: 4095}}); err == nil {
		t.Fatal("VLAN 4095 accepted")
	}
}

func TestHubFloodsEveryFrameToEveryOtherPort(t *testing.T) {
	hub := NewHub(3)
	defer hub.Close()
	st := []*station{attach(t, hub, 0), attach(t, hub, 1), attach(t, hub, 2)}
	st[0].m.inject(ethFrame(2, 1, 0, "a"))
	st[0].m.inject(ethFrame(2, 1, 0, "b"))
	settle(t, st, []int{0, 2, 2})
	st[1].m.inject(ethFrame(1, 2, 0, "c"))
	settle(t, st, []int{1, 2, 3})
}

func TestALoopOfLinksIsAStormNotACrash(t *testing.T) {
	sw, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}, {VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	loop := NewLink(sw.Port(0), sw.Port(1), nil) // a cable from the switch to itself
	st := attach(t, sw, 2)
	st.m.inject(ethFrame(0xff, 1, 0, "storm"))
	waitFor(t, func() bool { return st.m.count() > 1000 }) // the frame circles, as on real hardware
	loop.Close()
	sw.Close()
	var drops uint64
	for _, s := range sw.Stats() {
		drops += s.Drops
	}
	t.Logf("storm: %d copies seen, %d drops", st.m.count(), drops)
}

func ExampleSwitch() {
	sw, _ := NewSwitch([]SwitchPort{{VLAN: 10}, {VLAN: 10}, {Trunk: true, VLAN: 1}})
	defer sw.Close()
	fmt.Println(sw.NumPorts())
	// Output: 3
}

// callCounter is a handler that records the size of each call.
type callCounter struct {
	mu    sync.Mutex
	calls []int
	got   [][]byte
}

func (c *callCounter) HandleFrames(frames [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, len(frames))
	for _, f := range frames {
		c.got = append(c.got, bytes.Clone(f))
	}
}

func (c *callCounter) snapshot() ([]int, [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls...), append([][]byte(nil), c.got...)
}

// A batch that enters a switch leaves it as one batch per output port, so a
// chain of in-process hops keeps the batching of the receive call (and the
// GSO sends it allows) to its end; tag pushes within one batch each keep
// their own frame.
func TestABatchCrossesTheSwitchWholeAndEachFrameKeepsItsTag(t *testing.T) {
	s, err := NewSwitch([]SwitchPort{{VLAN: 20}, {Trunk: true, VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out callCounter
	s.Port(1).SetHandler(&out)
	var batch [][]byte
	for i := range 10 {
		batch = append(batch, ethFrame(0xff, 1, 0, fmt.Sprintf("frame %d", i)))
	}
	if n := s.Port(0).Send(batch); n != 10 {
		t.Fatalf("Send took %d of 10 frames", n)
	}
	waitFor(t, func() bool { _, got := out.snapshot(); return len(got) == 10 })
	calls, got := out.snapshot()
	if len(calls) != 1 {
		t.Fatalf("the trunk port's link got the batch in %d calls %v, want 1", len(calls), calls)
	}
	for i, f := range got {
		if want := ethFrame(0xff, 1, 20, fmt.Sprintf("frame %d", i)); !bytes.Equal(f, want) {
			t.Fatalf("frame %d left the trunk as %x, want %x", i, f, want)
		}
	}
}

// A busy switch takes what its queue has room for and drops (and counts)
// only the rest.
func TestAFullSwitchQueueDropsOnlyWhatItHasNoRoomFor(t *testing.T) {
	s, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	release := func() { once.Do(func() { close(block) }) }
	defer release() // before Close, which waits for the sender switching
	s.Port(1).SetHandler(handlerFunc(func([][]byte) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
	}))
	frame := ethFrame(2, 1, 0, "x")
	go s.Port(0).Send([][]byte{frame})
	<-entered // that sender holds the switch, in that frame's round: not queued
	batch := make([][]byte, switchQueue-10)
	for i := range batch {
		batch[i] = frame
	}
	if n := s.Port(0).Send(batch); n != len(batch) {
		t.Fatalf("Send took %d of %d frames into an empty queue", n, len(batch))
	}
	if n := s.Port(0).Send(batch[:30]); n != 10 {
		t.Fatalf("Send took %d of 30 frames with room for 10", n)
	}
	release()
	if st := s.Stats()[0]; st.Drops != 20 || st.Rx != uint64(1+len(batch)+10) {
		t.Fatalf("port 0 stats %+v, want 20 drops and %d received", st, 1+len(batch)+10)
	}
}

// A free switch switches a batch in the sender's goroutine: when Send
// returns, the batch has left by its output port, in one call, uncopied.
func TestAFreeSwitchForwardsInTheSendersGoroutine(t *testing.T) {
	s, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got [][]byte
	s.Port(1).SetHandler(handlerFunc(func(frames [][]byte) { got = append(got, frames...) }))
	batch := [][]byte{ethFrame(0xff, 1, 0, "a"), ethFrame(0xff, 1, 0, "b")}
	if n := s.Port(0).Send(batch); n != 2 {
		t.Fatalf("Send took %d of 2 frames", n)
	}
	if len(got) != 2 || &got[0][0] != &batch[0][0] || &got[1][0] != &batch[1][0] {
		t.Fatalf("when Send returned, port 1 had %d frames, want the 2 sent, not copies", len(got))
	}
}

// Frames queued while the switch was busy (more batches than a round of its
// goroutine takes) leave before those of a later Send on the same port,
// whoever switches them.
func TestQueuedFramesLeaveBeforeLaterOnes(t *testing.T) {
	for range 20 {
		s, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}})
		if err != nil {
			t.Fatal(err)
		}
		out := &callCounter{}
		block, entered := make(chan struct{}), make(chan struct{})
		first := true
		s.Port(1).SetHandler(handlerFunc(func(frames [][]byte) {
			if first {
				first = false
				close(entered)
				<-block
			}
			out.HandleFrames(frames)
		}))
		sent := make(chan struct{})
		go func() { s.Port(0).Send([][]byte{ethFrame(0xff, 1, 0, "0")}); close(sent) }()
		<-entered // the switch is busy: these are queued
		queued := roundBatches + 5
		for i := 1; i <= queued; i++ {
			s.Port(0).Send([][]byte{ethFrame(0xff, 1, 0, fmt.Sprint(i))})
		}
		close(block)
		<-sent
		s.Port(0).Send([][]byte{ethFrame(0xff, 1, 0, fmt.Sprint(queued+1))})
		waitFor(t, func() bool { _, got := out.snapshot(); return len(got) == queued+2 })
		s.Close()
		_, got := out.snapshot()
		for i, f := range got {
			if want := ethFrame(0xff, 1, 0, fmt.Sprint(i)); !bytes.Equal(f, want) {
				t.Fatalf("frame %d to leave was %q, want %q", i, f[14:], want[14:])
			}
		}
	}
}

type handlerFunc func([][]byte)

func (f handlerFunc) HandleFrames(frames [][]byte) { f(frames) }

// countPort is a Port that counts the frames sent to it and keeps none.
type countPort struct{ n atomic.Int64 }

func (c *countPort) Send(frames [][]byte) int { c.n.Add(int64(len(frames))); return len(frames) }
func (c *countPort) SetHandler(Handler)       {}

// BenchmarkSwitchInProcess measures the user-space work of the switch path
// without sockets: batches handed to a link as a UDP port's receive loop
// hands them (batch frames of 1500 B, fixed unicast addresses), through
// hops switches, to a port that counts them. Each batch is sent once the
// one before has come out (or been refused), as at a steady rate, where
// batches cross the path one at a time: run it on one CPU (taskset -c 1),
// as the agent runs in scripts/bench. It reports wall and CPU time
// (cpu-ns/frame: the process's, GC included) per frame, allocations per
// batch and frames refused on the path.
//
// kind=hub runs hubs instead of switches; kind=trunk, switches whose
// second port is a trunk whose native VLAN is not the first port's, so
// that each hop pushes or pops a tag (a copy per frame), as between access
// ports and a trunk.
func BenchmarkSwitchInProcess(b *testing.B) {
	for _, kind := range []string{"switch", "hub", "trunk"} {
		for _, hops := range []int{1, 4} {
			for _, batch := range []int{8, 64} {
				name := fmt.Sprintf("switches=%d/batch=%d", hops, batch)
				if kind != "switch" { // the switch's names are older: kept, to compare
					name = "kind=" + kind + "/" + name
				}
				b.Run(name, func(b *testing.B) {
					benchmarkSwitchInProcess(b, kind, hops, batch)
				})
			}
		}
	}
}

func benchmarkSwitchInProcess(b *testing.B, kind string, hops, batch int) {
	src, sink := &memPort{}, &countPort{}
	left := Port(src)
	var switches []*Switch
	for i := range hops {
		var sw *Switch
		var err error
		switch kind {
		case "hub":
			sw = NewHub(2)
		case "trunk":
			// Odd hops push a tag (access in, trunk out), even hops pop
			// it (trunk in, access out).
			ports := []SwitchPort{{VLAN: 1}, {Trunk: true, VLAN: 2}}
			if i%2 == 1 {
				ports[0], ports[1] = ports[1], ports[0]
			}
			sw, err = NewSwitch(ports)
		default:
			sw, err = NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}})
		}
		if err != nil {
			b.Fatal(err)
		}
		defer sw.Close()
		switches = append(switches, sw)
		l := NewLink(left, sw.Port(0), nil)
		defer l.Close()
		left = sw.Port(1)
	}
	l := NewLink(left, sink, nil)
	defer l.Close()
	// The sink's address is learned once, as in a lab: a frame from it.
	learn := ethFrame(2, 3, 0, "")
	if kind == "trunk" && hops%2 == 1 { // the sink is on a trunk
		learn = ethFrame(2, 3, 1, "")
	}
	l.dirs[BtoA].HandleFrames([][]byte{learn})
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = ethFrame(3, 2, 0, string(make([]byte, 1500-14)))
	}
	refused := func() int64 {
		var n int64
		for _, sw := range switches {
			for _, p := range sw.ports {
				n += int64(p.drops.Load())
			}
		}
		return n
	}
	h := src.h.Load().h
	sent := int64(0)
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	b.ReportAllocs()
	for b.Loop() {
		h.HandleFrames(frames)
		sent += int64(batch)
		for sink.n.Load()+refused() < sent {
			runtime.Gosched()
		}
	}
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sent), "ns/frame")
	b.ReportMetric(float64(cpu)/float64(sent), "cpu-ns/frame")
	b.ReportMetric(float64(refused()), "refused")
}

// A round remembers where its last unicast destination went; a frame from
// that address on another port, in the same round, moves it: the next
// frame to it must follow.
func TestAnAddressThatMovesWithinARoundIsFollowed(t *testing.T) {
	sw, err := NewSwitch([]SwitchPort{{VLAN: 1}, {VLAN: 1}, {VLAN: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	st := []*station{attach(t, sw, 0), attach(t, sw, 1), attach(t, sw, 2)}
	st[1].m.inject(ethFrame(0xff, 5, 0, "5 is here")) // MAC 5 on port 1
	settle(t, st, []int{1, 0, 1})
	// Holding the switch queues the three batches, to be switched in one
	// round once it is free.
	sw.mu.Lock()
	st[0].m.inject(ethFrame(5, 1, 0, "to 5 on 1"))
	st[2].m.inject(ethFrame(0xff, 5, 0, "5 moved to 2")) // a broadcast: no lookup
	st[0].m.inject(ethFrame(5, 1, 0, "to 5 on 2"))
	sw.mu.Unlock()
	settle(t, st, []int{2, 2, 2})
	if want := ethFrame(5, 1, 0, "to 5 on 2"); !bytes.Equal(last(st[2]), want) {
		t.Fatalf("port 2 got %q last, want %q", last(st[2]), want)
	}
}
