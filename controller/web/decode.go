package web

import (
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Row is one packet of the live view, decoded on the server: the columns
// of Wireshark's packet list, plus what the details and bytes panes show.
type Row struct {
	// No is the frame's number in the capture file, from 1, as Wireshark
	// numbers it: a filter hides rows, never renumbers them.
	No int `json:"no"`
	// Time is seconds since the capture's first frame; Abs the frame's
	// timestamp in Unix microseconds.
	Time float64 `json:"time"`
	Abs  int64   `json:"abs"`
	// Iface names who sent the frame, in a pcapng capture ("PC1 Ethernet0").
	Iface    string `json:"iface,omitempty"`
	Source   string `json:"src"`
	Dest     string `json:"dst"`
	Protocol string `json:"proto"`
	Length   int    `json:"len"`
	Info     string `json:"info"`
	// Layers is the protocol tree: one line per decoded layer.
	Layers []Layer `json:"layers"`
	// Hex holds the first maxHex bytes of the frame, hex encoded.
	Hex string `json:"hex"`
}

// Layer is one line of the protocol tree.
type Layer struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// maxHex bounds the bytes of each frame sent for the bytes pane.
const maxHex = 512

// decodeRow decodes one frame into its row.
func decodeRow(no int, first time.Time, ci gopacket.CaptureInfo, data []byte, lt layers.LinkType) Row {
	pkt := gopacket.NewPacket(data, lt, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	r := Row{
		No:     no,
		Time:   ci.Timestamp.Sub(first).Seconds(),
		Abs:    ci.Timestamp.UnixMicro(),
		Length: ci.Length,
		Hex:    hex.EncodeToString(data[:min(len(data), maxHex)]),
	}
	var ttl uint8
	for _, l := range pkt.Layers() {
		name, summary := describe(l)
		r.Layers = append(r.Layers, Layer{Name: name, Summary: summary})
		switch l := l.(type) {
		case *layers.Ethernet:
			r.Source, r.Dest, r.Protocol = l.SrcMAC.String(), l.DstMAC.String(), "Ethernet"
			r.Info = fmt.Sprintf("EtherType 0x%04x", uint16(l.EthernetType))
		case *layers.Dot1Q:
			r.Protocol, r.Info = "802.1Q", fmt.Sprintf("VLAN %d, PRI %d", l.VLANIdentifier, l.Priority)
		case *layers.ARP:
			r.Protocol, r.Info = "ARP", arpInfo(l)
		case *layers.IPv4:
			r.Source, r.Dest, r.Protocol, ttl = l.SrcIP.String(), l.DstIP.String(), "IPv4", l.TTL
			r.Info = fmt.Sprintf("%s, id=0x%04x", l.Protocol, l.Id)
		case *layers.IPv6:
			r.Source, r.Dest, r.Protocol, ttl = l.SrcIP.String(), l.DstIP.String(), "IPv6", l.HopLimit
			r.Info = l.NextHeader.String()
		case *layers.ICMPv4:
			r.Protocol, r.Info = "ICMP", icmpInfo(l, ttl)
		case *layers.ICMPv6:
			r.Protocol, r.Info = "ICMPv6", l.TypeCode.String()
		case *layers.TCP:
			r.Protocol, r.Info = "TCP", tcpInfo(l)
		case *layers.UDP:
			r.Protocol, r.Info = "UDP", fmt.Sprintf("%d → %d Len=%d", l.SrcPort, l.DstPort, max(int(l.Length)-8, 0))
		case *layers.DNS:
			r.Protocol, r.Info = "DNS", dnsInfo(l)
		case *layers.DHCPv4:
			r.Protocol, r.Info = "DHCP", fmt.Sprintf("DHCP %s - Transaction ID 0x%08x", dhcpType(l), l.Xid)
		case *layers.STP:
			r.Protocol, r.Info = "STP", "Spanning Tree BPDU"
		case *layers.LinkLayerDiscovery:
			r.Protocol, r.Info = "LLDP", fmt.Sprintf("Chassis Id = %x Port Id = %s", l.ChassisID.ID, l.PortID.ID)
		case *layers.CiscoDiscovery:
			r.Protocol, r.Info = "CDP", "Cisco Discovery Protocol"
		case *layers.IGMP:
			r.Protocol, r.Info = "IGMP", l.Type.String()
		case *layers.OSPFv2:
			r.Protocol, r.Info = "OSPF", fmt.Sprintf("type %d", l.Type)
		case *layers.VRRPv2:
			r.Protocol, r.Info = "VRRP", fmt.Sprintf("Announcement (v2) VRID %d prio %d", l.VirtualRtrID, l.Priority)
		case *layers.GRE:
			r.Protocol, r.Info = "GRE", l.Protocol.String()
		case *layers.NTP:
			r.Protocol, r.Info = "NTP", fmt.Sprintf("NTP Version %d, mode %d", l.Version, l.Mode)
		}
	}
	if el := pkt.ErrorLayer(); el != nil && r.Protocol == "" {
		r.Protocol, r.Info = "?", "Malformed frame: "+el.Error().Error()
	}
	if r.Protocol == "" {
		r.Protocol = lt.String()
	}
	return r
}

// describe names a layer and sums it up for the protocol tree.
func describe(l gopacket.Layer) (string, string) {
	switch l := l.(type) {
	case *layers.Ethernet:
		return "Ethernet II", fmt.Sprintf("Src: %s, Dst: %s, Type: %s (0x%04x)", l.SrcMAC, l.DstMAC, l.EthernetType, uint16(l.EthernetType))
	case *layers.ARP:
		return "Address Resolution Protocol", fmt.Sprintf("%s, sender %s (%s), target %s (%s)", arpOp(l.Operation),
			net.IP(l.SourceProtAddress), net.HardwareAddr(l.SourceHwAddress), net.IP(l.DstProtAddress), net.HardwareAddr(l.DstHwAddress))
	case *layers.IPv4:
		return "Internet Protocol Version 4", fmt.Sprintf("Src: %s, Dst: %s, TTL: %d, Protocol: %s, Length: %d, ID: 0x%04x",
			l.SrcIP, l.DstIP, l.TTL, l.Protocol, l.Length, l.Id)
	case *layers.IPv6:
		return "Internet Protocol Version 6", fmt.Sprintf("Src: %s, Dst: %s, Hop Limit: %d, Next Header: %s", l.SrcIP, l.DstIP, l.HopLimit, l.NextHeader)
	case *layers.ICMPv4:
		return "Internet Control Message Protocol", fmt.Sprintf("Type/Code: %s, Checksum: 0x%04x, Identifier: 0x%04x, Sequence: %d",
			l.TypeCode, l.Checksum, l.Id, l.Seq)
	case *layers.TCP:
		return "Transmission Control Protocol", fmt.Sprintf("Src Port: %d, Dst Port: %d, Seq: %d, Ack: %d, Flags: %s, Win: %d",
			l.SrcPort, l.DstPort, l.Seq, l.Ack, tcpFlags(l), l.Window)
	case *layers.UDP:
		return "User Datagram Protocol", fmt.Sprintf("Src Port: %d, Dst Port: %d, Length: %d", l.SrcPort, l.DstPort, l.Length)
	case *layers.DNS:
		return "Domain Name System", dnsInfo(l)
	case *gopacket.Payload:
		return "Data", fmt.Sprintf("%d bytes", len(*l))
	}
	return l.LayerType().String(), ""
}

func arpOp(op uint16) string {
	if op == layers.ARPReply {
		return "reply"
	}
	return "request"
}

func arpInfo(a *layers.ARP) string {
	src, dst := net.IP(a.SourceProtAddress), net.IP(a.DstProtAddress)
	switch {
	case a.Operation == layers.ARPReply:
		return fmt.Sprintf("%s is at %s", src, net.HardwareAddr(a.SourceHwAddress))
	case src.Equal(dst):
		return fmt.Sprintf("ARP Announcement for %s", src)
	default:
		return fmt.Sprintf("Who has %s? Tell %s", dst, src)
	}
}

func icmpInfo(l *layers.ICMPv4, ttl uint8) string {
	switch l.TypeCode.Type() {
	case layers.ICMPv4TypeEchoRequest:
		return fmt.Sprintf("Echo (ping) request  id=0x%04x, seq=%d/%d, ttl=%d", l.Id, l.Seq, l.Seq<<8|l.Seq>>8, ttl)
	case layers.ICMPv4TypeEchoReply:
		return fmt.Sprintf("Echo (ping) reply    id=0x%04x, seq=%d/%d, ttl=%d", l.Id, l.Seq, l.Seq<<8|l.Seq>>8, ttl)
	}
	return l.TypeCode.String()
}

func tcpFlags(l *layers.TCP) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{l.FIN, "FIN"}, {l.SYN, "SYN"}, {l.RST, "RST"}, {l.PSH, "PSH"}, {l.ACK, "ACK"}, {l.URG, "URG"}, {l.ECE, "ECE"}, {l.CWR, "CWR"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, ", ")
}

func tcpInfo(l *layers.TCP) string {
	return fmt.Sprintf("%d → %d [%s] Seq=%d Ack=%d Win=%d Len=%d", l.SrcPort, l.DstPort, tcpFlags(l), l.Seq, l.Ack, l.Window, len(l.Payload))
}

func dnsInfo(l *layers.DNS) string {
	var b strings.Builder
	if l.QR {
		fmt.Fprintf(&b, "Standard query response 0x%04x", l.ID)
	} else {
		fmt.Fprintf(&b, "Standard query 0x%04x", l.ID)
	}
	for _, q := range l.Questions {
		fmt.Fprintf(&b, " %s %s", q.Type, q.Name)
	}
	for _, a := range l.Answers {
		switch {
		case a.IP != nil:
			fmt.Fprintf(&b, " %s %s", a.Type, a.IP)
		case len(a.CNAME) > 0:
			fmt.Fprintf(&b, " CNAME %s", a.CNAME)
		}
	}
	return b.String()
}

func dhcpType(l *layers.DHCPv4) string {
	for _, o := range l.Options {
		if o.Type == layers.DHCPOptMessageType && len(o.Data) == 1 {
			return layers.DHCPMsgType(o.Data[0]).String()
		}
	}
	return l.Operation.String()
}
