package host

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/proto"
)

type hostLink struct {
	spec    proto.LinkSpec
	relay   *bridge.Link
	nodes   []string          // ids of the nodes whose ports the link uses
	tunnels []*bridge.UDPPort // tunnel ends the link opened and closes
	capture *hostCapture      // the running or last capture, nil if none
}

type hostCapture struct {
	spec proto.CaptureSpec
	file *captures.File
	done bool // stopped (by request or by itself)
}

// PutLink creates a link's relay, or updates the state of an existing one.
// A link's endpoints cannot change: a spec with other endpoints for an
// existing link is a conflict.
func (h *Host) PutLink(projectID string, spec proto.LinkSpec) error {
	if err := checkID("link", spec.LinkID); err != nil {
		return err
	}
	st := bridge.State{Suspend: spec.Suspend}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := h.projectLocked(projectID)
	if err != nil {
		return err
	}
	if l, ok := p.links[spec.LinkID]; ok {
		if !sameEnds(l.spec, spec) {
			return proto.Errorf(proto.CodeConflict, "link %s exists with other endpoints", spec.LinkID)
		}
		l.spec = spec
		l.relay.SetState(st)
		return nil
	}
	l := &hostLink{spec: spec}
	ends, err := h.endsLocked(p, l)
	if err != nil {
		for _, t := range l.tunnels {
			t.Close()
		}
		return err
	}
	for _, id := range l.nodes {
		p.nodes[id].link = spec.LinkID
	}
	for _, t := range l.tunnels {
		h.goServe(t)
	}
	l.relay = bridge.NewLink(ends[0], ends[1], st)
	p.links[spec.LinkID] = l
	h.log.Info("link up", "project", projectID, "link", spec.LinkID)
	return nil
}

// endsLocked returns the two ports a new link joins. h.mu must be held.
func (h *Host) endsLocked(p *project, l *hostLink) ([2]bridge.Port, error) {
	var ends [2]bridge.Port
	for i, ep := range []proto.Endpoint{l.spec.A, l.spec.B} {
		port, err := h.endPortLocked(p, l, ep)
		if err != nil {
			return ends, err
		}
		ends[i] = port
	}
	if len(l.nodes) == 2 && l.nodes[0] == l.nodes[1] {
		return ends, proto.Errorf(proto.CodeConflict, "link %s connects node %s to itself", l.spec.LinkID, l.nodes[0])
	}
	return ends, nil
}

// endPortLocked returns the port of one endpoint: a node's port, which must
// be free, or a new tunnel end owned by l. h.mu must be held.
func (h *Host) endPortLocked(p *project, l *hostLink, ep proto.Endpoint) (bridge.Port, error) {
	if ep.Tunnel != nil {
		if ep.NodeID != "" {
			return nil, proto.Errorf(proto.CodeInvalid, "an endpoint is a node port or a tunnel, not both")
		}
		t, err := openTunnel(*ep.Tunnel)
		if err != nil {
			return nil, err
		}
		l.tunnels = append(l.tunnels, t)
		return t, nil
	}
	n, ok := p.nodes[ep.NodeID]
	if !ok {
		return nil, proto.Errorf(proto.CodeNotFound, "node %s does not exist on this agent", ep.NodeID)
	}
	if ep.Adapter != 0 || ep.Port != 0 {
		return nil, proto.Errorf(proto.CodeNotFound, "node %s has no port %d/%d", ep.NodeID, ep.Adapter, ep.Port)
	}
	if n.link != "" {
		return nil, proto.Errorf(proto.CodeConflict, "port %d/%d of node %s is already used by link %s", ep.Adapter, ep.Port, ep.NodeID, n.link)
	}
	l.nodes = append(l.nodes, ep.NodeID)
	return n.port, nil
}

func openTunnel(t proto.Tunnel) (*bridge.UDPPort, error) {
	if t.LocalPort < 0 || t.LocalPort > 65535 || t.RemotePort <= 0 || t.RemotePort > 65535 {
		return nil, proto.Errorf(proto.CodeInvalid, "tunnel ports out of range: %d -> %d", t.LocalPort, t.RemotePort)
	}
	addr, err := netip.ParseAddr(t.RemoteHost)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(context.Background(), "ip", t.RemoteHost)
		if lerr != nil || len(ips) == 0 {
			return nil, proto.Errorf(proto.CodeInvalid, "tunnel remote host %q: %v", t.RemoteHost, lerr)
		}
		addr = ips[0]
	}
	addr = addr.Unmap()
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(t.LocalPort))
	if addr.Is6() {
		local = netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(t.LocalPort))
	}
	port, err := bridge.ListenUDP(bridge.UDPConfig{
		Local:   local,
		Peer:    netip.AddrPortFrom(addr, uint16(t.RemotePort)),
		Connect: true,
	})
	if err != nil {
		return nil, proto.Errorf(proto.CodeConflict, "tunnel: %v", err)
	}
	return port, nil
}

func sameEnds(a, b proto.LinkSpec) bool {
	same := func(x, y proto.Endpoint) bool {
		if (x.Tunnel == nil) != (y.Tunnel == nil) {
			return false
		}
		if x.Tunnel != nil && *x.Tunnel != *y.Tunnel {
			return false
		}
		return x.NodeID == y.NodeID && x.Adapter == y.Adapter && x.Port == y.Port
	}
	return same(a.A, b.A) && same(a.B, b.B)
}

// DeleteLink stops a link's relay and capture (the capture file stays
// valid) and closes its tunnels. Deleting an unknown link does nothing.
func (h *Host) DeleteLink(projectID, linkID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := h.projectLocked(projectID)
	if err != nil {
		return err
	}
	if l, ok := p.links[linkID]; ok {
		h.removeLinkLocked(p, l)
	}
	return nil
}

// removeLinkLocked tears a link down. h.mu must be held.
func (h *Host) removeLinkLocked(p *project, l *hostLink) {
	l.relay.Close()
	h.stopCaptureLocked(l)
	for _, t := range l.tunnels {
		t.Close()
	}
	for _, id := range l.nodes {
		if n, ok := p.nodes[id]; ok && n.link == l.spec.LinkID {
			n.link = ""
		}
	}
	delete(p.links, l.spec.LinkID)
	h.log.Info("link down", "project", p.id, "link", l.spec.LinkID)
}

func (h *Host) link(projectID, linkID string) (*project, *hostLink, error) {
	p, err := h.projectLocked(projectID)
	if err != nil {
		return nil, nil, err
	}
	l, ok := p.links[linkID]
	if !ok {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "link %s does not exist on this agent", linkID)
	}
	return p, l, nil
}

// tap adapts a capture file to the relay's Tap.
type tap struct{ f *captures.File }

func (t tap) WritePacket(dir bridge.Direction, frame []byte) {
	t.f.WritePacket(captures.Direction(dir), frame)
}

// StartCapture starts writing the frames a link forwards to a file in the
// project's captures folder. Asking again for the running capture returns
// it unchanged; asking for another one while it runs is a conflict.
func (h *Host) StartCapture(projectID, linkID string, spec proto.CaptureSpec) (proto.CaptureState, error) {
	if spec.Format == "" {
		spec.Format = proto.FormatPcap
	}
	if spec.Format != proto.FormatPcap {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInvalid, "capture format %q is not supported", spec.Format)
	}
	if !captures.ValidFileName(spec.FileName) {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInvalid, "capture file name %q is not a plain file name", spec.FileName)
	}
	lt, err := captures.LinkType(spec.DataLinkType)
	if err != nil {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, l, err := h.link(projectID, linkID)
	if err != nil {
		return proto.CaptureState{}, err
	}
	if c := l.capture; c != nil && !c.done {
		if c.spec == spec {
			return captureState(c), nil
		}
		return proto.CaptureState{}, proto.Errorf(proto.CodeConflict, "Packet capture is already active on this link")
	}
	root, err := p.capturesRootLocked()
	if err != nil {
		return proto.CaptureState{}, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	f, err := captures.Create(root, spec.FileName, captures.Options{LinkType: lt})
	if err != nil {
		return proto.CaptureState{}, proto.Errorf(proto.CodeConflict, "%v", err)
	}
	c := &hostCapture{spec: spec, file: f}
	l.capture = c
	l.relay.SetTap(tap{f})
	h.wg.Go(func() { h.watchCapture(projectID, l, c) })
	h.log.Info("capture started", "project", projectID, "link", linkID, "file", f.Path())
	return captureState(c), nil
}

// watchCapture notices a capture that ends by itself (a failed write) and
// detaches it from the relay.
func (h *Host) watchCapture(projectID string, l *hostLink, c *hostCapture) {
	<-c.file.Done()
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.done {
		return // stopped on request
	}
	c.done = true
	if l.capture == c {
		l.relay.SetTap(nil)
	}
	h.log.Error("capture ended by itself", "project", projectID, "link", l.spec.LinkID, "err", c.file.Err())
}

// capturesRootLocked opens the project's captures folder, creating it.
// h.mu must be held.
func (p *project) capturesRootLocked() (*os.Root, error) {
	if p.captures != nil {
		return p.captures, nil
	}
	dir := filepath.Join(p.dir, "project-files", "captures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("captures folder: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("captures folder: %w", err)
	}
	p.captures = root
	return root, nil
}

// StopCapture stops a link's capture and returns its final state. The file
// keeps every record written. Stopping a link that is not capturing
// succeeds.
func (h *Host) StopCapture(projectID, linkID string) (proto.CaptureState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, l, err := h.link(projectID, linkID)
	if err != nil {
		return proto.CaptureState{}, err
	}
	h.stopCaptureLocked(l)
	if l.capture == nil {
		return proto.CaptureState{}, nil
	}
	return captureState(l.capture), nil
}

func (h *Host) stopCaptureLocked(l *hostLink) {
	c := l.capture
	if c == nil || c.done {
		return
	}
	l.relay.SetTap(nil)
	c.done = true
	c.file.Close() // waits for a write in progress, then every later one is ignored
	frames, _, _ := c.file.Stats()
	h.log.Info("capture stopped", "link", l.spec.LinkID, "file", c.file.Path(), "frames", frames)
}

// Capture returns a link's capture state.
func (h *Host) Capture(projectID, linkID string) (proto.CaptureState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, l, err := h.link(projectID, linkID)
	if err != nil {
		return proto.CaptureState{}, err
	}
	if l.capture == nil {
		return proto.CaptureState{}, nil
	}
	return captureState(l.capture), nil
}

// CaptureFile returns a link's running capture, for streaming.
func (h *Host) CaptureFile(projectID, linkID string) (*captures.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, l, err := h.link(projectID, linkID)
	if err != nil {
		return nil, err
	}
	if l.capture == nil || l.capture.done {
		return nil, proto.Errorf(proto.CodeConflict, "Nothing to stream because there is no packet capture active")
	}
	return l.capture.file, nil
}

func captureState(c *hostCapture) proto.CaptureState {
	frames, size, dropped := c.file.Stats()
	st := proto.CaptureState{
		Active:   !c.done,
		FilePath: c.file.Path(),
		FileName: c.spec.FileName,
		Frames:   frames,
		Bytes:    uint64(size),
		Dropped:  dropped,
	}
	if err := c.file.Err(); err != nil {
		st.Err = err.Error()
	}
	return st
}
