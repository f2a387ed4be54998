package bridge

import (
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of a delay line, per direction of a link. A line holds rate ×
// delay frames: 16 MiB is 110 ms of full-size frames at 100k frames/s, far
// beyond what a lab's links carry with a delay on.
const (
	delayMaxFrames = 1 << 16
	delayMaxBytes  = 16 << 20
)

// delayLine holds the delayed frames of one direction of a link and sends
// each at its release time, from its own goroutine, so a delayed frame never
// blocks the receive loop. Release times never go
// backwards (a frame leaves at max(its own time, the previous frame's)), so
// jitter never reorders a direction. A full line drops the newest frame and
// counts it.
type delayLine struct {
	emit func(frames [][]byte) // sends a batch on; called only from run

	mu    sync.Mutex // guards the fields below
	queue []delayed  // FIFO ring: queue[head], queue[head+1]...
	head  int
	n     int
	bytes int
	last  time.Time // release time of the newest frame
	free  [][]byte  // buffers of frames sent, for reuse
	stop  bool

	// pending counts frames queued or being sent: while it is not 0, frames
	// must join the line (even with the delay filter gone) to stay in order.
	pending atomic.Int64
	drops   atomic.Uint64 // the line was full
	wake    chan struct{} // capacity 1: a frame arrived at an empty line
	done    chan struct{} // closed when run returns
}

type delayed struct {
	at    time.Time
	frame []byte
}

func newDelayLine(emit func([][]byte)) *delayLine {
	return &delayLine{
		emit:  emit,
		queue: make([]delayed, 64),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// idle reports whether no frame is in the line.
func (d *delayLine) idle() bool { return d.pending.Load() == 0 }

// push copies frame into the line, to leave after wait (and after the frame
// before it). It reports false, and counts a drop, when the line is full.
func (d *delayLine) push(frame []byte, wait time.Duration) bool {
	d.mu.Lock()
	if d.stop || d.n == delayMaxFrames || d.bytes+len(frame) > delayMaxBytes {
		d.mu.Unlock()
		d.drops.Add(1)
		return false
	}
	at := time.Now().Add(wait)
	if at.Before(d.last) {
		at = d.last
	}
	d.last = at
	var buf []byte
	if k := len(d.free); k > 0 && cap(d.free[k-1]) >= len(frame) {
		buf, d.free = d.free[k-1][:len(frame)], d.free[:k-1]
	} else {
		buf = make([]byte, len(frame), max(len(frame), 2048))
	}
	copy(buf, frame)
	if d.n == len(d.queue) {
		d.grow()
	}
	d.queue[(d.head+d.n)%len(d.queue)] = delayed{at: at, frame: buf}
	d.n++
	d.bytes += len(frame)
	d.pending.Add(1)
	first := d.n == 1
	d.mu.Unlock()
	if first {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// grow doubles the ring. d.mu must be held.
func (d *delayLine) grow() {
	q := make([]delayed, 2*len(d.queue))
	for i := range d.n {
		q[i] = d.queue[(d.head+i)%len(d.queue)]
	}
	d.queue, d.head = q, 0
}

// run releases frames at their time until close is called; frames still
// in the line then are dropped.
func (d *delayLine) run() {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	out := make([][]byte, 0, maxBatch)
	for {
		d.mu.Lock()
		if d.stop {
			d.mu.Unlock()
			return
		}
		if d.n == 0 {
			d.mu.Unlock()
			<-d.wake
			continue
		}
		now := time.Now()
		if at := d.queue[d.head].at; at.After(now) {
			d.mu.Unlock()
			timer.Reset(at.Sub(now))
			select {
			case <-timer.C:
			case <-d.wake: // only close wakes a non-empty line
				timer.Stop()
			}
			continue
		}
		// Everything due leaves together, up to a batch.
		for d.n > 0 && len(out) < maxBatch && !d.queue[d.head].at.After(now) {
			e := d.queue[d.head]
			d.queue[d.head] = delayed{}
			d.head = (d.head + 1) % len(d.queue)
			d.n--
			d.bytes -= len(e.frame)
			out = append(out, e.frame)
		}
		d.mu.Unlock()
		d.emit(out)
		d.mu.Lock()
		for _, f := range out {
			if len(d.free) < 256 {
				d.free = append(d.free, f)
			}
		}
		d.mu.Unlock()
		d.pending.Add(-int64(len(out)))
		clear(out)
		out = out[:0]
	}
}

// close stops run, waits for it, and drops the frames still in the line.
func (d *delayLine) close() {
	d.mu.Lock()
	d.stop = true
	dropped := d.n
	d.n, d.bytes = 0, 0
	clear(d.queue)
	d.mu.Unlock()
	d.pending.Add(-int64(dropped))
	d.drops.Add(uint64(dropped))
	select {
	case d.wake <- struct{}{}:
	default:
	}
	<-d.done
}
