// Package node runs the nodes of a lab: emulator processes such as VPCS,
// each with its network ports handed to the agent as UDP addresses, and an
// in-process [Fake] with the same contract for tests.
package node

import (
	"context"
	"net/netip"
)

// Runner runs one node. Its methods are safe for concurrent use.
type Runner interface {
	// Start starts the node and returns once it is up, or why it could not
	// start. Starting a started node does nothing.
	Start(ctx context.Context) error
	// Stop stops the node and waits for it to be gone. Stopping a stopped
	// node does nothing.
	Stop(ctx context.Context) error
	// Status returns "started" or "stopped".
	Status() string
	// Console returns the node's console TCP port and type ("telnet",
	// "none"); port 0 means no console.
	Console() (port int, kind string)
	// CommandLine returns the command the node runs, "" while stopped.
	CommandLine() string
	// NIC returns the UDP address where the node receives the frames of
	// one of its ports, and false while the node is stopped or has no such
	// port. It may change at every start.
	NIC(adapter, port int) (netip.AddrPort, bool)
}

// Statuses a Runner reports.
const (
	Started = "started"
	Stopped = "stopped"
)
