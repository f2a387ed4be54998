package bridge

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// tags decodes a frame with gopacket and lists its VLAN tags, outer
// first, as "TPID/VID" ("88a8/100").
func tags(t *testing.T, frame []byte) []string {
	t.Helper()
	// The payload is no IP packet: only the link layers must decode.
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	eth, ok := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		t.Fatalf("frame %x is no Ethernet frame", frame)
	}
	tpid := eth.EthernetType
	var out []string
	for _, l := range pkt.Layers() {
		if q, ok := l.(*layers.Dot1Q); ok {
			out = append(out, fmt.Sprintf("%04x/%d", uint16(tpid), q.VLANIdentifier))
			tpid = q.Type
		}
	}
	return out
}

// qinqFrame is ethFrame with an outer tag of type tpid pushed.
func qinqFrame(dst, src byte, tpid uint16, outer, inner int, payload string) []byte {
	f := ethFrame(dst, src, inner, payload)
	out := slices.Clone(f[:12])
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, uint16(outer))
	return append(out, f[12:]...)
}

// TestAQinQPortTunnelsCustomerVLANsAsGNS3sSwitchDoes: a qinq port (802.1Q
// tunnel) takes customer frames, tagged, into its VLAN; they leave a trunk
// with an outer tag of the port's VLAN and ethertype (0x88a8 here) pushed
// over the customer's own, another tunnel port of that VLAN as they came,
// and no access port; a trunk's frame of that VLAN leaves the tunnel port
// with its outer tag popped. Untagged frames into a tunnel port are
// dropped (Dynamips, which GNS3's switch is, does the same).
func TestAQinQPortTunnelsCustomerVLANsAsGNS3sSwitchDoes(t *testing.T) {
	sw, err := NewSwitch([]SwitchPort{
		{QinQ: true, VLAN: 100, EtherType: 0x88a8}, // 0: customer A
		{Trunk: true, VLAN: 1},                     // 1: provider trunk
		{QinQ: true, VLAN: 100},                    // 2: customer A elsewhere (0x8100 outer tags)
		{VLAN: 100},                                // 3: access port of VLAN 100
		{QinQ: true, VLAN: 200},                    // 4: customer B
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	st := make([]*station, 5)
	for i := range st {
		st[i] = attach(t, sw, i)
	}
	st[0].m.inject(ethFrame(0xff, 1, 10, "customer vlan 10"))
	settle(t, st, []int{0, 1, 1, 0, 0})
	if got := tags(t, last(st[1])); !slices.Equal(got, []string{"88a8/100", "8100/10"}) {
		t.Fatalf("the trunk got tags %v, want an 88a8 outer tag of VLAN 100 over the customer's", got)
	}
	if got := tags(t, last(st[2])); !slices.Equal(got, []string{"8100/10"}) {
		t.Fatalf("the other tunnel port got tags %v, want the customer's frame as it came", got)
	}
	// Back from the trunk to the learned customer address: outer tag popped.
	st[1].m.inject(qinqFrame(1, 9, 0x88a8, 100, 10, "reply"))
	settle(t, st, []int{1, 1, 1, 0, 0})
	if got := tags(t, last(st[0])); !slices.Equal(got, []string{"8100/10"}) {
		t.Fatalf("the customer got tags %v, want its own only", got)
	}
	// An 802.1Q outer tag works too, and VLAN 200 reaches customer B only.
	st[1].m.inject(qinqFrame(0xff, 9, 0x8100, 200, 30, "to B"))
	settle(t, st, []int{1, 1, 1, 0, 1})
	if got := tags(t, last(st[4])); !slices.Equal(got, []string{"8100/30"}) {
		t.Fatalf("customer B got tags %v", got)
	}
	// Untagged into a tunnel port: dropped.
	st[0].m.inject(ethFrame(0xff, 1, 0, "untagged"))
	settle(t, st, []int{1, 1, 1, 0, 1})
	if d := sw.Stats()[0].Drops; d != 1 {
		t.Fatalf("tunnel port drops = %d, want 1", d)
	}
}
