package labcapture

import (
	"container/heap"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Ordering the merge. Each link direction is a source whose records come
// in the order its agent wrote them. A record is held until it is the
// oldest (by timestamp) of every source's first record and either every
// source that still runs has a record queued (none can bring an older one
// unless its agent's clock or stream lags), or a queued record has waited
// the reorder window (a source that stays silent longer holds nobody up).
// A source's queue is bounded (maxQueued records, maxQueuedBytes): past it
// the oldest records go out at once, in order. So the file is in time order
// within an agent whenever its streams reach the controller within the
// window of each other, memory is bounded by the sources, and a source's
// records are never reordered among themselves.

// Per-source bounds of the reorder queue.
const (
	maxQueued      = 4096
	maxQueuedBytes = 4 << 20
)

// record is a frame waiting to be written.
type record struct {
	key  ifaceKey
	name string // of its interface
	lt   layers.LinkType
	ci   gopacket.CaptureInfo
	data []byte
	seq  uint64    // arrival order, over every source
	at   time.Time // arrival
}

// source is one link direction's queue, oldest first.
type source struct {
	q      []*record
	bytes  int
	closed bool // its stream ended: it holds nobody up once empty
	byTime int  // index in reorder.byTime, -1 when empty
	byAge  int  // index in reorder.byAge, -1 when empty
}

func (s *source) head() *record { return s.q[0] }

// reorder merges sources by timestamp within a window. It is not safe for
// concurrent use: run.mu guards it.
type reorder struct {
	window    time.Duration
	sources   map[ifaceKey]*source
	byTime    indexedHeap[*source] // sources with records, by their first record's timestamp
	byAge     indexedHeap[*source] // the same, by their first record's arrival
	emptyOpen int                  // sources still running with no record queued
	seq       uint64
}

func newReorder(window time.Duration) *reorder {
	return &reorder{
		window:  window,
		sources: make(map[ifaceKey]*source),
		byTime:  indexedHeap[*source]{less: byTimestamp, index: func(s *source) *int { return &s.byTime }},
		byAge:   indexedHeap[*source]{less: byArrival, index: func(s *source) *int { return &s.byAge }},
	}
}

// open makes k a running source: until it has a record, the others wait
// for it (at most the window).
func (o *reorder) open(k ifaceKey) {
	s := o.sources[k]
	switch {
	case s == nil:
		o.sources[k] = &source{byTime: -1, byAge: -1}
		o.emptyOpen++
	case s.closed:
		s.closed = false // it has records: a closed empty source is gone
	}
}

// close says source k's stream ended: it holds nobody up any more.
func (o *reorder) close(k ifaceKey) {
	s := o.sources[k]
	if s == nil || s.closed {
		return
	}
	s.closed = true
	if len(s.q) == 0 {
		o.emptyOpen--
		delete(o.sources, k)
	}
}

// push queues a record of source rec.key (opened if need be), then emits
// the oldest records while that source's queue is over its bound.
func (o *reorder) push(rec *record, emit func(*record) error) error {
	o.open(rec.key)
	s := o.sources[rec.key]
	o.seq++
	rec.seq = o.seq
	if len(s.q) == 0 {
		if !s.closed {
			o.emptyOpen--
		}
		s.q = append(s.q, rec)
		heap.Push(&o.byTime, s)
		heap.Push(&o.byAge, s)
	} else {
		s.q = append(s.q, rec)
	}
	s.bytes += len(rec.data)
	for len(s.q) > maxQueued || s.bytes > maxQueuedBytes {
		if err := emit(o.pop()); err != nil {
			return err
		}
	}
	return nil
}

// pop takes the record with the oldest timestamp of the sources' first
// records (the earlier arrival on a tie).
func (o *reorder) pop() *record {
	s := o.byTime.items[0]
	rec := s.q[0]
	s.q[0] = nil
	s.q = s.q[1:]
	s.bytes -= len(rec.data)
	if len(s.q) == 0 {
		heap.Remove(&o.byTime, s.byTime)
		heap.Remove(&o.byAge, s.byAge)
		s.q = nil // let the backing array go
		if s.closed {
			delete(o.sources, rec.key)
		} else {
			o.emptyOpen++
		}
	} else {
		heap.Fix(&o.byTime, s.byTime)
		heap.Fix(&o.byAge, s.byAge)
	}
	return rec
}

// release emits, in timestamp order, every record that need wait no more
// at now (all of them with force), and says when the next one will be due
// (ok false: none is queued).
func (o *reorder) release(now time.Time, force bool, emit func(*record) error) (next time.Time, ok bool, err error) {
	for o.byTime.Len() > 0 {
		oldest := o.byAge.items[0].head().at
		if !force && o.emptyOpen > 0 && now.Sub(oldest) < o.window {
			return oldest.Add(o.window), true, nil
		}
		if err := emit(o.pop()); err != nil {
			return time.Time{}, false, err
		}
	}
	return time.Time{}, false, nil
}

// indexedHeap is a container/heap of items that keeps each item's index
// in it up to date (in the int index points to; -1 once out), so that
// heap.Fix and heap.Remove can find an item.
type indexedHeap[T any] struct {
	items []T
	less  func(a, b T) bool
	index func(T) *int
}

func (h *indexedHeap[T]) Len() int           { return len(h.items) }
func (h *indexedHeap[T]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *indexedHeap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.index(h.items[i]), *h.index(h.items[j]) = i, j
}
func (h *indexedHeap[T]) Push(x any) {
	it := x.(T)
	*h.index(it) = len(h.items)
	h.items = append(h.items, it)
}
func (h *indexedHeap[T]) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	*h.index(it) = -1
	return it
}

// byTimestamp orders sources by their first record's timestamp, then
// arrival.
func byTimestamp(x, y *source) bool {
	a, b := x.head(), y.head()
	if !a.ci.Timestamp.Equal(b.ci.Timestamp) {
		return a.ci.Timestamp.Before(b.ci.Timestamp)
	}
	return a.seq < b.seq
}

// byArrival orders sources by their first record's arrival.
func byArrival(x, y *source) bool { return x.head().seq < y.head().seq }
