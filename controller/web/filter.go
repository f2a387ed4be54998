package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/gopacket/layers"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/pcapfilter"
	"golang.org/x/net/bpf"
)

// maxFilterLen bounds a display filter's text, as a capture filter's.
const maxFilterLen = capspec.MaxFilterLen

// filterCacheSize bounds the programs a View keeps; past it, it starts
// again empty.
const filterCacheSize = 256

// filterCache keeps the programs compiled lately, by link type and
// expression: the check of a feed's filter (for Ethernet) and the feed's
// own compile (for its capture's link type) compile once. It is safe for
// concurrent use.
type filterCache struct {
	mu    sync.Mutex
	progs map[string][]bpf.RawInstruction
}

func (c *filterCache) get(key string) ([]bpf.RawInstruction, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.progs[key]
	return p, ok
}

func (c *filterCache) put(key string, prog []bpf.RawInstruction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progs == nil || len(c.progs) >= filterCacheSize {
		c.progs = make(map[string][]bpf.RawInstruction)
	}
	c.progs[key] = prog
}

// filter is a compiled display filter: a protocol match on the decoded
// rows, or a BPF program run on the raw frames. The zero filter passes all.
type filter struct {
	display string // a Wireshark display filter, for tshark's -Y
	proto   string // a Row.Protocol or a layer of Row.Layers to find
	negate  bool
	vm      *bpf.VM
}

// protocols are the names a filter may give alone, and what they match in
// a row: its Protocol column or any layer of its tree, as Wireshark's
// display filter of the same name does.
var protocols = map[string]string{
	"eth": "Ethernet II", "arp": "Address Resolution Protocol", "ip": "Internet Protocol Version 4",
	"ipv6": "Internet Protocol Version 6", "icmp": "Internet Control Message Protocol", "icmpv6": "ICMPv6",
	"tcp": "Transmission Control Protocol", "udp": "User Datagram Protocol", "dns": "Domain Name System",
	"dhcp": "DHCPv4", "vlan": "Dot1Q", "stp": "STP", "lldp": "LinkLayerDiscovery", "cdp": "CiscoDiscovery",
	"igmp": "IGMP", "ospf": "OSPF", "gre": "GRE", "vrrp": "VRRP", "ntp": "NTP", "sctp": "SCTP",
}

// compileFilter compiles expr: "" passes everything; where the View has
// tshark, a display filter tshark takes is tshark's (-Y); a protocol name
// (optionally after "!" or "not "), a protocol match; anything else, a
// tcpdump expression compiled with libpcap for link type lt, with link
// filters' budget (pcapfilter.CompileAll: in a child process killed at the
// View's deadline, at most pcapfilter.MaxInstructions). An expression
// libpcap refuses is an error with libpcap's message; one over the budget
// is "too complex" (matching pcapfilter.ErrTooComplex).
func (v *View) compileFilter(ctx context.Context, expr string, lt layers.LinkType) (*filter, error) {
	expr = strings.TrimSpace(expr)
	if len(expr) > maxFilterLen {
		return nil, fmt.Errorf("the filter is longer than %d characters", maxFilterLen)
	}
	if expr == "" {
		return &filter{}, nil
	}
	if v.tshark != nil {
		// Wireshark's display-filter language first; what it refuses may
		// still be a tcpdump expression (the filters of the view before
		// tshark), else tshark's message says what is wrong.
		refused, err := v.tshark.checkDisplay(ctx, expr)
		switch {
		case err != nil:
			return nil, err
		case refused == "":
			return &filter{display: expr}, nil
		}
		f, err := v.compileBPF(ctx, expr, lt)
		if err != nil {
			if errors.Is(err, pcapfilter.ErrTooComplex) {
				return nil, err
			}
			return nil, errors.New(refused)
		}
		return f, nil
	}
	word, negate := strings.ToLower(expr), false
	if rest, ok := strings.CutPrefix(word, "!"); ok {
		word, negate = strings.TrimSpace(rest), true
	} else if rest, ok := strings.CutPrefix(word, "not "); ok {
		word, negate = strings.TrimSpace(rest), true
	}
	if layer, ok := protocols[word]; ok {
		return &filter{proto: layer, negate: negate}, nil
	}
	return v.compileBPF(ctx, expr, lt)
}

// compileBPF compiles the tcpdump expression expr for link type lt, as
// compileFilter says.
func (v *View) compileBPF(ctx context.Context, expr string, lt layers.LinkType) (*filter, error) {
	key := fmt.Sprint(int(lt), "\x00", expr)
	prog, ok := v.cache.get(key)
	if !ok {
		progs, err := pcapfilter.CompileAll(ctx, lt, []string{expr}, v.deadline)
		if errors.Is(err, pcapfilter.ErrTooComplex) {
			v.log.Warn("display filter over budget", "err", err)
			return nil, pcapfilter.ErrTooComplex // its message says it: "too complex"
		}
		if err != nil {
			return nil, err
		}
		prog = progs[0]
		v.cache.put(key, prog)
	}
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		return nil, fmt.Errorf("filter %q uses instructions the view cannot run", expr)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		return nil, fmt.Errorf("filter %q: %w", expr, err)
	}
	return &filter{vm: vm}, nil
}

// matchRaw runs the BPF program, if any, on a frame.
func (f *filter) matchRaw(data []byte) bool {
	if f.vm == nil {
		return true
	}
	n, err := f.vm.Run(data)
	return err == nil && n > 0
}

// matchRow runs the protocol match, if any, on a decoded row.
func (f *filter) matchRow(r Row) bool {
	if f.proto == "" {
		return true
	}
	found := false
	for _, l := range r.Layers {
		if l.Name == f.proto {
			found = true
			break
		}
	}
	return found != f.negate
}
