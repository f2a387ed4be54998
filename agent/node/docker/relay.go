package docker

import (
	"io"
	"net"
	"sync"
)

// relay copies each connection accepted on a listener to one it dials,
// both ways. It owns its goroutines (the accept loop, and per connection
// a dialer and two copiers): Close ends them all and returns once they
// have ended.
type relay struct {
	ln   net.Listener
	dial func() (net.Conn, error)

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, both ends
	closed bool
}

// startRelay starts relaying connections accepted on ln to what dial
// returns.
func startRelay(ln net.Listener, dial func() (net.Conn, error)) *relay {
	r := &relay{ln: ln, dial: dial, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r
}

// Close closes the listener and every relayed connection, and waits for
// the relay's goroutines to end.
func (r *relay) Close() {
	r.mu.Lock()
	r.closed = true
	r.ln.Close()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// track records an open connection; false (the connection is closed)
// once the relay is closing.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(conn) {
			return
		}
		r.wg.Add(1)
		go r.serve(conn)
	}
}

// serve relays one connection until either side ends it.
func (r *relay) serve(conn net.Conn) {
	defer r.wg.Done()
	defer r.untrack(conn)
	up, err := r.dial()
	if err != nil {
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	r.wg.Add(2)
	go func() { defer r.wg.Done(); io.Copy(up, conn); done <- struct{}{} }()
	go func() { defer r.wg.Done(); io.Copy(conn, up); done <- struct{}{} }()
	<-done
	// The deferred closes end the other copier.
}
