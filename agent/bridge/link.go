package bridge

import (
	"sync/atomic"
)

// Direction tells which end of a link a frame came from.
type Direction int

// The two directions of a link.
const (
	AtoB Direction = 0 // received on end A, sent out of end B
	BtoA Direction = 1 // received on end B, sent out of end A
)

// Tap receives a copy of every frame a link forwards, after the link's
// filters, just before it is sent. WritePacket is called from the links'
// receive goroutines, possibly concurrently for the two directions; it must
// not keep frame.
type Tap interface {
	WritePacket(dir Direction, frame []byte)
}

// State is what a link applies to the frames it relays. It is replaced as a
// whole, never edited in place, so the relay never sees half of an update.
type State struct {
	// Suspend drops every frame in both directions.
	Suspend bool
}

// Link relays frames between two ports, both directions: what end A
// receives is sent out of end B and the other way round. Its state and tap
// are swapped atomically while frames flow.
type Link struct {
	ends  [2]Port
	state atomic.Pointer[State]
	tap   atomic.Pointer[tapBox]

	forwarded [2]atomic.Uint64 // per direction
	dropped   [2]atomic.Uint64 // by the link's state (suspend, filters)
	sendErrs  [2]atomic.Uint64
}

type tapBox struct{ t Tap }

// NewLink joins a and b and starts relaying at once: it becomes the handler
// of both ports. A port belongs to at most one link at a time.
func NewLink(a, b Port, st State) *Link {
	l := &Link{ends: [2]Port{a, b}}
	l.state.Store(&st)
	a.SetHandler(direction{l, AtoB})
	b.SetHandler(direction{l, BtoA})
	return l
}

// SetState replaces what the link applies to frames, from the next frame on.
func (l *Link) SetState(st State) { l.state.Store(&st) }

// SetTap starts (t != nil) or stops (t == nil) copying forwarded frames to t.
// A frame already being forwarded when the tap is removed may still reach
// the old tap.
func (l *Link) SetTap(t Tap) {
	if t == nil {
		l.tap.Store(nil)
		return
	}
	l.tap.Store(&tapBox{t})
}

// Close stops relaying: both ports drop what they receive from now on. The
// ports stay open; they belong to whoever made them.
func (l *Link) Close() {
	l.ends[0].SetHandler(nil)
	l.ends[1].SetHandler(nil)
	l.tap.Store(nil)
}

// LinkStats counts what a link did, per direction (index AtoB, BtoA).
type LinkStats struct {
	Forwarded, Dropped, SendErrors [2]uint64
}

// Stats returns the link's counters.
func (l *Link) Stats() LinkStats {
	var s LinkStats
	for d := range 2 {
		s.Forwarded[d] = l.forwarded[d].Load()
		s.Dropped[d] = l.dropped[d].Load()
		s.SendErrors[d] = l.sendErrs[d].Load()
	}
	return s
}

// direction is the handler of one end of a link.
type direction struct {
	l   *Link
	dir Direction
}

func (d direction) HandleFrame(frame []byte) {
	l := d.l
	if l.state.Load().Suspend {
		l.dropped[d.dir].Add(1)
		return
	}
	if tb := l.tap.Load(); tb != nil {
		tb.t.WritePacket(d.dir, frame)
	}
	if err := l.ends[1-d.dir].Send(frame); err != nil {
		l.sendErrs[d.dir].Add(1)
		return
	}
	l.forwarded[d.dir].Add(1)
}
