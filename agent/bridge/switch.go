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
	// VLAN is the access port's VLAN, or the trunk's native (untagged)
	// VLAN: 1 to 4094.
	VLAN int
}

// Switch is an Ethernet switch or hub that the agent runs itself. Its ports
// are in-process Ports, linked like any other; frames sent into a port are
// queued and forwarded by the switch's own goroutine, so a loop of links
// makes a broadcast storm bounded by the queue, as on real hardware, never a
// runaway recursion. A full queue drops the frame and counts it.
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
	hub   bool
	ports []*switchPort
	in    chan inFrame
	bufs  sync.Pool // of *[]byte, frame copies in flight
	done  chan struct{}
	ended chan struct{}
	once  sync.Once

	// Owned by the run goroutine.
	macs    map[macVLAN]macEntry
	one     [1][]byte
	scratch []byte
}

type switchPort struct {
	s       *Switch
	index   int
	cfg     atomic.Pointer[SwitchPort]
	handler atomic.Pointer[handlerBox]
	gen     atomic.Uint64 // bumped at each SetHandler: forgets what was learned on it

	rx, tx, drops atomic.Uint64
}

type inFrame struct {
	port int
	buf  *[]byte
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
	switchQueue    = 1024            // frames waiting for the switch goroutine
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

// checkVLANs refuses a port whose VLAN is out of 802.1Q's range.
func checkVLANs(ports []SwitchPort) error {
	for i, p := range ports {
		if p.VLAN < 1 || p.VLAN > 4094 {
			return fmt.Errorf("switch port %d: VLAN %d is out of range 1 to 4094", i, p.VLAN)
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
		in:    make(chan inFrame, switchQueue),
		done:  make(chan struct{}),
		ended: make(chan struct{}),
		macs:  make(map[macVLAN]macEntry),
	}
	s.bufs.New = func() any { b := make([]byte, 0, 2048); return &b }
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

// Close stops the switch: frames sent to its ports are dropped from now on.
// It is safe to call twice.
func (s *Switch) Close() {
	s.once.Do(func() {
		close(s.done)
		<-s.ended
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

// Send queues frames entering the switch through this port.
func (p *switchPort) Send(frames [][]byte) int {
	s := p.s
	sent := 0
	for _, f := range frames {
		if len(f) > maxSwitchFrame {
			p.drops.Add(1)
			continue
		}
		bp := s.bufs.Get().(*[]byte)
		*bp = append((*bp)[:0], f...)
		select {
		case <-s.done:
			s.bufs.Put(bp)
			p.drops.Add(uint64(len(frames) - sent))
			return sent
		default:
		}
		select {
		case s.in <- inFrame{port: p.index, buf: bp}:
			sent++
		default:
			s.bufs.Put(bp)
			p.drops.Add(1)
		}
	}
	p.rx.Add(uint64(sent))
	return sent
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

func (s *Switch) run() {
	defer close(s.ended)
	for {
		select {
		case <-s.done:
			return
		case f := <-s.in:
			frame := *f.buf
			if s.hub {
				for _, p := range s.ports {
					if p.index != f.port {
						s.deliver(p, frame)
					}
				}
			} else {
				s.forward(s.ports[f.port], frame)
			}
			s.bufs.Put(f.buf)
		}
	}
}

// deliver hands one frame to a port's link.
func (s *Switch) deliver(p *switchPort, frame []byte) {
	hb := p.handler.Load()
	if hb == nil {
		return
	}
	p.tx.Add(1)
	s.one[0] = frame
	hb.h.HandleFrames(s.one[:])
	s.one[0] = nil
}

const etherTypeDot1Q = 0x8100

// forward switches one frame that came in on port in.
func (s *Switch) forward(in *switchPort, frame []byte) {
	if len(frame) < 14 {
		in.drops.Add(1)
		return
	}
	cfg := in.cfg.Load()
	vlan, tagged := cfg.VLAN, false
	if cfg.Trunk && binary.BigEndian.Uint16(frame[12:]) == etherTypeDot1Q {
		if len(frame) < 18 {
			in.drops.Add(1)
			return
		}
		vlan, tagged = int(binary.BigEndian.Uint16(frame[14:])&0xfff), true
	}
	if vlan == 0 { // priority-tagged only: Dynamips drops these too
		in.drops.Add(1)
		return
	}
	now := time.Now()
	var src, dst macVLAN
	copy(src.mac[:], frame[6:12])
	copy(dst.mac[:], frame[0:6])
	src.vlan, dst.vlan = uint16(vlan), uint16(vlan)
	if frame[6]&1 == 0 { // never learn a multicast source
		if len(s.macs) >= macTableMax {
			clear(s.macs)
		}
		s.macs[src] = macEntry{port: in.index, gen: in.gen.Load(), seen: now}
	}
	if frame[0]&1 == 0 {
		if e, ok := s.macs[dst]; ok && now.Sub(e.seen) < macAge && s.ports[e.port].gen.Load() == e.gen {
			if e.port != in.index {
				s.send(s.ports[e.port], frame, vlan, tagged)
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
		s.send(p, frame, vlan, tagged)
	}
}

// send delivers a frame of VLAN vlan, tagged or not as it came in, out of
// port p, adding or removing the 802.1Q tag as p's type requires.
func (s *Switch) send(p *switchPort, frame []byte, vlan int, tagged bool) {
	c := p.cfg.Load()
	wantTag := c.Trunk && c.VLAN != vlan
	switch {
	case tagged == wantTag:
		s.deliver(p, frame)
	case wantTag: // push: dst, src, 8100 VID, then the rest
		s.scratch = append(s.scratch[:0], frame[:12]...)
		s.scratch = binary.BigEndian.AppendUint16(s.scratch, etherTypeDot1Q)
		s.scratch = binary.BigEndian.AppendUint16(s.scratch, uint16(vlan))
		s.scratch = append(s.scratch, frame[12:]...)
		s.deliver(p, s.scratch)
	default: // pop
		s.scratch = append(s.scratch[:0], frame[:12]...)
		s.scratch = append(s.scratch, frame[16:]...)
		s.deliver(p, s.scratch)
	}
}
