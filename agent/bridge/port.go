// Package bridge moves frames between the ends of a link: UDP sockets facing
// emulators or peer agents (one frame per datagram), and the ports of the
// switches and hubs the agent runs itself. A [Link] relays frames between two
// [Port]s, both directions, through the link's [Filters] (suspend, bpf,
// frequency_drop, packet_loss, corrupt, delay), and hands every forwarded
// frame to a capture [Tap].
//
// The package knows nothing of HTTP, projects, wire types or capture files: a
// Tap is any value with a WritePackets method, and BPF programs arrive
// compiled (package pcapfilter compiles them, so this package stays pure Go).
//
// Frames travel in batches ([][]byte) from the receive call that read them to
// the send call that writes them, so that one system call moves many frames
// both ways.
package bridge

// Handler receives the frames a port reads.
//
// HandleFrames is called with frames read together, in arrival order, from
// one goroutine at a time for a given port (a port never calls its handler
// concurrently). The frames and the slice belong to the caller: the handler
// must not modify them, and must not keep either after it returns (it copies
// what it queues).
type Handler interface {
	HandleFrames(frames [][]byte)
}

// Port is one end of a link: it sends frames out and delivers the frames it
// receives to its handler.
type Port interface {
	// Send transmits frames, in order, and returns how many left. It neither
	// modifies nor keeps them. A frame that cannot be sent (no peer yet, a
	// full queue, an ICMP error) is dropped and counted by the port: sending
	// never fails a relay. Send is safe for concurrent use.
	Send(frames [][]byte) int
	// SetHandler sets who receives this port's frames; nil drops them.
	SetHandler(h Handler)
}

// Direction tells which end of a link a frame came from.
type Direction int

// The two directions of a link.
const (
	AtoB Direction = 0 // received on end A, sent out of end B
	BtoA Direction = 1 // received on end B, sent out of end A
)

// Tap receives every frame a link forwards, after the link's filters, just
// before it is sent (a delayed frame when it leaves the delay line).
// WritePackets may be called concurrently for the two directions; it must
// neither keep nor modify frames, and must return quickly: it runs on the
// forwarding path.
type Tap interface {
	WritePackets(dir Direction, frames [][]byte)
}
