package node

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
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

	mu      sync.Mutex
	waiters map[int][]chan struct{}
	running bool
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
	if !w.running {
		w.running = true
		go w.poll()
	}
	w.mu.Unlock()
	return ch, func() { w.forget(port, ch) }
}

func (w *udpWatch) forget(port int, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
// waiters whose port it finds; it ends when none is left.
func (w *udpWatch) poll() {
	for w.tick() {
		time.Sleep(w.every)
	}
}

// tick reads the table once and wakes the waiters whose port it finds;
// false when no waiter is left (the poller ends).
func (w *udpWatch) tick() bool {
	w.mu.Lock()
	want := make(map[int]bool, len(w.waiters))
	for port := range w.waiters {
		want[port] = true
	}
	w.mu.Unlock()
	found := w.scan(want)
	w.mu.Lock()
	defer w.mu.Unlock()
	for port := range found {
		for _, ch := range w.waiters[port] {
			close(ch)
		}
		delete(w.waiters, port)
	}
	if len(w.waiters) == 0 {
		w.running = false
		return false
	}
	return true
}

// scan returns which of the wanted ports are bound, reading each table
// line once (the local address is the second field, "ADDR:PORT" in hex).
func (w *udpWatch) scan(want map[int]bool) map[int]bool {
	found := map[int]bool{}
	for _, name := range w.files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if port, ok := localPort(sc.Bytes()); ok && want[port] {
				found[port] = true
			}
		}
		f.Close()
	}
	return found
}

// localPort parses the local port of one /proc/net/udp line; false for
// the header or a malformed line.
func localPort(line []byte) (int, bool) {
	f := bytes.Fields(line)
	if len(f) < 4 {
		return 0, false
	}
	i := bytes.LastIndexByte(f[1], ':')
	if i < 0 {
		return 0, false
	}
	p, err := strconv.ParseUint(string(f[1][i+1:]), 16, 16)
	if err != nil {
		return 0, false
	}
	return int(p), true
}
