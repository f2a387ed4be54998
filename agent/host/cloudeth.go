package host

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/proto"
)

// AllowUplinkFlag is the agent flag that lets a cloud take the agent's
// own uplink; refusals name it.
const AllowUplinkFlag = "--cloud-allow-uplink"

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}

// ifaceClaims are the host interfaces clouds' ethernet ports hold, across
// every project: one port per interface.
type ifaceClaims struct {
	mu   sync.Mutex     // guards held
	held map[int]string // ifindex → holder
}

// claim records owner as the holder of interface ifindex and returns
// "", or returns who holds it already.
func (c *ifaceClaims) claim(ifindex int, owner string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, ok := c.held[ifindex]; ok {
		return held
	}
	if c.held == nil {
		c.held = map[int]string{}
	}
	c.held[ifindex] = owner
	return ""
}

// release forgets owner's hold on interface ifindex.
func (c *ifaceClaims) release(ifindex int, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[ifindex] == owner {
		delete(c.held, ifindex)
	}
}

// openCloudEthernet opens a cloud's ethernet port: an AF_PACKET socket on
// the host interface pm.Interface, promiscuous, that does not read back
// what it sends. It refuses a name that is no interface here (404), the
// loopback (400), a docker node's veth or an interface another cloud port
// holds (409), and the agent's uplink unless Config.CloudAllowUplink
// (409). release gives the interface back; call it after closing the port.
func (ag *agentParts) openCloudEthernet(nodeID string, i int, pm proto.PortMapping) (port *bridge.PacketPort, release func(), err error) {
	name := pm.Interface
	what := fmt.Sprintf("cloud port %d (%.64s)", i, pm.Name) // names are the client's: bounded in messages
	if name == "" || len(name) > proto.MaxInterfaceName {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%s: interface must name a host interface (1 to %d bytes)", what, proto.MaxInterfaceName)
	}
	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInternal, "%s: netlink: %v", what, err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(name)
	if err != nil {
		if _, ok := err.(netlink.LinkNotFoundError); ok {
			return nil, nil, proto.Errorf(proto.CodeNotFound, "%s: interface %q is not an interface of this host", what, name)
		}
		return nil, nil, proto.Errorf(proto.CodeInternal, "%s: look up interface %q: %v", what, name, err)
	}
	a := link.Attrs()
	switch {
	case a.Flags&net.FlagLoopback != 0:
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%s: interface %q is the loopback, which carries no Ethernet frames", what, name)
	case nodeVeth.MatchString(name):
		return nil, nil, proto.Errorf(proto.CodeConflict, "%s: interface %q is a docker node's adapter; link the node instead", what, name)
	}
	if !ag.cfg.CloudAllowUplink {
		why, err := ag.uplink(nl, link)
		if err != nil {
			return nil, nil, proto.Errorf(proto.CodeInternal, "%s: %v", what, err)
		}
		if why != "" {
			return nil, nil, proto.Errorf(proto.CodeConflict, "%s: interface %q is this agent's uplink (%s): bridging a lab onto it can cut the agent off and leak lab traffic; start the agent with %s (LABTAP_CLOUD_ALLOW_UPLINK=true) to allow it", what, name, why, AllowUplinkFlag)
		}
	}
	owner := "node " + nodeID + " " + what
	if held := ag.ifaces.claim(a.Index, owner); held != "" {
		return nil, nil, proto.Errorf(proto.CodeConflict, "%s: interface %q is already used by %s", what, name, held)
	}
	release = func() { ag.ifaces.release(a.Index, owner) }
	port = bridge.NewPacketPort(ag.cfg.SocketBuffer)
	if err := port.AttachPromiscuous(a.Index); err != nil {
		port.Close()
		release()
		return nil, nil, proto.Errorf(proto.CodeConflict, "%s on interface %q: %v", what, name, err)
	}
	return port, release, nil
}

// uplink says why link is the agent's uplink, "" when it is not: it holds
// a default route, or an address the agent listens or is reached at.
func (ag *agentParts) uplink(nl *netlink.Handle, link netlink.Link) (string, error) {
	idx := link.Attrs().Index
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := nl.RouteListFiltered(family, &netlink.Route{Table: 0}, 0)
		if err != nil {
			return "", fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			if (r.Dst == nil || isDefault(r.Dst)) && (r.LinkIndex == idx || slices.ContainsFunc(r.MultiPath, func(n *netlink.NexthopInfo) bool { return n.LinkIndex == idx })) {
				return "it holds the default route", nil
			}
		}
	}
	if len(ag.cfg.AgentAddrs) == 0 {
		return "", nil
	}
	addrs, err := nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, ad := range addrs {
		ip, ok := netip.AddrFromSlice(ad.IP)
		if !ok {
			continue
		}
		if slices.Contains(ag.cfg.AgentAddrs, ip.Unmap()) {
			return "it holds " + ip.Unmap().String() + ", the address the agent is reached at", nil
		}
	}
	return "", nil
}
