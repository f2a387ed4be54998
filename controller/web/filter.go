package web

import (
	"fmt"
	"strings"

	"github.com/google/gopacket/layers"
	"github.com/labtap/labtap/agent/pcapfilter"
	"golang.org/x/net/bpf"
)

// Bounds of a display filter.
const (
	maxFilterLen   = 1024
	maxFilterInsns = 4096
)

// filter is a compiled display filter: a protocol match on the decoded
// rows, or a BPF program run on the raw frames. The zero filter passes all.
type filter struct {
	proto  string // a Row.Protocol or a layer of Row.Layers to find
	negate bool
	vm     *bpf.VM
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

// compileFilter compiles expr: "" passes everything; a protocol name
// (optionally after "!" or "not "), a protocol match; anything else, a
// tcpdump expression compiled with libpcap for link type lt.
func compileFilter(expr string, lt layers.LinkType) (*filter, error) {
	expr = strings.TrimSpace(expr)
	if len(expr) > maxFilterLen {
		return nil, fmt.Errorf("the filter is longer than %d characters", maxFilterLen)
	}
	if expr == "" {
		return &filter{}, nil
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
	prog, err := pcapfilter.Compile(lt, expr)
	if err != nil {
		return nil, err
	}
	if len(prog) > maxFilterInsns {
		return nil, fmt.Errorf("filter %q compiles to %d instructions, over %d", expr, len(prog), maxFilterInsns)
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
