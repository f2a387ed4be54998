package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Fake is an in-process node with one Ethernet port and no console. While
// started it owns a UDP socket as its NIC: tests send frames out of it with
// Send and read what reaches it with Recv. It follows the Runner contract
// exactly, so an agent built with it behaves as with real emulators.
type Fake struct {
	agent netip.AddrPort
	// FailStart, if set, is returned by Start.
	FailStart error
	onStop    func()

	mu   sync.Mutex
	conn *net.UDPConn // nil while stopped
}

// NewFake returns a stopped Fake whose frames go to agent. onStop, if not
// nil, is called each time it stops.
func NewFake(agent netip.AddrPort, onStop func()) *Fake {
	return &Fake{agent: agent, onStop: onStop}
}

// Start opens the fake's NIC.
func (f *Fake) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailStart != nil {
		return f.FailStart
	}
	if f.conn != nil {
		return nil
	}
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return fmt.Errorf("fake node: %w", err)
	}
	f.conn = c
	return nil
}

// Stop closes the fake's NIC.
func (f *Fake) Stop(ctx context.Context) error {
	f.mu.Lock()
	c := f.conn
	f.conn = nil
	f.mu.Unlock()
	if c == nil {
		return nil
	}
	c.Close()
	if f.onStop != nil {
		f.onStop()
	}
	return nil
}

// Status returns Started or Stopped.
func (f *Fake) Status() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return Stopped
	}
	return Started
}

// Console reports no console.
func (f *Fake) Console() (int, string) { return 0, "none" }

// CommandLine is empty: nothing runs outside the process.
func (f *Fake) CommandLine() string { return "" }

// NIC returns the fake's socket address for adapter 0, port 0.
func (f *Fake) NIC(adapter, port int) (netip.AddrPort, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil || adapter != 0 || port != 0 {
		return netip.AddrPort{}, false
	}
	return f.conn.LocalAddr().(*net.UDPAddr).AddrPort(), true
}

var errStopped = errors.New("fake node is stopped")

// Send sends frame out of the fake's port, to the agent.
func (f *Fake) Send(frame []byte) error {
	f.mu.Lock()
	c := f.conn
	f.mu.Unlock()
	if c == nil {
		return errStopped
	}
	_, err := c.WriteToUDPAddrPort(frame, f.agent)
	return err
}

// Recv returns the next frame that reached the fake's port, waiting at most d.
func (f *Fake) Recv(d time.Duration) ([]byte, error) {
	f.mu.Lock()
	c := f.conn
	f.mu.Unlock()
	if c == nil {
		return nil, errStopped
	}
	buf := make([]byte, 65536)
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return nil, err
	}
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
