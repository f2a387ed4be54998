package proto

import (
	"fmt"
	"net"
)

// AdapterMACs returns the MAC addresses of adapters 0 to count-1 of a node,
// as GNS3 derives them: base plus n as a 48-bit integer. An empty
// base is the node type's default, derived from the node id: docker
// 02:42:<id[2:8]>:00 and qemu 0c:<id[2:8]>:00:00, GNS3's schemes. A base
// whose last adapter would overflow 48 bits is refused, as is a type with
// no default when base is empty. The controller (for the ports it shows)
// and the agent (for the real NICs) both use it, so they always agree.
func AdapterMACs(nodeType, nodeID, base string, count int) ([]string, error) {
	if count < 0 {
		return nil, fmt.Errorf("adapter count %d is negative", count)
	}
	if base == "" {
		if len(nodeID) < 8 {
			return nil, fmt.Errorf("node id %q is too short for a MAC address", nodeID)
		}
		id := nodeID[2:8]
		switch nodeType {
		case "docker":
			base = "02:42:" + id[0:2] + ":" + id[2:4] + ":" + id[4:6] + ":00"
		case "qemu":
			base = "0c:" + id[0:2] + ":" + id[2:4] + ":" + id[4:6] + ":00:00"
		default:
			return nil, fmt.Errorf("node type %s has no default MAC address", nodeType)
		}
	}
	hw, err := net.ParseMAC(base)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("invalid MAC address %q", base)
	}
	var v uint64
	for _, b := range hw {
		v = v<<8 | uint64(b)
	}
	if count > 0 && v+uint64(count-1) > 1<<48-1 {
		return nil, fmt.Errorf("MAC address %s plus %d adapters overflows 48 bits", base, count)
	}
	out := make([]string, count)
	for n := range count {
		x := v + uint64(n)
		out[n] = fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", byte(x>>40), byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return out, nil
}
