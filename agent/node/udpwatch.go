package node

import (
	"bytes"
	"io"
	"os"
	"sync"
	"time"
)

// udpWatch tells starting nodes when their UDP port is bound. One poller
// reads the kernel's socket table (/proc/net/udp and udp6) for every
// waiter at once, so n nodes starting together cost one table read per
// tick instead of n (with 200 VPCS starting, each reading the whole
// table every 20 ms was O(n²) work and most of nodes/start's time).
type udpWatch struct {
	every time.Duration
	files []string

	// The poller's own, kept from tick to tick so that a tick allocates
	// nothing (BenchmarkUDPWatchTick): the tables, open while it runs
	// (nil: not opened yet; a table that failed to open is not tried
	// again), the buffer they are read into, and the sets of ports.
	open        []*os.File
	failed      []bool
	buf         []byte
	want, found map[int]bool

	mu      sync.Mutex
	waiters map[int][]chan struct{}
	// The poller's owner is its waiters: the first one starts it, and the
	// last one to leave stops it and waits for its end (forget), so no
	// poller outlives its waiters. stop and done are the running poller's
	// (nil: none runs); last is the done of the latest poller started,
	// which the next one waits for, as they share the fields above.
	stop, done, last chan struct{}
	// manual: tests and benchmarks tick by hand; no poller is started.
	manual bool
}

var udpWatcher = &udpWatch{every: 20 * time.Millisecond, files: []string{"/proc/net/udp", "/proc/net/udp6"}}

// bound returns a channel closed once a UDP socket of this network
// namespace is bound to port, and a function to call when no longer
// waiting (it forgets the waiter; safe to call after the close).
func (w *udpWatch) bound(port int) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.waiters == nil {
		w.waiters = map[int][]chan struct{}{}
	}
	w.waiters[port] = append(w.waiters[port], ch)
	if w.done == nil && !w.manual {
		prev := w.last
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		w.last = w.done
		go w.poll(prev, w.stop, w.done)
	}
	w.mu.Unlock()
	return ch, func() { w.forget(port, ch) }
}

// forget drops a waiter; the last one stops the poller and waits until it
// has ended.
func (w *udpWatch) forget(port int, ch chan struct{}) {
	w.mu.Lock()
	w.dropLocked(port, ch)
	var done chan struct{}
	if len(w.waiters) == 0 && w.done != nil {
		close(w.stop)
		done = w.done
		w.stop, w.done = nil, nil
	}
	w.mu.Unlock()
	if done != nil {
		<-done
	}
}

// dropLocked removes one waiter. w.mu must be held.
func (w *udpWatch) dropLocked(port int, ch chan struct{}) {
	list := w.waiters[port]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.waiters, port)
	} else {
		w.waiters[port] = list
	}
}

// poll reads the table once per tick while anyone waits, waking the
// waiters whose port it finds; it ends when none is left or stop closes,
// and closes done then. It first waits for the poller before it (prev,
// nil if none), whose tables and buffers it takes over.
func (w *udpWatch) poll(prev, stop, done chan struct{}) {
	defer close(done)
	if prev != nil {
		<-prev
	}
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			w.closeTables()
			return
		default:
		}
		if !w.tick(done) {
			return
		}
		select {
		case <-stop:
			w.closeTables()
			return
		case <-t.C:
		}
	}
}

// tick reads the table once and wakes the waiters whose port it finds;
// false when no waiter is left (the poller ends). own is the done of the
// poller that ticks (nil: a test ticks by hand); a poller that ends on its
// own says so under the same lock, so a waiter that comes just after
// starts a new one.
func (w *udpWatch) tick(own chan struct{}) bool {
	if w.want == nil {
		w.want = map[int]bool{}
	}
	clear(w.want) // keeps its room: no allocation once grown
	w.mu.Lock()
	for port := range w.waiters {
		w.want[port] = true
	}
	w.mu.Unlock()
	found := w.scan(w.want)
	w.mu.Lock()
	defer w.mu.Unlock()
	for port := range found {
		for _, ch := range w.waiters[port] {
			close(ch)
		}
		delete(w.waiters, port)
	}
	if len(w.waiters) == 0 {
		if own != nil && w.done == own {
			w.stop, w.done = nil, nil
		}
		w.closeTables()
		return false
	}
	return true
}

// closeTables closes the tables the poller kept open.
func (w *udpWatch) closeTables() {
	for i, f := range w.open {
		if f != nil {
			f.Close()
		}
		w.open[i] = nil
	}
	clear(w.failed)
}

// scan returns which of the wanted ports are bound, reading each table
// line once (the local address is the second field, "ADDR:PORT" in hex).
// The set it returns is the watch's own, valid until the next scan; only
// one goroutine (the poller) may scan a watch.
func (w *udpWatch) scan(want map[int]bool) map[int]bool {
	if w.found == nil {
		w.found = map[int]bool{}
		w.open = make([]*os.File, len(w.files))
		w.failed = make([]bool, len(w.files))
	}
	clear(w.found)
	for i, name := range w.files {
		if w.failed[i] {
			continue
		}
		if w.open[i] == nil {
			f, err := os.Open(name)
			if err != nil {
				w.failed[i] = true
				continue
			}
			w.open[i] = f
		}
		// A /proc table read again from its start is made anew.
		if !w.read(w.open[i]) {
			w.open[i].Close()
			w.open[i] = nil
			continue
		}
		for rest := w.buf; len(rest) > 0; {
			line := rest
			if j := bytes.IndexByte(rest, '\n'); j >= 0 {
				line, rest = rest[:j], rest[j+1:]
			} else {
				rest = nil
			}
			if port, ok := localPort(line); ok && want[port] {
				w.found[port] = true
			}
		}
	}
	return w.found
}

// read reads f whole from its start into w.buf, which grows as needed
// and is kept; false on an error.
func (w *udpWatch) read(f *os.File) bool {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, 64<<10)
	}
	w.buf = w.buf[:0]
	for {
		if len(w.buf) == cap(w.buf) {
			w.buf = append(w.buf, 0)[:len(w.buf)]
		}
		n, err := f.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+n]
		if err == io.EOF || (err == nil && n == 0) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// localPort parses the local port of one /proc/net/udp line; false for
// the header or a malformed line. It allocates nothing: it runs for every
// line of the table at every tick. prometheus/procfs's NetUDP parser
// (used for the agent's other /proc reads) is not used here: with 200
// sockets a tick through it took as long (the kernel making the table
// dominates) but allocated about 0.4 MB in 7,000-10,000 allocations, 50
// times a second while nodes start (BenchmarkUDPWatchTickProcfs against
// BenchmarkUDPWatchTick, which allocates nothing).
func localPort(line []byte) (int, bool) {
	var f [4][]byte // the first four fields
	n := 0
	for i := 0; i < len(line) && n < len(f); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		start := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		if i > start {
			f[n] = line[start:i]
			n++
		}
	}
	if n < 4 {
		return 0, false
	}
	i := bytes.LastIndexByte(f[1], ':')
	if i < 0 {
		return 0, false
	}
	hex := f[1][i+1:]
	if len(hex) == 0 || len(hex) > 4 {
		return 0, false
	}
	p := 0
	for _, c := range hex {
		switch {
		case '0' <= c && c <= '9':
			p = p<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			p = p<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			p = p<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return p, true
}
