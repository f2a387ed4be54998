package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// needTshark returns a View that decodes with tshark, or skips.
func needTshark(t *testing.T, cfg Config) *View {
	t.Helper()
	if testing.Short() {
		t.Skip("starts tshark")
	}
	p, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("no tshark")
	}
	cfg.Tshark = p
	return New(cfg)
}

// bgpKeepalive is a BGP KEEPALIVE from 10.0.0.1 to 10.0.0.2's port 179.
func bgpKeepalive(t testing.TB) []byte {
	t.Helper()
	a, b := net.HardwareAddr{0, 0x50, 0x79, 0x66, 0x68, 0}, net.HardwareAddr{0, 0x50, 0x79, 0x66, 0x68, 1}
	ip := &layers.IPv4{Version: 4, TTL: 1, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 179, Seq: 1, Ack: 1, ACK: true, PSH: true, Window: 16384}
	tcp.SetNetworkLayerForChecksum(ip)
	msg := append(bytes.Repeat([]byte{0xff}, 16), 0, 19, 4) // marker, length 19, type KEEPALIVE
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: a, DstMAC: b, EthernetType: layers.EthernetTypeIPv4}, ip, tcp, gopacket.Payload(msg)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// threeFrames is a pcap of an ARP request, an ICMP echo request and a BGP
// KEEPALIVE, in this order.
func threeFrames(t *testing.T) []byte {
	t.Helper()
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	for i, f := range append(frames(t), bgpKeepalive(t)) {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f), Length: len(f)}, f); err != nil {
			t.Fatal(err)
		}
	}
	return capture.Bytes()
}

// feedOf runs v's Feed over capture and returns its info and end events
// and its rows.
func feedOf(t *testing.T, v *View, capture io.Reader, filter string) (info map[string]any, end string, rows []Row) {
	t.Helper()
	var out bytes.Buffer
	if err := v.Feed(t.Context(), io.NopCloser(capture), filter, &out, func() error { return nil }); err != nil {
		t.Fatalf("Feed: %v", err)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if e, isEvent := strings.CutPrefix(line, "event: "); isEvent {
			event = e
		}
		if !ok {
			continue
		}
		switch event {
		case "info":
			json.Unmarshal([]byte(data), &info)
		case "end":
			var e map[string]string
			json.Unmarshal([]byte(data), &e)
			end = e["reason"]
		case "rows":
			var batch []Row
			if err := json.Unmarshal([]byte(data), &batch); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, batch...)
		}
	}
	return info, end, rows
}

func numbers(rows []Row) []int {
	var n []int
	for _, r := range rows {
		n = append(n, r.No)
	}
	return n
}

func TestTsharkDecodesBGPWhereGopacketSeesTCP(t *testing.T) {
	v := needTshark(t, Config{})
	info, end, rows := feedOf(t, v, bytes.NewReader(threeFrames(t)), "")
	if info["decoder"] != "tshark" || end != "the capture stopped" || len(rows) != 3 {
		t.Fatalf("info %v, end %q, rows %+v", info, end, rows)
	}
	arp, icmp, bgp := rows[0], rows[1], rows[2]
	if arp.No != 1 || arp.Protocol != "ARP" || arp.Info != "Who has 10.0.0.2? Tell 10.0.0.1" {
		t.Errorf("ARP row: %+v", arp)
	}
	if icmp.No != 2 || icmp.Protocol != "ICMP" || !strings.HasPrefix(icmp.Info, "Echo (ping) request") || icmp.Source != "10.0.0.1" || icmp.Time != 0.001 {
		t.Errorf("ICMP row: %+v", icmp)
	}
	// Wireshark's dissector, where gopacket knows only TCP; the tree and
	// bytes are still there.
	if bgp.No != 3 || bgp.Protocol != "BGP" || !strings.Contains(bgp.Info, "KEEPALIVE") || bgp.Hex == "" || len(bgp.Layers) < 3 {
		t.Errorf("BGP row: %+v", bgp)
	}
}

func TestTsharkTakesWiresharkDisplayFiltersAndStillTcpdumpExpressions(t *testing.T) {
	v := needTshark(t, Config{})
	capture := threeFrames(t)
	for expr, want := range map[string][]int{
		"ip.addr == 10.0.0.2 && tcp.port == 179": {3},
		"bgp.type == 4":                          {3},
		"arp || icmp":                            {1, 2},
		"!arp":                                   {2, 3},
		// Not a display filter, but a tcpdump expression: the view's
		// filters before tshark keep working, frame numbers kept.
		"icmp[icmptype] == icmp-echo": {2},
		"ip host 10.0.0.2 and tcp":    {3},
	} {
		if err := v.CheckFilter(t.Context(), expr); err != nil {
			t.Errorf("CheckFilter(%q): %v", expr, err)
		}
		if _, _, rows := feedOf(t, v, bytes.NewReader(capture), expr); !slices.Equal(numbers(rows), want) {
			t.Errorf("filter %q: frames %v, want %v", expr, numbers(rows), want)
		}
	}
}

func TestTsharkRefusesABadDisplayFilterWithItsOwnMessage(t *testing.T) {
	v := needTshark(t, Config{})
	for expr, msg := range map[string]string{
		"ip.addr == 10.0.0.1 &&": "Unexpected end of filter expression",
		"ip.adr == 10.0.0.1":     `Left side of "==" expression must be a field or function, not ip.adr`,
	} {
		err := v.CheckFilter(t.Context(), expr)
		if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "Running as user") {
			t.Errorf("CheckFilter(%q) = %v, want tshark's %q", expr, err, msg)
		}
	}
}

func TestWithoutTsharkInPathTheViewDecodesWithGopacket(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if p := LookTshark(); p != "" {
		t.Fatalf("LookTshark found %s in an empty PATH", p)
	}
	v := New(Config{Tshark: LookTshark()})
	info, _, rows := feedOf(t, v, bytes.NewReader(threeFrames(t)), "")
	if v.Decoder() != "gopacket" || info["decoder"] != "gopacket" || len(rows) != 3 || rows[2].Protocol != "TCP" {
		t.Fatalf("decoder %s, info %v, rows %+v", v.Decoder(), info, rows)
	}
	// Wireshark's display filters need tshark: libpcap's message.
	if err := v.CheckFilter(t.Context(), "ip.addr == 10.0.0.1"); err == nil {
		t.Error("a display filter accepted without tshark")
	}
}

func TestAFeedReadsAtMostMaxRecords(t *testing.T) {
	for _, decoder := range []string{"gopacket", "tshark"} {
		t.Run(decoder, func(t *testing.T) {
			v := New(Config{MaxRecords: 2})
			if decoder == "tshark" {
				v = needTshark(t, Config{MaxRecords: 2})
			}
			_, end, rows := feedOf(t, v, bytes.NewReader(threeFrames(t)), "")
			if !slices.Equal(numbers(rows), []int{1, 2}) || !strings.Contains(end, "at most 2 records") {
				t.Fatalf("rows %v, end %q", numbers(rows), end)
			}
		})
	}
}

func TestTsharkIsBoundedInTimeAndMemory(t *testing.T) {
	// A live capture that sends nothing: tshark waits on it until its
	// timeout, and the feed says so.
	v := needTshark(t, Config{TsharkTimeout: 2 * time.Second})
	r, w := io.Pipe()
	defer w.Close()
	go w.Write(pcapHeader(t))
	if _, end, _ := feedOf(t, v, r, ""); !strings.Contains(end, "stops after 2s") {
		t.Errorf("end %q, want the timeout", end)
	}
	// Within 16 MiB of address space, tshark cannot even start: the check
	// fails, and the feed ends with tshark's failure.
	v = needTshark(t, Config{TsharkMemory: 16 << 20})
	if err := v.CheckFilter(t.Context(), "ip"); err == nil || !strings.Contains(err.Error(), "tshark failed") {
		t.Errorf("tshark checked a filter in 16 MiB: %v", err)
	}
	if _, end, rows := feedOf(t, v, bytes.NewReader(threeFrames(t)), ""); len(rows) != 0 || end == "the capture stopped" {
		t.Errorf("a feed in 16 MiB: end %q, %d rows", end, len(rows))
	}
}

func TestPendingFramesAreBoundedInCountAndBytes(t *testing.T) {
	var q pendingQueue
	for i := 1; i <= 3*maxPending; i++ {
		q.push(pendingFrame{fed: i, data: make([]byte, 16)})
		if len(q.frames) > maxPending {
			t.Fatalf("%d frames pending", len(q.frames))
		}
	}
	big := make([]byte, 1<<20)
	for i := 1; i <= 100; i++ {
		q.push(pendingFrame{fed: 3*maxPending + i, data: big})
		if q.bytes > maxPendingBytes {
			t.Fatalf("%d bytes pending", q.bytes)
		}
	}
	// The newest are still there; taking one drops those before it.
	last := 3*maxPending + 100
	if f, ok := q.take(last - 1); !ok || f.fed != last-1 || len(q.frames) != 1 || q.bytes != len(big) {
		t.Fatalf("take: %v %d, %d left holding %d bytes", ok, f.fed, len(q.frames), q.bytes)
	}
	if _, ok := q.take(last - 5); ok {
		t.Fatal("took a frame already dropped")
	}
}
