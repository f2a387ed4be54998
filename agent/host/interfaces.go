package host

import (
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/labtap/labtap/proto"
)

// Interfaces lists the network interfaces of the agent's network
// namespace (its host's, unless it runs in a container), sorted by name,
// for the GUI's cloud node dialog.
func (h *Host) Interfaces() ([]proto.HostInterface, error) { return interfaces() }

// interfaces lists the interfaces of the agent's network namespace.
func interfaces() ([]proto.HostInterface, error) {
	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "list interfaces: %v", err)
	}
	defer nl.Close()
	return hostInterfaces(nl)
}

// hostInterfaces lists the interfaces of nl's network namespace.
func hostInterfaces(nl *netlink.Handle) ([]proto.HostInterface, error) {
	links, err := nl.LinkList()
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "list interfaces: %v", err)
	}
	out := make([]proto.HostInterface, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		hi := proto.HostInterface{ID: a.Name, Name: a.Name, MACAddress: a.HardwareAddr.String(), Type: "ethernet", Special: special(a.Name)}
		if t, ok := l.(*netlink.Tuntap); (ok && t.Mode == netlink.TUNTAP_MODE_TAP) || strings.HasPrefix(a.Name, "tap") {
			hi.Type = "tap"
		}
		addrs, err := nl.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return nil, proto.Errorf(proto.CodeInternal, "list addresses of %s: %v", a.Name, err)
		}
		if len(addrs) > 0 && addrs[0].IPNet != nil {
			hi.IPAddress = addrs[0].IP.String()
			hi.Netmask = net.IP(addrs[0].Mask).String()
		}
		out = append(out, hi)
	}
	slices.SortFunc(out, func(x, y proto.HostInterface) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// specialPrefixes start the names of interfaces that are not a way out to
// a network of the user's: loopback, hypervisors' and container engines'
// bridges and virtual NICs, veths, GNS3's own.
var specialPrefixes = []string{"lo", "vmnet", "vboxnet", "docker", "lxcbr", "virbr", "ovs-system", "veth", "fw", "p2p", "bridge", "vmware", "virtualbox", "gns3", "br-"}

// nodeVeth is the host end of a docker node's adapter (agent/node/docker).
var nodeVeth = regexp.MustCompile(`^lt[0-9a-f]{12}$`)

func special(name string) bool {
	return nodeVeth.MatchString(name) || slices.ContainsFunc(specialPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}
