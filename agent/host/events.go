package host

import (
	"sync"

	"github.com/labtap/labtap/proto"
)

// Events fans the agent's events out to the controllers that follow them.
// Publishing never blocks: a follower that falls behind is dropped (its
// stream ends; it reconnects and reconciles).
type Events struct {
	mu     sync.Mutex
	subs   map[chan proto.Event]struct{}
	closed bool // the agent ended: new followers get a closed stream
}

// Subscribe follows the agent's events until cancel is called. The channel
// is closed when the follower is dropped or cancels.
func (e *Events) Subscribe() (<-chan proto.Event, func()) {
	ch := make(chan proto.Event, 256)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	if e.subs == nil {
		e.subs = make(map[chan proto.Event]struct{})
	}
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if _, ok := e.subs[ch]; ok {
				delete(e.subs, ch)
				close(ch)
			}
		})
	}
}

// closeAll ends every follower's stream: the agent is ending.
func (e *Events) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		delete(e.subs, ch)
		close(ch)
	}
	e.closed = true
}

// publish gives ev to every follower; it never blocks.
func (e *Events) publish(ev proto.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
			delete(e.subs, ch)
			close(ch)
		}
	}
}

// nodeStopped reports a node's status after it stopped, asked to or not:
// the controller ignores a report that changes nothing, and learns of an
// emulator that died.
func (ag *agentParts) nodeStopped(n *hostNode) {
	if n.runner == nil {
		return // failed while being built: nobody knows of it
	}
	st := ag.nodeState(n)
	ag.events.publish(proto.Event{Kind: proto.EventNodeStatus, ProjectID: n.projectID, NodeID: n.spec.NodeID, Node: &st})
}
