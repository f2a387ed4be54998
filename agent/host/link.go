package host

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/pcapfilter"
	"github.com/labtap/labtap/proto"
	"golang.org/x/net/bpf"
)

type hostLink struct {
	spec    proto.LinkSpec
	relay   *bridge.Link
	ends    [2]*nodePort      // the node ports the link uses; nil for a tunnel end
	tunnels []*bridge.UDPPort // tunnel ends the link opened and closes
	bpf     compiledBPF       // the programs of the filters in use
}

// compiledBPF remembers what a link's bpf filter compiled to, so that a PUT
// that does not change it (a suspend, another filter) does not compile again.
type compiledBPF struct {
	linkType string
	exprs    []string
	progs    [][]bpf.RawInstruction
}

// compileBPF compiles the link's bpf filter expressions for its data link
// type, reusing the previous programs when neither changed and programs
// compiled before (a Filters.Check, another link). An expression libpcap
// refuses is an invalid request, with libpcap's message; one over the
// budget (Config.FilterDeadline, pcapfilter.MaxInstructions) is "Filter
// bpf: too complex".
func (f *Filters) compileBPF(spec proto.LinkSpec, prev compiledBPF) (compiledBPF, error) {
	out := compiledBPF{linkType: spec.DataLinkType, exprs: pcapfilter.Lines(spec.Filters.BPF)}
	if len(out.exprs) == 0 {
		return out, nil
	}
	if out.linkType == prev.linkType && slices.Equal(out.exprs, prev.exprs) {
		out.progs = prev.progs
		return out, nil
	}
	lt, err := captures.LinkType(spec.DataLinkType)
	if err != nil {
		return out, proto.Errorf(proto.CodeInvalid, "link %s: %v", spec.LinkID, err)
	}
	out.progs, err = f.cache.compile(f.ctx, lt, spec.DataLinkType, out.exprs, f.deadline)
	if errors.Is(err, pcapfilter.ErrTooComplex) {
		f.log.Warn("bpf filter over budget", "link", spec.LinkID, "err", err)
		return out, proto.Errorf(proto.CodeInvalid, "Filter bpf: too complex")
	}
	if err != nil {
		return out, proto.Errorf(proto.CodeInvalid, "bpf filter: %v", err)
	}
	return out, nil
}

// Check compiles bpf filter expressions for a data link type, as
// PutLink would, and keeps the programs for it: the controller checks a
// filter this way before it takes its project's lock, so the PutLink that
// follows does not compile.
func (f *Filters) Check(dataLinkType string, bpfs []string) error {
	if dataLinkType == "" {
		dataLinkType = capspec.DefaultDataLinkType
	}
	_, err := f.compileBPF(proto.LinkSpec{LinkID: "check", DataLinkType: dataLinkType, Filters: proto.Filters{BPF: bpfs}}, compiledBPF{})
	return err
}

// Filters compiles the bpf expressions of link and capture
// filters, in a killable child within Config.FilterDeadline, and keeps the
// programs compiled lately. It is safe for concurrent use; its cache has
// its own lock, never held while compiling.
type Filters struct {
	ctx      context.Context // the host's lifetime: compiling ends with it
	deadline time.Duration   // Config.FilterDeadline
	log      *slog.Logger
	cache    bpfCache
}

// bpfCache keeps programs compiled lately, by data link type and
// expression. It is safe for concurrent use.
type bpfCache struct {
	mu    sync.Mutex
	progs map[string][]bpf.RawInstruction
}

// bpfCacheSize bounds the cache; past it, it starts again empty.
const bpfCacheSize = 256

func (c *bpfCache) compile(ctx context.Context, lt layers.LinkType, dlt string, exprs []string, deadline time.Duration) ([][]bpf.RawInstruction, error) {
	out := make([][]bpf.RawInstruction, len(exprs))
	var missing []string
	c.mu.Lock()
	for i, e := range exprs {
		if p, ok := c.progs[dlt+"\x00"+e]; ok {
			out[i] = p
		} else {
			missing = append(missing, e)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	progs, err := pcapfilter.CompileAll(ctx, lt, missing, deadline)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progs == nil || len(c.progs)+len(missing) > bpfCacheSize {
		c.progs = make(map[string][]bpf.RawInstruction)
	}
	j := 0
	for i, e := range exprs {
		if out[i] == nil {
			out[i] = progs[j]
			c.progs[dlt+"\x00"+e] = progs[j]
			j++
		}
	}
	return out, nil
}

// newFilters builds a link's filter chain from its spec. The controller has
// validated the values already; the relay checks them again and refuses
// anything out of range.
func newFilters(spec proto.LinkSpec, progs [][]bpf.RawInstruction) (*bridge.Filters, error) {
	f := spec.Filters
	cfg := bridge.FilterConfig{Suspend: spec.Suspend, BPF: progs}
	if f.FrequencyDrop != nil {
		cfg.FrequencyDrop = *f.FrequencyDrop
	}
	if f.PacketLoss != nil {
		cfg.PacketLoss = *f.PacketLoss
	}
	if f.Corrupt != nil {
		cfg.Corrupt = *f.Corrupt
	}
	if f.Delay != nil {
		cfg.Latency, cfg.Jitter = f.Delay.Latency, f.Delay.Jitter
	}
	if !cfg.Suspend && len(cfg.BPF) == 0 && cfg.FrequencyDrop == 0 && cfg.PacketLoss == 0 &&
		cfg.Corrupt == 0 && cfg.Latency == 0 && cfg.Jitter == 0 {
		return nil, nil // nothing to apply: the relay's fast path
	}
	filters, err := bridge.NewFilters(cfg)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInvalid, "link %s filters: %v", spec.LinkID, err)
	}
	return filters, nil
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

// putLink creates a link's relay, or updates the filters and suspend state
// of an existing one. The new filter chain is checked and built completely
// (BPF expressions compiled) before it replaces the old one, in one step; a
// bad filter changes nothing. A link's endpoints cannot change: a spec with
// other endpoints for an existing link is a conflict.
func (p *project) putLink(spec proto.LinkSpec) error {
	if spec.DataLinkType == "" {
		spec.DataLinkType = capspec.DefaultDataLinkType
	}
	var cached compiledBPF
	exists := false
	if err := p.lock(); err == nil {
		if l, ok := p.links[spec.LinkID]; ok {
			cached, exists = l.bpf, true
		}
		p.mu.Unlock()
	}
	progs, filters, peers, err := p.ag.prepareLink(spec, cached, exists)
	if err != nil {
		return err
	}
	if err := p.lock(); err != nil {
		return err
	}
	if l, ok := p.links[spec.LinkID]; ok {
		defer p.mu.Unlock()
		if !sameEnds(l.spec, spec) {
			return proto.Errorf(proto.CodeConflict, "link %s exists with other endpoints", spec.LinkID)
		}
		l.spec, l.bpf = spec, progs
		l.relay.SetFilters(filters)
		for _, np := range l.ends {
			if np != nil {
				np.carrier.request(!spec.Suspend)
			}
		}
		return nil
	}
	if exists {
		// Deleted since it was looked at: made anew, its tunnel hosts
		// resolved first.
		p.mu.Unlock()
		return p.putLink(spec)
	}
	defer p.mu.Unlock()
	l := &hostLink{spec: spec, bpf: progs}
	ends, err := p.endsLocked(l, peers)
	if err != nil {
		for _, t := range l.tunnels {
			t.Close()
		}
		return err
	}
	for _, np := range l.ends {
		if np != nil {
			np.link = spec.LinkID
			np.carrier.request(!spec.Suspend)
		}
	}
	for _, t := range l.tunnels {
		p.ag.relay.goServe(t)
	}
	l.relay = bridge.NewLink(ends[0], ends[1], filters)
	p.links[spec.LinkID] = l
	p.ag.log.Info("link up", "project", p.id, "link", spec.LinkID)
	return nil
}

// prepareLink does what a link PUT does before it takes the project's
// lock: compiling its filters (which may take a while; cached is what the
// link has, when it exists) and, for a new link, resolving its tunnel
// hosts (a DNS lookup). spec.DataLinkType must be set.
func (ag *agentParts) prepareLink(spec proto.LinkSpec, cached compiledBPF, exists bool) (compiledBPF, *bridge.Filters, [2]netip.AddrPort, error) {
	var peers [2]netip.AddrPort
	progs, err := ag.filters.compileBPF(spec, cached)
	if err != nil {
		return progs, nil, peers, err
	}
	filters, err := newFilters(spec, progs.progs)
	if err != nil {
		return progs, nil, peers, err
	}
	if !exists {
		if peers, err = ag.tunnelPeers(spec); err != nil {
			return progs, nil, peers, err
		}
	}
	return progs, filters, peers, nil
}

// endsLocked returns the two ports a new link joins; peers are its tunnel
// ends' remote ends, resolved (tunnelPeers). p.mu must be held.
func (p *project) endsLocked(l *hostLink, peers [2]netip.AddrPort) ([2]bridge.Port, error) {
	var ends [2]bridge.Port
	for i, ep := range []proto.Endpoint{l.spec.A, l.spec.B} {
		port, np, err := p.endPortLocked(l, ep, peers[i])
		if err != nil {
			return ends, err
		}
		ends[i], l.ends[i] = port, np
	}
	if l.ends[0] != nil && l.ends[0] == l.ends[1] {
		return ends, proto.Errorf(proto.CodeConflict, "link %s connects port %d/%d of node %s to itself",
			l.spec.LinkID, l.spec.A.Adapter, l.spec.A.Port, l.spec.A.NodeID)
	}
	return ends, nil
}

// endPortLocked returns the port of one endpoint: a node's port, which must
// be free, or a new tunnel end owned by l, facing peer. p.mu must be held.
func (p *project) endPortLocked(l *hostLink, ep proto.Endpoint, peer netip.AddrPort) (bridge.Port, *nodePort, error) {
	if ep.Tunnel != nil {
		t, err := p.tunnelEndLocked(*ep.Tunnel, peer)
		if err != nil {
			return nil, nil, err
		}
		l.tunnels = append(l.tunnels, t)
		return t, nil, nil
	}
	n, ok := p.nodes[ep.NodeID]
	if !ok {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "node %s does not exist on this agent", ep.NodeID)
	}
	i := n.portIndex(ep.Adapter, ep.Port)
	if i < 0 {
		return nil, nil, proto.Errorf(proto.CodeNotFound, "node %s has no port %d/%d", ep.NodeID, ep.Adapter, ep.Port)
	}
	np := n.ports[i]
	if np.link != "" {
		return nil, nil, proto.Errorf(proto.CodeConflict, "port %d/%d of node %s is already used by link %s", ep.Adapter, ep.Port, ep.NodeID, np.link)
	}
	return np.port, np, nil
}

// tunnelEndLocked returns a tunnel end: the socket reserved on its local
// port, now facing peer (the remote end, resolved), or a new one. p.mu must
// be held.
func (p *project) tunnelEndLocked(t proto.Tunnel, peer netip.AddrPort) (*bridge.UDPPort, error) {
	if t.LocalPort > 0 {
		if port := p.takeReservationLocked(t.LocalPort, peer); port != nil {
			return port, nil
		}
	}
	return p.ag.relay.openTunnel(t.LocalPort, peer)
}

// link returns the state of a link's relay: its counters and its ends.
func (p *project) link(linkID string) (proto.LinkState, error) {
	l, err := p.lockLink(linkID)
	if err != nil {
		return proto.LinkState{}, err
	}
	defer p.mu.Unlock()
	st := proto.LinkState{LinkID: linkID}
	for i, d := range l.relay.Stats() {
		st.Directions[i] = proto.LinkCounters{
			Received: d.Received, Forwarded: d.Forwarded, Filtered: d.Filtered,
			Delayed: d.Delayed, DelayDrops: d.DelayDrops, SendErrors: d.SendErrors,
		}
	}
	for i, port := range l.relay.Ends() {
		u, ok := port.(*bridge.UDPPort)
		if !ok {
			st.Ends[i] = proto.LinkEnd{Kind: "internal"}
			continue
		}
		ps := u.Stats()
		st.Ends[i] = proto.LinkEnd{
			Kind: "udp", LocalPort: int(u.LocalAddr().Port()),
			RecvBuffer: ps.RecvBuffer, SendBuffer: ps.SendBuffer, GSO: ps.GSO,
			GRO: ps.GRO, GRORuns: ps.GRORuns,
			Strays: ps.Strays, RxErrors: ps.RxErrors, TxErrors: ps.TxErrors,
		}
	}
	return st, nil
}

// deleteLink stops a link's relay and capture (the capture file stays
// valid) and closes its tunnels. Deleting an unknown link does nothing.
func (p *project) deleteLink(linkID string) error {
	err := p.lock()
	if err != nil {
		return err
	}
	var c *hostCapture
	if l, ok := p.links[linkID]; ok {
		c = p.removeLinkLocked(l)
	}
	p.mu.Unlock()
	if c != nil {
		p.ag.captures.closeCapture(p, c)
	}
	return nil
}

// removeLinkLocked tears a link down and returns its capture, if it was
// capturing, for the caller to close with closeCapture once p.mu is
// released. p.mu must be held.
func (p *project) removeLinkLocked(l *hostLink) *hostCapture {
	l.relay.Close()
	c := p.ag.captures.detachCapture(p, l)
	for _, t := range l.tunnels {
		t.Close()
	}
	for _, np := range l.ends {
		if np != nil && np.link == l.spec.LinkID {
			np.link = ""
			np.carrier.request(false)
		}
	}
	delete(p.links, l.spec.LinkID)
	p.ag.log.Info("link down", "project", p.id, "link", l.spec.LinkID)
	return c
}

// tunnelPeers checks a link's endpoints and resolves the remote ends of
// its tunnel ends (zero for a node's port). It may look a host name up:
// no lock may be held.
func (ag *agentParts) tunnelPeers(spec proto.LinkSpec) ([2]netip.AddrPort, error) {
	var peers [2]netip.AddrPort
	for i, ep := range []proto.Endpoint{spec.A, spec.B} {
		if ep.Tunnel == nil {
			continue
		}
		if ep.NodeID != "" {
			return peers, proto.Errorf(proto.CodeInvalid, "an endpoint is a node port or a tunnel, not both")
		}
		peer, err := ag.tunnelPeer(*ep.Tunnel)
		if err != nil {
			return peers, err
		}
		peers[i] = peer
	}
	return peers, nil
}

// tunnelPeer resolves the remote end of a tunnel. It may look a host name
// up: no lock may be held.
func (ag *agentParts) tunnelPeer(t proto.Tunnel) (netip.AddrPort, error) {
	if t.LocalPort < 0 || t.LocalPort > 65535 || t.RemotePort <= 0 || t.RemotePort > 65535 {
		return netip.AddrPort{}, proto.Errorf(proto.CodeInvalid, "tunnel ports out of range: %d -> %d", t.LocalPort, t.RemotePort)
	}
	addr, err := netip.ParseAddr(t.RemoteHost)
	if err != nil {
		if ag.hooks.resolving != nil {
			ag.hooks.resolving()
		}
		ips, lerr := net.DefaultResolver.LookupNetIP(context.Background(), "ip", t.RemoteHost)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, proto.Errorf(proto.CodeInvalid, "tunnel remote host %q: %v", t.RemoteHost, lerr)
		}
		addr = ips[0]
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(t.RemotePort)), nil
}
