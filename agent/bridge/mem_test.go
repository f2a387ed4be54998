package bridge

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
)

// memPort is an in-memory Port for tests: it records what is sent to it,
// with the time, and injects frames into its handler as a port's receive
// loop would.
type memPort struct {
	h atomic.Pointer[handlerBox]

	mu   sync.Mutex
	sent [][]byte
	at   []time.Time
}

func (m *memPort) Send(frames [][]byte) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, f := range frames {
		m.sent = append(m.sent, bytes.Clone(f))
		m.at = append(m.at, now)
	}
	return len(frames)
}

func (m *memPort) SetHandler(h Handler) {
	if h == nil {
		m.h.Store(nil)
		return
	}
	m.h.Store(&handlerBox{h})
}

// inject delivers frames as received by this port. Like a real port, it
// must not be called concurrently with itself.
func (m *memPort) inject(frames ...[]byte) {
	if hb := m.h.Load(); hb != nil {
		hb.h.HandleFrames(frames)
	}
}

// received returns a copy of what was sent to the port, and when.
func (m *memPort) received() ([][]byte, []time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.sent...), append([]time.Time(nil), m.at...)
}

func (m *memPort) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}
