package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// SwitchPort configures one port of an Ethernet switch, as GNS3's
// ethernet_switch ports_mapping entries do.
type SwitchPort struct {
	// Trunk makes the port an 802.1Q trunk carrying every VLAN; otherwise
	// it is an access port of one VLAN.
	Trunk bool
	// QinQ makes the port an 802.1Q tunnel (GNS3's "qinq"): it takes
	// tagged customer frames into its VLAN, and they cross trunks with an
	// outer tag of that VLAN pushed over the customer's (see
	// Switch.sendTunnel). Untagged frames into it are dropped.
	QinQ bool
	// EtherType is a tunnel port's outer tag type (TPID) on trunks: 0x8100
	// (0 means it), 0x88a8, 0x9100 or 0x9200.
	EtherType uint16
	// VLAN is the access port's VLAN, the trunk's native (untagged) VLAN,
	// or the tunnel's outer VLAN: 1 to 4094.
	VLAN int
}

// tagTypes are the tag types a trunk or tunnel port takes as a VLAN tag
// (Dynamips's): 802.1Q's, 802.1ad's, and two older QinQ ones.
func isTagType(t uint16) bool { return t == 0x8100 || t == 0x88a8 || t == 0x9100 || t == 0x9200 }

// Switch is an Ethernet switch or hub that the agent runs itself. Its ports
// are in-process Ports, linked like any other.
//
// A batch sent into a port is switched at once, in the sender's goroutine,
// and leaves each output port in one HandleFrames call, which runs the next
// link (and the next switch) in that goroutine too: a batch read by one
// receive call crosses every in-process hop whole, with no copy and no
// hand-off to another goroutine, to the send call that writes it out (the
// chain4 topology of scripts/bench measures it). One sender switches at a time. A batch that
// finds the switch busy (another sender, or this very batch coming back
// through a loop of links) is copied into the switch's queue instead, and
// switched by whoever holds the switch next, before its own frames, or by
// the switch's own goroutine: so frames keep their order, a loop of links
// makes a broadcast storm bounded by the queue, as on real hardware, never
// a runaway recursion, and a sender never waits for another. A full queue
// drops the frame and counts it.
//
// The switch follows Dynamips's ethernet switch, which GNS3 uses (common/
// eth_switch.c): it learns source MAC addresses per VLAN, forwards known
// unicast to one port and floods the rest to every port of the frame's
// VLAN; an access port carries its VLAN untagged; a trunk carries every
// VLAN tagged but its native VLAN untagged, and treats an untagged frame as
// one of its native VLAN. Learned addresses expire after 5 minutes, or when
// their port is linked anew. A hub floods every frame to every other port.
//
// Its methods are safe for concurrent use. Close it to stop its goroutine.
type Switch struct {
	hub     bool
	ports   []*switchPort
	in      chan *inBatch // batches that found the switch busy, in order
	kick    chan struct{} // capacity 1: in has batches for the switch's goroutine
	queued  atomic.Int64  // frames in the batches of in
	batches sync.Pool     // of *inBatch, copies of frames in flight
	closed  atomic.Bool
	done    chan struct{}
	ended   chan struct{}
	once    sync.Once

	// mu is held while switching: by a sender (Send) or by the switch's
	// goroutine, never waited for by a sender. It guards what follows.
	mu        sync.Mutex
	macs      map[macVLAN]macEntry
	outs      [][][]byte // frames to send out of each port, per round
	scratch   []byte     // tagged or untagged copies made in a round
	taken     []*inBatch // the queued batches of a round, given back after it
	now       time.Time  // of the round
	learned   macVLAN    // the source learned last in this round, on port learnedOn
	learnedOn int        // -1: none yet
	// The destination found last in this round: known unicast to port
	// hitOn (-1: none) while that port's gen is hitGen. A batch's frames
	// mostly go to one address, and the table lookup was most of a
	// switch hop's cost (BenchmarkSwitchInProcess).
	hit    macVLAN
	hitOn  int
	hitGen uint64
}

type switchPort struct {
	s       *Switch
	index   int
	cfg     atomic.Pointer[SwitchPort]
	handler atomic.Pointer[handlerBox]
	gen     atomic.Uint64 // bumped at each SetHandler: forgets what was learned on it

	rx, tx, drops atomic.Uint64
}

// inBatch is a run of frames that entered the switch through one port in
// one Send, copied into one buffer: the batch crosses to the switch's
// goroutine in one channel hand-off, and its frames leave each output port
// in one HandleFrames call, so the batching of the receive call that read
// them survives the hop.
type inBatch struct {
	port   int
	frames [][]byte // slices of buf
	buf    []byte
}

type macVLAN struct {
	mac  [6]byte
	vlan uint16
}

type macEntry struct {
	port int
	gen  uint64
	seen time.Time
}

// Switch limits.
const (
	switchQueue    = 2048            // frames waiting in the queue of a busy switch
	switchBatches  = switchQueue     // batches (one per Send, a frame at least) waiting in it
	roundBatches   = 16              // queued batches switched together in one round
	macAge         = 5 * time.Minute // learned addresses expire
	macTableMax    = 16384           // a full table starts over
	maxSwitchFrame = 65535
)

// NewSwitch starts an Ethernet switch with the given ports.
func NewSwitch(ports []SwitchPort) (*Switch, error) {
	if err := checkVLANs(ports); err != nil {
		return nil, err
	}
	return newSwitch(false, ports), nil
}

// checkVLANs refuses a port whose VLAN is out of 802.1Q's range, or
// whose type or tag type makes no sense.
func checkVLANs(ports []SwitchPort) error {
	for i, p := range ports {
		if p.VLAN < 1 || p.VLAN > 4094 {
			return fmt.Errorf("switch port %d: VLAN %d is out of range 1 to 4094", i, p.VLAN)
		}
		if p.QinQ && p.Trunk {
			return fmt.Errorf("switch port %d: a port is a trunk or a tunnel, not both", i)
		}
		if p.EtherType != 0 && (!p.QinQ || !isTagType(p.EtherType)) {
			return fmt.Errorf("switch port %d: tag type %#04x is for a tunnel port, one of 0x8100, 0x88a8, 0x9100, 0x9200", i, p.EtherType)
		}
	}
	return nil
}

// NewHub starts an Ethernet hub with n ports.
func NewHub(n int) *Switch {
	return newSwitch(true, make([]SwitchPort, n))
}

func newSwitch(hub bool, cfg []SwitchPort) *Switch {
	s := &Switch{
		hub:   hub,
		in:    make(chan *inBatch, switchBatches),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		ended: make(chan struct{}),
		macs:  make(map[macVLAN]macEntry),
		outs:  make([][][]byte, len(cfg)),
	}
	s.batches.New = func() any { return new(inBatch) }
	for i := range cfg {
		p := &switchPort{s: s, index: i}
		c := cfg[i]
		p.cfg.Store(&c)
		s.ports = append(s.ports, p)
	}
	go s.run() // ended by Close
	return s
}

// NumPorts returns the number of ports.
func (s *Switch) NumPorts() int { return len(s.ports) }

// Port returns port i, to link; it panics if there is no such port.
func (s *Switch) Port(i int) Port { return s.ports[i] }

// Reconfigure changes the ports' types and VLANs in place, from the next
// frame on; the number of ports cannot change. A hub has nothing to change.
func (s *Switch) Reconfigure(ports []SwitchPort) error {
	if s.hub {
		return nil
	}
	if len(ports) != len(s.ports) {
		return errors.New("a switch keeps its number of ports")
	}
	if err := checkVLANs(ports); err != nil {
		return err
	}
	for i, p := range ports {
		s.ports[i].cfg.Store(&p)
		s.ports[i].gen.Add(1)
	}
	return nil
}

// Close stops the switch: frames sent to its ports are dropped from now on,
// and none leaves once Close has returned. It is safe to call twice.
func (s *Switch) Close() {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.done)
		<-s.ended
		// Wait for a sender switching now; what is still queued is never
		// switched (run has ended, and senders see closed).
		s.mu.Lock()
		s.mu.Unlock()
	})
}

// SwitchPortStats counts what one port of a switch did.
type SwitchPortStats struct {
	// Rx frames came in from the port's link, Tx went out to it; Drops
	// could not be taken in (queue full, switch closed, runt frame).
	Rx, Tx, Drops uint64
}

// Stats returns the counters of every port.
func (s *Switch) Stats() []SwitchPortStats {
	out := make([]SwitchPortStats, len(s.ports))
	for i, p := range s.ports {
		out[i] = SwitchPortStats{Rx: p.rx.Load(), Tx: p.tx.Load(), Drops: p.drops.Load()}
	}
	return out
}

// Send switches frames entering the switch through this port, in one
// batch, at once when the switch is free; when it is busy, it queues a copy
// of them, and frames past what the queue has room for are dropped
// (counted).
func (p *switchPort) Send(frames [][]byte) int {
	s := p.s
	if s.closed.Load() {
		p.drops.Add(uint64(len(frames)))
		return 0
	}
	if !s.mu.TryLock() {
		return p.enqueue(frames)
	}
	defer s.mu.Unlock()
	if s.closed.Load() { // closed meanwhile: Close waits for the lock
		p.drops.Add(uint64(len(frames)))
		return 0
	}
	// Batches queued while this round ran (a loop of links) woke the
	// switch's goroutine when they were queued (enqueue).
	return s.round(p, frames)
}

// enqueue queues a copy of frames for whoever switches next: the switch is
// busy.
func (p *switchPort) enqueue(frames [][]byte) int {
	s := p.s
	b := s.batches.Get().(*inBatch)
	b.port, b.frames, b.buf = p.index, b.frames[:0], b.buf[:0]
	size := 0
	for _, f := range frames {
		if len(f) <= maxSwitchFrame {
			size += len(f)
		}
	}
	if cap(b.buf) < size {
		b.buf = make([]byte, 0, size)
	}
	for _, f := range frames {
		if len(f) > maxSwitchFrame {
			p.drops.Add(1)
			continue
		}
		off := len(b.buf)
		b.buf = append(b.buf, f...)
		b.frames = append(b.frames, b.buf[off:len(b.buf):len(b.buf)])
	}
	n := len(b.frames)
	if n == 0 {
		s.batches.Put(b)
		return 0
	}
	// Take what the queue has room for; the rest is dropped, as a full
	// port buffer drops on real hardware.
	if over := int(s.queued.Add(int64(n))) - switchQueue; over > 0 {
		over = min(over, n)
		s.queued.Add(-int64(over))
		p.drops.Add(uint64(over))
		clear(b.frames[n-over:])
		b.frames, n = b.frames[:n-over], n-over
		if n == 0 {
			s.batches.Put(b)
			return 0
		}
	}
	select {
	case s.in <- b:
		p.rx.Add(uint64(n))
		s.wake()
		return n
	default:
		s.queued.Add(-int64(n))
		s.batches.Put(b)
		p.drops.Add(uint64(n))
		return 0
	}
}

// wake tells the switch's goroutine that batches are queued.
func (s *Switch) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// SetHandler sets who receives the frames the switch sends out of this
// port (the link's relay). Learned addresses of the port are forgotten.
func (p *switchPort) SetHandler(h Handler) {
	p.gen.Add(1)
	if h == nil {
		p.handler.Store(nil)
		return
	}
	p.handler.Store(&handlerBox{h})
}

// run switches the batches queued while the switch was busy, one round at
// a time, letting senders in between rounds, until Close.
func (s *Switch) run() {
	defer close(s.ended)
	for {
		select {
		case <-s.done:
			return
		case <-s.kick:
		}
		for {
			s.mu.Lock()
			more := len(s.in) > 0 && !s.closed.Load()
			if more {
				s.round(nil, nil)
			}
			s.mu.Unlock()
			if !more {
				break
			}
		}
	}
}

// round switches the queued batches, then frames, which came in on port in
// (nil: none), and sends each output port its frames in one call. It
// returns how many of frames it took. Without frames it takes up to
// roundBatches batches; with them, every batch queued now, so that frames
// queued by an earlier Send of the same port leave first (the queue holds
// at most switchQueue frames). s.mu must be held.
func (s *Switch) round(in *switchPort, frames [][]byte) int {
	s.taken = s.taken[:0]
	limit := roundBatches
	if in != nil {
		limit = len(s.in)
	}
more:
	for len(s.taken) < limit {
		select {
		case b := <-s.in:
			s.taken = append(s.taken, b)
		default:
			break more
		}
	}
	// Frames pushed or popped a tag are built in scratch, which keeps its
	// capacity from round to round: it grows (by append, in send) only
	// past the largest round yet, and slices taken of it stay valid when
	// it does (the old array lives on while used). Sizing it up front cost
	// a pass over every frame of every round, trunk or not.
	s.scratch = s.scratch[:0]
	s.learnedOn, s.hitOn = -1, -1
	if !s.hub { // a hub learns nothing: no clock to read
		s.now = time.Now()
	}
	for _, b := range s.taken {
		s.switchFrames(s.ports[b.port], b.frames)
	}
	n := 0
	if in != nil {
		n = s.switchFrames(in, frames)
		in.rx.Add(uint64(n))
	}
	for i, out := range s.outs {
		if len(out) == 0 {
			continue
		}
		p := s.ports[i]
		if hb := p.handler.Load(); hb != nil {
			p.tx.Add(uint64(len(out)))
			hb.h.HandleFrames(out)
		}
		clear(out)
		s.outs[i] = out[:0]
	}
	for _, b := range s.taken {
		s.queued.Add(-int64(len(b.frames)))
		clear(b.frames)
		s.batches.Put(b)
	}
	clear(s.taken)
	return n
}

// switchFrames switches frames that came in on port in, and returns how
// many it took: the others, too long, are counted as drops.
func (s *Switch) switchFrames(in *switchPort, frames [][]byte) int {
	n := len(frames)
	for _, frame := range frames {
		switch {
		case len(frame) > maxSwitchFrame:
			in.drops.Add(1)
			n--
		case s.hub:
			for _, p := range s.ports {
				if p.index != in.index {
					s.outs[p.index] = append(s.outs[p.index], frame)
				}
			}
		default:
			s.forward(in, frame)
		}
	}
	return n
}

const etherTypeDot1Q = 0x8100

// forward switches one frame that came in on port in, at the round's time.
func (s *Switch) forward(in *switchPort, frame []byte) {
	now := s.now
	if len(frame) < 14 {
		in.drops.Add(1)
		return
	}
	cfg := in.cfg.Load()
	vlan, tagged := cfg.VLAN, false
	if cfg.Trunk && isTagType(binary.BigEndian.Uint16(frame[12:])) {
		if len(frame) < 18 {
			in.drops.Add(1)
			return
		}
		vlan, tagged = int(binary.BigEndian.Uint16(frame[14:])&0xfff), true
	}
	if cfg.QinQ && (len(frame) < 18 || !isTagType(binary.BigEndian.Uint16(frame[12:]))) {
		in.drops.Add(1) // a tunnel carries tagged customer frames only
		return
	}
	if vlan == 0 { // priority-tagged only: Dynamips drops these too
		in.drops.Add(1)
		return
	}
	var src, dst macVLAN
	copy(src.mac[:], frame[6:12])
	copy(dst.mac[:], frame[0:6])
	src.vlan, dst.vlan = uint16(vlan), uint16(vlan)
	// Never learn a multicast source; learn a source once per round (a
	// batch's frames mostly come from one).
	if frame[6]&1 == 0 && (src != s.learned || in.index != s.learnedOn) {
		if len(s.macs) >= macTableMax {
			clear(s.macs)
			s.hitOn = -1
		}
		s.macs[src] = macEntry{port: in.index, gen: in.gen.Load(), seen: now}
		s.learned, s.learnedOn = src, in.index
		if src == s.hit {
			s.hitOn = -1
		}
	}
	if frame[0]&1 == 0 {
		out := -1
		if dst == s.hit && s.hitOn >= 0 && s.ports[s.hitOn].gen.Load() == s.hitGen {
			out = s.hitOn
		} else if e, ok := s.macs[dst]; ok && now.Sub(e.seen) < macAge && s.ports[e.port].gen.Load() == e.gen {
			out = e.port
			s.hit, s.hitOn, s.hitGen = dst, e.port, e.gen
		}
		if out >= 0 {
			if out != in.index {
				s.send(s.ports[out], frame, vlan, tagged, cfg)
			}
			return
		}
	}
	for _, p := range s.ports {
		if p.index == in.index {
			continue
		}
		if c := p.cfg.Load(); !c.Trunk && c.VLAN != vlan {
			continue
		}
		s.send(p, frame, vlan, tagged, cfg)
	}
}

// send queues a frame of VLAN vlan, tagged or not as it came in through a
// port configured as from, to leave port p, adding or removing the 802.1Q
// tag as p's type requires.
func (s *Switch) send(p *switchPort, frame []byte, vlan int, tagged bool, from *SwitchPort) {
	c := p.cfg.Load()
	if from.QinQ || c.QinQ {
		s.sendTunnel(p, c, frame, vlan, tagged, from)
		return
	}
	wantTag := c.Trunk && c.VLAN != vlan
	switch {
	case tagged == wantTag:
	case wantTag:
		frame = s.pushTag(frame, etherTypeDot1Q, vlan)
	default:
		frame = s.popTag(frame)
	}
	s.outs[p.index] = append(s.outs[p.index], frame)
}

// sendTunnel is send where a tunnel (qinq) port is either end, as
// Dynamips's switch does it: a customer frame from a tunnel port leaves a
// trunk with an outer tag of the tunnel's VLAN and tag type pushed (native
// VLAN or not), and another tunnel port of its VLAN as it came; a tagged
// frame from a trunk leaves a tunnel port of its VLAN with that tag
// popped. Nothing else crosses: no access port takes a tunnel's frames,
// and no tunnel an access port's or a trunk's untagged ones.
func (s *Switch) sendTunnel(p *switchPort, c *SwitchPort, frame []byte, vlan int, tagged bool, from *SwitchPort) {
	switch {
	case from.QinQ && c.Trunk:
		tpid := from.EtherType
		if tpid == 0 {
			tpid = etherTypeDot1Q
		}
		frame = s.pushTag(frame, tpid, vlan)
	case from.QinQ && c.QinQ && c.VLAN == vlan:
	case from.Trunk && tagged && c.QinQ && c.VLAN == vlan:
		frame = s.popTag(frame)
	default:
		return
	}
	s.outs[p.index] = append(s.outs[p.index], frame)
}

// pushTag returns frame with a tag (type tpid, VLAN vlan) pushed after
// the addresses, built in the round's scratch.
func (s *Switch) pushTag(frame []byte, tpid uint16, vlan int) []byte {
	at := len(s.scratch)
	s.scratch = append(s.scratch, frame[:12]...)
	s.scratch = binary.BigEndian.AppendUint16(s.scratch, tpid)
	s.scratch = binary.BigEndian.AppendUint16(s.scratch, uint16(vlan))
	s.scratch = append(s.scratch, frame[12:]...)
	return s.scratch[at:len(s.scratch):len(s.scratch)]
}

// popTag returns frame without its outer tag, built in the round's
// scratch.
func (s *Switch) popTag(frame []byte) []byte {
	at := len(s.scratch)
	s.scratch = append(s.scratch, frame[:12]...)
	s.scratch = append(s.scratch, frame[16:]...)
	return s.scratch[at:len(s.scratch):len(s.scratch)]
}
