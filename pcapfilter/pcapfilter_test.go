package pcapfilter

import (
	"strings"
	"testing"

	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"
)

// echo is a VPCS ICMP echo request frame header (Ethernet + IPv4 + ICMP);
// the ICMP type byte is at offset 34.
var echo = []byte{
	0x00, 0x50, 0x79, 0x66, 0x68, 0x02, 0x00, 0x50, 0x79, 0x66, 0x68, 0x01, 0x08, 0x00, // Ethernet
	0x45, 0x00, 0x00, 0x54, 0x00, 0x01, 0x00, 0x00, 0x40, 0x01, 0x00, 0x00, // IPv4 ...
	10, 0, 0, 1, 10, 0, 0, 2,
	0x08, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, // ICMP echo request
}

func run(t *testing.T, prog []bpf.RawInstruction, frame []byte) bool {
	t.Helper()
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("program does not disassemble")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	n, err := vm.Run(frame)
	if err != nil {
		t.Fatal(err)
	}
	return n != 0
}

func TestCompiledProgramsMatchLikeTcpdump(t *testing.T) {
	prog, err := Compile(layers.LinkTypeEthernet, "icmp[icmptype] == 8")
	if err != nil {
		t.Fatal(err)
	}
	reply := append([]byte(nil), echo...)
	reply[34] = 0
	if !run(t, prog, echo) || run(t, prog, reply) {
		t.Fatal("icmp[icmptype] == 8 must match the request and not the reply")
	}
	if p, err := Compile(layers.LinkTypeEthernet, "arp"); err != nil || run(t, p, echo) {
		t.Fatalf("arp matched an IPv4 frame (%v)", err)
	}
}

func TestCompileTakesEveryGNS3LinkType(t *testing.T) {
	for _, lt := range []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeATM_RFC1483,
		layers.LinkTypeFRelay, layers.LinkTypeC_HDLC, layers.LinkTypePPP_HDLC} {
		if _, err := Compile(lt, "ip"); err != nil {
			t.Errorf("link type %d: %v", lt, err)
		}
	}
}

func TestCompileReportsLibpcapsMessage(t *testing.T) {
	_, err := Compile(layers.LinkTypeEthernet, "icmp[icmptype] ==")
	if err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("Compile = %v, want libpcap's syntax error", err)
	}
}

func TestLinesSplitsAndSkipsBlankLines(t *testing.T) {
	got := Lines([]string{"icmp\n\n  arp \n", "", "tcp port 80"})
	if strings.Join(got, "|") != "icmp|arp|tcp port 80" {
		t.Fatalf("Lines = %q", got)
	}
}
