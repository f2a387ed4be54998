// Package notify fans events out to the listeners of the controller's
// notification streams: one stream for the controller, one per project.
//
// Publishing never blocks: each subscriber has a bounded queue, and one
// that falls behind is dropped (its stream ends; a client reconnects), so
// neither the API nor the data path ever waits for a slow listener, and
// memory stays bounded. Messages reach every subscriber of a stream in the
// order they were published.
package notify

import (
	"sync"
	"sync/atomic"
	"time"
)

// Message is one notification. Its Data are shared by every subscriber
// and never changed.
type Message struct {
	// About is the access path of what the message concerns
	// ("/projects/<id>", "/computes/<id>", "/templates/<id>"), for the
	// subscriber to filter on: a listener hears only what its user may
	// audit. "" is about nothing in particular (every listener).
	About string
	Data  []byte
}

// Controller is the stream of controller-wide events.
const Controller = ""

// DefaultQueue is how many messages a subscriber may fall behind by.
const DefaultQueue = 1024

// Hub routes messages to subscribers. Publishing only queues the message:
// one dispatcher goroutine fans messages out, so a publisher (an API call)
// pays for one channel send whatever the number of listeners. Make a Hub
// with New and stop it with Close. It is safe for concurrent use.
type Hub struct {
	queue  int
	onIdle func(projectID string)
	in     chan op       // to the dispatcher
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the dispatcher has stopped
	// lost is set when a message could not even be queued for the
	// dispatcher: every listener of that moment must be dropped, since
	// each would silently miss it.
	lost atomic.Bool
	// dropped counts the listeners dropped for falling behind.
	dropped atomic.Uint64

	grace time.Duration

	mu   sync.Mutex // guards subs, active, idle, stopping and Sub.closed
	subs map[string]map[*Sub]struct{}
	// active counts each project stream's subscribers that keep it
	// opened: Subscribe's, not Watch's.
	active   map[string]int
	idle     map[string]*time.Timer // project streams waiting out their grace
	stopping bool                   // Close has begun: no more onIdle calls
	onIdles  sync.WaitGroup         // onIdle calls under way; Close waits for them
	once     sync.Once
}

// op is one thing for the dispatcher to do, in order: add a subscriber,
// or deliver a message to a stream (or to every project stream).
type op struct {
	sub    *Sub
	added  chan struct{} // closed once sub is registered
	stream string
	msg    Message
	all    bool
}

// Sub is one listener of a stream.
type Sub struct {
	// C delivers the messages, in order. It is closed when the subscriber
	// is dropped for falling behind, or unsubscribed.
	C      chan Message
	stream string
	closed bool // guarded by the hub's mu
	// passive: a Watch listener, which OnIdle does not count.
	passive bool
}

// Config configures a Hub.
type Config struct {
	// Queue bounds each subscriber's backlog, and the dispatcher's; 0 means
	// DefaultQueue.
	Queue int
	// OnIdle is called, in its own goroutine, when a project stream has
	// had no subscriber for IdleGrace since its last one left. Watch's
	// listeners do not count: they neither start nor stop the wait.
	OnIdle func(projectID string)
	// IdleGrace is how long a project stream must stay without listeners
	// before OnIdle; 0 means 5 s (GNS3's auto-close delay).
	IdleGrace time.Duration
}

// New returns a running Hub.
func New(cfg Config) *Hub {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.IdleGrace <= 0 {
		cfg.IdleGrace = 5 * time.Second
	}
	h := &Hub{
		queue: cfg.Queue, onIdle: cfg.OnIdle, grace: cfg.IdleGrace, idle: make(map[string]*time.Timer),
		in: make(chan op, 4*cfg.Queue), quit: make(chan struct{}), done: make(chan struct{}),
		subs: make(map[string]map[*Sub]struct{}), active: make(map[string]int),
	}
	go h.run()
	return h
}

// Close stops the dispatcher and ends every subscriber's stream. Later
// publications go nowhere. It is safe to call twice.
// It waits for OnIdle calls under way to return.
func (h *Hub) Close() {
	h.once.Do(func() {
		close(h.quit)
		<-h.done
		h.mu.Lock()
		h.stopping = true
		for _, subs := range h.subs {
			for s := range subs {
				h.removeLocked(s)
			}
		}
		for stream, t := range h.idle { // shutting down is not "idle"
			t.Stop()
			delete(h.idle, stream)
		}
		h.mu.Unlock()
		h.onIdles.Wait()
	})
}

func (h *Hub) run() {
	defer close(h.done)
	for {
		select {
		case o := <-h.in:
			h.apply(o)
		case <-h.quit:
			return
		}
	}
}

func (h *Hub) apply(o op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost.Swap(false) {
		for _, subs := range h.subs {
			for s := range subs {
				h.removeLocked(s)
				h.dropped.Add(1)
			}
		}
	}
	switch {
	case o.sub != nil:
		defer close(o.added)
		if o.sub.closed { // dropped above, with everyone
			return
		}
		if !o.sub.passive {
			if t := h.idle[o.stream]; t != nil { // a listener is back in time
				t.Stop()
				delete(h.idle, o.stream)
			}
			h.active[o.stream]++
		}
		if h.subs[o.stream] == nil {
			h.subs[o.stream] = make(map[*Sub]struct{})
		}
		h.subs[o.stream][o.sub] = struct{}{}
	case o.all:
		for stream := range h.subs {
			if stream != Controller {
				h.deliverLocked(stream, o.msg)
			}
		}
	default:
		h.deliverLocked(o.stream, o.msg)
	}
}

// deliverLocked hands msg to every subscriber of a stream, dropping those
// whose queue is full. h.mu must be held.
func (h *Hub) deliverLocked(stream string, msg Message) {
	for s := range h.subs[stream] {
		select {
		case s.C <- msg:
		default:
			h.removeLocked(s)
			h.dropped.Add(1)
		}
	}
}

// Subscribe adds a listener to a stream: Controller, or a project id. The
// listener gets every message published after Subscribe returns, and none
// published before. It goes through the dispatcher's queue, in order with
// the messages, so it may wait for the dispatcher. On a closed hub the
// listener's channel is closed at once.
func (h *Hub) Subscribe(stream string) *Sub { return h.subscribe(stream, false) }

// Watch is Subscribe for a listener that does not count as a client of the
// project (labtap's capture view): its leaving never makes the stream
// idle, and its presence does not keep the stream from being idle.
func (h *Hub) Watch(stream string) *Sub { return h.subscribe(stream, true) }

func (h *Hub) subscribe(stream string, passive bool) *Sub {
	s := &Sub{C: make(chan Message, h.queue), stream: stream, passive: passive}
	added := make(chan struct{})
	select {
	case h.in <- op{sub: s, added: added, stream: stream}:
		select {
		case <-added:
			return s
		case <-h.done:
		}
	case <-h.quit:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.C)
	}
	return s
}

// Unsubscribe removes a listener. It is safe to call for a listener that
// was dropped already, and twice.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(s)
}

// removeLocked drops a subscriber and closes its channel. h.mu must be held.
func (h *Hub) removeLocked(s *Sub) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.C)
	subs, ok := h.subs[s.stream]
	if _, in := subs[s]; !ok || !in {
		return
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.subs, s.stream)
	}
	if s.passive {
		return
	}
	if h.active[s.stream]--; h.active[s.stream] <= 0 {
		delete(h.active, s.stream)
		if s.stream != Controller && h.onIdle != nil {
			h.startIdleLocked(s.stream)
		}
	}
}

// startIdleLocked reports a project stream idle once it has stayed without
// listeners for the grace period. h.mu must be held.
func (h *Hub) startIdleLocked(stream string) {
	if old := h.idle[stream]; old != nil {
		old.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(h.grace, func() {
		h.mu.Lock()
		still := !h.stopping && h.idle[stream] == t && h.active[stream] == 0
		if still {
			delete(h.idle, stream)
			h.onIdles.Add(1)
		}
		h.mu.Unlock()
		if still {
			defer h.onIdles.Done()
			h.onIdle(stream)
		}
	})
	h.idle[stream] = t
}

// Publish queues msg for every subscriber of a stream. It never blocks.
// msg must not be changed afterwards; subscribers share it.
func (h *Hub) Publish(stream string, msg []byte) {
	h.enqueue(op{stream: stream, msg: Message{Data: msg}})
}

// PublishAbout is Publish of a message about the resource at the access
// path about (Message.About).
func (h *Hub) PublishAbout(stream, about string, msg []byte) {
	h.enqueue(op{stream: stream, msg: Message{About: about, Data: msg}})
}

// PublishAll queues msg for every project stream (events that name no
// project go to all of them, as in GNS3).
func (h *Hub) PublishAll(msg []byte) {
	h.enqueue(op{msg: Message{Data: msg}, all: true})
}

func (h *Hub) enqueue(o op) {
	select {
	case h.in <- o:
	default:
		h.lost.Store(true)
	}
}

// Count returns how many subscribers a stream has, Watch's included.
func (h *Hub) Count(stream string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[stream])
}

// Stats returns how many listeners the hub has now, on every stream, and
// how many it has dropped since it began for falling behind.
func (h *Hub) Stats() (listeners int, dropped uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		listeners += len(subs)
	}
	return listeners, h.dropped.Load()
}
