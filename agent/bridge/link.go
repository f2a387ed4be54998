package bridge

import (
	"sync"
	"sync/atomic"
	"time"
)

// Link relays frames between two ports, both directions: what end A
// receives is sent out of end B and the other way round. Each direction
// runs, in the goroutine of the port that received the frames:
//
//	receive → count → filters (bpf, frequency_drop, packet_loss, corrupt)
//	        → [delay line] → tap → send → count
//
// so dropped frames are never captured, corrupted frames are captured
// corrupted, and delayed frames are captured when they leave: the capture
// holds what crossed the link after its filters. The filters and the tap are swapped atomically while frames flow.
type Link struct {
	ends    [2]Port
	filters atomic.Pointer[Filters] // nil: pass everything
	tap     atomic.Pointer[tapBox]
	dirs    [2]*relayDir

	closeOnce sync.Once
}

type tapBox struct{ t Tap }

// NewLink joins a and b with the filters f (nil passes everything) and
// starts relaying at once: it becomes the handler of both ports. A port
// belongs to at most one link at a time. Close the link to stop it.
func NewLink(a, b Port, f *Filters) *Link {
	l := &Link{ends: [2]Port{a, b}}
	l.filters.Store(f)
	for d := range l.dirs {
		rd := &relayDir{l: l, dir: Direction(d), out: make([][]byte, 0, maxBatch)}
		rd.line = newDelayLine(rd.emitDelayed)
		l.dirs[d] = rd
		go rd.line.run() // ended by Close
	}
	a.SetHandler(l.dirs[AtoB])
	b.SetHandler(l.dirs[BtoA])
	return l
}

// SetFilters swaps in a new filter chain (nil passes everything), from the
// next frame on. Frames already in a delay line keep their release time.
func (l *Link) SetFilters(f *Filters) { l.filters.Store(f) }

// Ends returns the ports the link joins, A and B.
func (l *Link) Ends() [2]Port { return l.ends }

// SetTap starts (t != nil) or stops (t == nil) giving forwarded frames to
// t. A batch being forwarded when the tap is removed may still reach the old
// tap, which must cope (a stopped capture ignores it).
func (l *Link) SetTap(t Tap) {
	if t == nil {
		l.tap.Store(nil)
		return
	}
	l.tap.Store(&tapBox{t})
}

// Close stops relaying: both ports drop what they receive from now on, and
// the frames still in the delay lines are dropped. The ports stay open; they
// belong to whoever made them. It is safe to call twice.
func (l *Link) Close() {
	l.closeOnce.Do(func() {
		l.ends[0].SetHandler(nil)
		l.ends[1].SetHandler(nil)
		l.tap.Store(nil)
		for _, d := range l.dirs {
			d.line.close()
		}
	})
}

// DirStats counts what one direction of a link did.
type DirStats struct {
	// Received frames entered the direction; Forwarded left it, in
	// ForwardedBytes bytes.
	Received, Forwarded, ForwardedBytes uint64
	// Filtered frames were dropped by suspend or a filter; Delayed is how
	// many are in the delay line now; DelayDrops found it full (or were in
	// it when the link closed); SendErrors could not be sent.
	Filtered, DelayDrops, SendErrors uint64
	Delayed                          int64
	// FilteredBy splits Filtered by what dropped the frames, indexed by
	// DropReason (NotDropped stays 0).
	FilteredBy [numDropReasons]uint64
}

// LinkStats counts what a link did, per direction (index AtoB, BtoA).
type LinkStats [2]DirStats

// Stats returns the link's counters.
func (l *Link) Stats() LinkStats {
	var s LinkStats
	for i, d := range l.dirs {
		s[i] = DirStats{
			Received:       d.received.Load(),
			Forwarded:      d.forwarded.Load(),
			ForwardedBytes: d.forwardedBytes.Load(),
			DelayDrops:     d.line.drops.Load(),
			SendErrors:     d.sendErrs.Load(),
			Delayed:        d.line.pending.Load(),
		}
		for r := range d.filteredBy {
			n := d.filteredBy[r].Load()
			s[i].FilteredBy[r] = n
			s[i].Filtered += n
		}
	}
	return s
}

// relayDir is one direction of a link: the handler of the port frames come
// in on. HandleFrames runs in that port's goroutine only, so out and the
// corrupt buffers need no lock; emitDelayed runs in the delay line's.
type relayDir struct {
	l    *Link
	dir  Direction
	line *delayLine

	out     [][]byte // frames of this batch that leave now
	corrupt [][]byte // copies of this batch's corrupted frames (frames are not ours to change)

	received, forwarded, forwardedBytes, sendErrs atomic.Uint64
	filteredBy                                    [numDropReasons]atomic.Uint64
}

func (d *relayDir) HandleFrames(frames [][]byte) {
	d.received.Add(uint64(len(frames)))
	f := d.l.filters.Load()
	if f == nil && d.line.idle() {
		d.emit(frames) // the fast path: no filter, nothing delayed
		return
	}
	if f != nil && f.cfg.Suspend {
		d.filteredBy[DroppedBySuspend].Add(uint64(len(frames)))
		return
	}
	out, ncorrupt := d.out[:0], 0
	for _, fr := range frames {
		var delay bool
		if f != nil {
			if r := f.drop(fr); r != NotDropped {
				d.filteredBy[r].Add(1)
				continue
			}
			if f.corrupts() {
				fr = d.copyForCorruption(ncorrupt, fr)
				ncorrupt++
				f.corrupt(fr)
			}
			delay = f.delays()
		}
		if delay || !d.line.idle() {
			var wait time.Duration // none: the frame leaves after the queued ones
			if delay {
				wait = f.delay()
			}
			d.line.push(fr, wait)
			continue
		}
		out = append(out, fr)
	}
	d.emit(out)
	clear(out)
	d.out = out[:0]
}

// copyForCorruption returns a copy of frame in the i-th corruption buffer.
func (d *relayDir) copyForCorruption(i int, frame []byte) []byte {
	if i == len(d.corrupt) {
		d.corrupt = append(d.corrupt, nil)
	}
	if cap(d.corrupt[i]) < len(frame) {
		d.corrupt[i] = make([]byte, len(frame), max(len(frame), 2048))
	}
	buf := d.corrupt[i][:len(frame)]
	copy(buf, frame)
	return buf
}

// emit captures frames and sends them out of the other end.
func (d *relayDir) emit(frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	if tb := d.l.tap.Load(); tb != nil {
		tb.t.WritePackets(d.dir, frames)
	}
	n := d.l.ends[1-d.dir].Send(frames)
	d.forwarded.Add(uint64(n))
	var size int
	for _, fr := range frames[:n] { // a send that fails partway sent the first n
		size += len(fr)
	}
	d.forwardedBytes.Add(uint64(size))
	if n < len(frames) {
		d.sendErrs.Add(uint64(len(frames) - n))
	}
}

// emitDelayed sends frames leaving the delay line, unless the link was
// suspended meanwhile: suspend drops every frame until it is cleared.
func (d *relayDir) emitDelayed(frames [][]byte) {
	if f := d.l.filters.Load(); f != nil && f.cfg.Suspend {
		d.filteredBy[DroppedBySuspend].Add(uint64(len(frames)))
		return
	}
	d.emit(frames)
}
