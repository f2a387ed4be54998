// Package pcapfilter compiles tcpdump filter expressions ("icmp[icmptype] ==
// 8") into classic BPF programs with libpcap, the reference compiler of that
// language, through gopacket's pcap package.
//
// This is the agent's only use of libpcap, and so of cgo: it runs once per
// filter change, when a link's bpf filter is set. The programs it returns
// run per frame in pure Go (golang.org/x/net/bpf, in package bridge), so the
// relay itself neither links libpcap nor crosses into C per frame. Keeping
// the compiler in its own package keeps package bridge pure Go: it builds and
// tests without a C toolchain, and only the agent binary needs libpcap-dev
// to build and libpcap0.8 to run.
package pcapfilter

import (
	"fmt"
	"strings"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"golang.org/x/net/bpf"
)

// Snaplen is the snapshot length programs are compiled for, as uBridge
// does; a matching program returns it.
const Snaplen = 65535

// dltATM is libpcap's in-memory DLT_ATM_RFC1483 on Linux and most BSDs. The
// file header of such a capture says LINKTYPE 100, but libpcap does not know
// 100 as a DLT to compile for ("unknown data link type 100").
const dltATM = 11

// Compile compiles one expression for frames of the given link type (the
// LINKTYPE a capture header carries: 1 Ethernet, 100 ATM RFC 1483, 104 Cisco
// HDLC, 107 Frame Relay, 50 PPP in HDLC framing). A syntax error comes back
// with libpcap's own message.
func Compile(lt layers.LinkType, expr string) ([]bpf.RawInstruction, error) {
	dlt := lt
	if lt == layers.LinkTypeATM_RFC1483 {
		dlt = dltATM
	}
	insns, err := pcap.CompileBPFFilter(dlt, Snaplen, expr)
	if err != nil {
		return nil, fmt.Errorf("cannot compile filter %q: %w", expr, err)
	}
	prog := make([]bpf.RawInstruction, len(insns))
	for i, in := range insns {
		prog[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return prog, nil
}

// Lines splits bpf filter texts into expressions: each text may hold several
// lines, each line is one expression (the lines are ORed: a frame matching
// any is dropped), and blank lines are ignored. libpcap compiles an empty
// expression to "accept everything", which would drop every frame; GNS3 is
// spared that only by accident.
func Lines(texts []string) []string {
	var out []string
	for _, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}
