package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/pcapfilter"
)

// frames returns an ARP request and an ICMP echo request, as VPCS sends
// them.
func frames(t testing.TB) [][]byte {
	t.Helper()
	a, b := net.HardwareAddr{0, 0x50, 0x79, 0x66, 0x68, 0}, net.HardwareAddr{0, 0x50, 0x79, 0x66, 0x68, 1}
	ser := func(ls ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	arp := ser(&layers.Ethernet{SrcMAC: a, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: a, SourceProtAddress: []byte{10, 0, 0, 1},
			DstHwAddress: make([]byte, 6), DstProtAddress: []byte{10, 0, 0, 2}})
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	icmp := ser(&layers.Ethernet{SrcMAC: a, DstMAC: b, EthernetType: layers.EthernetTypeIPv4}, ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 0x1234, Seq: 1},
		gopacket.Payload(bytes.Repeat([]byte{7}, 56)))
	return [][]byte{arp, icmp}
}

// feed runs Feed over a capture and returns its events, in order.
func feed(t *testing.T, capture []byte, filter string) (events []string, rows []Row) {
	t.Helper()
	var out bytes.Buffer
	err := New(Config{}).Feed(t.Context(), io.NopCloser(bytes.NewReader(capture)), filter, &out, func() error { return nil })
	if err != nil {
		t.Fatalf("Feed: %v", err)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			events = append(events, event)
		case strings.HasPrefix(line, "data: ") && event == "rows":
			var batch []Row
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &batch); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, batch...)
		}
	}
	return events, rows
}

func TestFeedDecodesAPcapIntoWiresharkLikeRows(t *testing.T) {
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	t0 := time.Unix(1700000000, 0)
	for i, f := range frames(t) {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * 1500 * time.Microsecond), CaptureLength: len(f), Length: len(f)}, f)
	}
	events, rows := feed(t, capture.Bytes(), "")
	if strings.Join(events, ",") != "info,rows,end" || len(rows) != 2 {
		t.Fatalf("events %v, %d rows", events, len(rows))
	}
	arp, icmp := rows[0], rows[1]
	if arp.No != 1 || arp.Protocol != "ARP" || arp.Info != "Who has 10.0.0.2? Tell 10.0.0.1" || arp.Dest != "ff:ff:ff:ff:ff:ff" {
		t.Errorf("ARP row: %+v", arp)
	}
	if icmp.No != 2 || icmp.Time != 0.0015 || icmp.Source != "10.0.0.1" || icmp.Dest != "10.0.0.2" || icmp.Protocol != "ICMP" ||
		icmp.Length != 98 || icmp.Info != "Echo (ping) request  id=0x1234, seq=1/256, ttl=64" {
		t.Errorf("ICMP row: %+v", icmp)
	}
	if len(icmp.Layers) != 4 || icmp.Layers[3].Name != "Data" || icmp.Hex[:12] != "005079666801" {
		t.Errorf("ICMP tree and bytes: %+v %s", icmp.Layers, icmp.Hex)
	}
	// Filters keep the frames' numbers.
	for _, f := range []string{"icmp", "!arp", "icmp[icmptype] == icmp-echo", "ip host 10.0.0.2"} {
		if _, rows := feed(t, capture.Bytes(), f); len(rows) != 1 || rows[0].No != 2 {
			t.Errorf("filter %q: %+v", f, rows)
		}
	}
	if _, rows := feed(t, capture.Bytes(), "arp"); len(rows) != 1 || rows[0].No != 1 {
		t.Errorf("filter arp: %+v", rows)
	}
}

func TestFeedNamesTheSenderOfEachFrameOfAPcapng(t *testing.T) {
	var capture bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&capture, pcapgo.NgInterface{Name: "PC1 Ethernet0", LinkType: layers.LinkTypeEthernet, SnapLength: 65535}, pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := w.AddInterface(pcapgo.NgInterface{Name: "PC2 Ethernet0", LinkType: layers.LinkTypeEthernet, SnapLength: 65535})
	for i, f := range frames(t) {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(f), Length: len(f), InterfaceIndex: i * second}, f)
	}
	w.Flush()
	_, rows := feed(t, capture.Bytes(), "")
	if len(rows) != 2 || rows[0].Iface != "PC1 Ethernet0" || rows[1].Iface != "PC2 Ethernet0" {
		t.Fatalf("rows %+v", rows)
	}
}

func TestCheckFilterRefusesWhatLibpcapRefusesAndTooLongFilters(t *testing.T) {
	v := New(Config{})
	for _, ok := range []string{"", "icmp", "not arp", "DNS", "tcp port 80 and host 10.0.0.1"} {
		if err := v.CheckFilter(t.Context(), ok); err != nil {
			t.Errorf("CheckFilter(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"icmp[[", "tcp port nope", strings.Repeat("x", capspec.MaxFilterLen+1)} {
		if err := v.CheckFilter(t.Context(), bad); err == nil {
			t.Errorf("CheckFilter(%q) accepted", bad)
		}
	}
	// libpcap's own message.
	if err := v.CheckFilter(t.Context(), "tcp port nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a bad port: %v, want libpcap's message", err)
	}
}

// orOf joins n terms made by term with "or".
func orOf(n int, term func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = term(i)
	}
	return strings.Join(parts, " or ")
}

func TestADisplayFilterOverLinkFiltersBudgetIsTooComplex(t *testing.T) {
	// Over 4,096 instructions, within the length bound: 190 terms of
	// about 35 instructions each.
	long := orOf(190, func(i int) string { return fmt.Sprintf("ip6 protochain %d", i%200+1) })
	// Over the deadline: libpcap's optimiser takes about 2 s (unloaded)
	// on 220 host terms; the deadline here is a tenth of that.
	slow := orOf(220, func(i int) string { return fmt.Sprintf("host 10.0.%d.1", i) })
	if len(long) > capspec.MaxFilterLen || len(slow) > capspec.MaxFilterLen {
		t.Fatalf("the filters are %d and %d characters long", len(long), len(slow))
	}
	// The long filter is over the instruction bound whatever the deadline;
	// the slow one is over a deadline a tenth of its compile time (a loaded
	// machine only makes it slower).
	patient, hasty := New(Config{FilterDeadline: time.Minute}), New(Config{FilterDeadline: 200 * time.Millisecond})
	for name, c := range map[string]struct {
		v    *View
		expr string
	}{"long": {patient, long}, "slow": {hasty, slow}} {
		v, expr := c.v, c.expr
		err := v.CheckFilter(t.Context(), expr)
		if !errors.Is(err, pcapfilter.ErrTooComplex) || err.Error() != "too complex" {
			t.Errorf("the %s filter: %v, want too complex", name, err)
		}
		// The feed refuses it the same way, and says why.
		var out bytes.Buffer
		if err := v.Feed(t.Context(), io.NopCloser(bytes.NewReader(pcapHeader(t))), expr, &out, func() error { return nil }); !errors.Is(err, pcapfilter.ErrTooComplex) || !strings.Contains(out.String(), "too complex") {
			t.Errorf("Feed with the %s filter: %v, %q", name, err, out.String())
		}
	}
	// Within the budget, a filter of many terms is fine.
	if err := patient.CheckFilter(t.Context(), orOf(20, func(i int) string { return fmt.Sprintf("tcp port %d", i+1) })); err != nil {
		t.Errorf("20 port terms: %v", err)
	}
}

// pcapHeader is an empty pcap capture of Ethernet.
func pcapHeader(t *testing.T) []byte {
	var b bytes.Buffer
	if err := pcapgo.NewWriter(&b).WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
