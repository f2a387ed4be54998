package host

import (
	"context"
	"log/slog"
	"net/netip"
	"reflect"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/proto"
)

// The node types the agent runs itself, with no emulator process. GNS3
// treats them as always running: they are started while their project is
// open, and start and stop requests change nothing.
const (
	TypeCloud  = "cloud"           // UDP tunnels and host interfaces: ways out of the lab
	TypeHub    = "ethernet_hub"    // floods every frame
	TypeSwitch = "ethernet_switch" // learns MAC addresses; access and dot1q ports
)

func builtin(nodeType string) bool {
	return nodeType == TypeCloud || nodeType == TypeHub || nodeType == TypeSwitch
}

// switchPorts turns a switch's ports_mapping into bridge configuration. A
// VLAN of 0 is GNS3's default, 1: the wire format omits zero, so a missing
// VLAN and 0 cannot be told apart.
func switchPorts(ports []proto.PortMapping) ([]bridge.SwitchPort, error) {
	cfg := make([]bridge.SwitchPort, len(ports))
	for i, pm := range ports {
		switch pm.Type {
		case proto.PortAccess:
		case proto.PortDot1Q:
			cfg[i].Trunk = true
		case proto.PortQinQ:
			cfg[i].QinQ = true
			if pm.EtherType < 0 || pm.EtherType > 0xffff {
				return nil, proto.Errorf(proto.CodeInvalid, "switch port %d (%s): ethertype %#x is out of range", i, pm.Name, pm.EtherType)
			}
			cfg[i].EtherType = uint16(pm.EtherType)
		default:
			return nil, proto.Errorf(proto.CodeInvalid, "switch port %d (%s): type %q is not supported (want %q, %q or %q)", i, pm.Name, pm.Type, proto.PortAccess, proto.PortDot1Q, proto.PortQinQ)
		}
		cfg[i].VLAN = pm.VLAN
		if cfg[i].VLAN == 0 {
			cfg[i].VLAN = 1
		}
		if cfg[i].VLAN < 1 || cfg[i].VLAN > 4094 {
			return nil, proto.Errorf(proto.CodeInvalid, "switch port %d (%s): VLAN %d is out of range 1 to 4094", i, pm.Name, pm.VLAN)
		}
	}
	return cfg, nil
}

// reconfigure applies a new spec to an existing node: the same ports change
// nothing; a switch may change its ports' types and VLANs in place; any
// other change is a conflict (delete the node and create it again). p.mu
// must be held.
func reconfigure(n *hostNode, spec proto.NodeSpec) error {
	if len(spec.Ports) == 0 && len(n.spec.Ports) == 0 || reflect.DeepEqual(spec.Ports, n.spec.Ports) {
		return nil
	}
	if n.spec.NodeType == TypeSwitch && len(spec.Ports) == len(n.spec.Ports) {
		cfg, err := switchPorts(spec.Ports)
		if err != nil {
			return err
		}
		if err := n.sw.Reconfigure(cfg); err != nil {
			return proto.Errorf(proto.CodeInvalid, "%v", err)
		}
		n.spec.Ports = spec.Ports
		return nil
	}
	return proto.Errorf(proto.CodeConflict, "node %s exists with other ports; delete it to change them", spec.NodeID)
}

// cloudRunner is a cloud's runner: always on, and its node reports the
// host's interfaces as GNS3's cloud does (property "interfaces": name,
// type, special), which the GUI's cloud dialog offers for ethernet ports.
type cloudRunner struct {
	alwaysOn
	log *slog.Logger
}

var _ PropertyReporter = cloudRunner{}

func (c cloudRunner) Properties() map[string]any {
	list, err := interfaces()
	if err != nil {
		c.log.Warn("list the host's interfaces for a cloud", "err", err)
		return nil
	}
	out := make([]any, 0, len(list))
	for _, hi := range list {
		out = append(out, map[string]any{"name": hi.Name, "type": hi.Type, "special": hi.Special})
	}
	return map[string]any{"interfaces": out}
}

// alwaysOn is the runner of the nodes the agent runs itself: they have no
// process, no console, and are always started.
type alwaysOn struct{}

var _ node.Runner = alwaysOn{}

func (alwaysOn) Start(context.Context) error                  { return nil }
func (alwaysOn) Stop(context.Context) error                   { return nil }
func (alwaysOn) Status() string                               { return node.Started }
func (alwaysOn) Console() (int, string)                       { return 0, "none" }
func (alwaysOn) CommandLine() string                          { return "" }
func (alwaysOn) NIC(adapter, port int) (netip.AddrPort, bool) { return netip.AddrPort{}, false }

// buildBuiltin makes the ports of a cloud, hub or switch node from its
// spec's ports (GNS3's ports_mapping, in order: link endpoint 0/i is entry
// i). Nothing is left open when it fails.
func (ag *agentParts) buildBuiltin(n *hostNode) error {
	n.runner = alwaysOn{}
	switch n.spec.NodeType {
	case TypeCloud:
		n.runner = cloudRunner{log: ag.log}
		for i, pm := range n.spec.Ports {
			if pm.Type == proto.PortEthernet {
				port, release, err := ag.openCloudEthernet(n.spec.NodeID, i, pm)
				if err != nil {
					n.close()
					return err
				}
				n.ports = append(n.ports, &nodePort{port: port, pkt: port, release: release})
				continue
			}
			port, err := ag.openCloudPort(i, pm)
			if err != nil {
				n.close()
				return err
			}
			n.ports = append(n.ports, &nodePort{port: port, udp: port})
		}
	case TypeHub:
		for i, pm := range n.spec.Ports {
			if pm.Type != proto.PortHub {
				return proto.Errorf(proto.CodeInvalid, "hub port %d (%s): type %q, want none", i, pm.Name, pm.Type)
			}
		}
		n.sw = bridge.NewHub(len(n.spec.Ports))
	case TypeSwitch:
		cfg, err := switchPorts(n.spec.Ports)
		if err != nil {
			return err
		}
		if n.sw, err = bridge.NewSwitch(cfg); err != nil {
			return proto.Errorf(proto.CodeInvalid, "%v", err)
		}
	}
	if n.sw != nil {
		for i := range n.sw.NumPorts() {
			n.ports = append(n.ports, &nodePort{port: n.sw.Port(i)})
		}
	}
	return nil
}

// openCloudPort opens one UDP port of a cloud: a socket
// bound to lport on every address and connected to rhost:rport, so frames
// leave from lport and only rhost:rport is heard.
func (ag *agentParts) openCloudPort(i int, pm proto.PortMapping) (*bridge.UDPPort, error) {
	if pm.Type != proto.PortUDP {
		return nil, proto.Errorf(proto.CodeInvalid, "cloud port %d (%.64s): type %.32q is not supported by this agent (%q or %q)", i, pm.Name, pm.Type, proto.PortUDP, proto.PortEthernet)
	}
	if pm.LocalPort < 1 || pm.LocalPort > 65535 || pm.RemotePort < 1 || pm.RemotePort > 65535 {
		return nil, proto.Errorf(proto.CodeInvalid, "cloud port %d (%s): lport %d and rport %d must be 1 to 65535", i, pm.Name, pm.LocalPort, pm.RemotePort)
	}
	peer, err := ag.tunnelPeer(proto.Tunnel{LocalPort: pm.LocalPort, RemoteHost: pm.RemoteHost, RemotePort: pm.RemotePort})
	var port *bridge.UDPPort
	if err == nil {
		port, err = ag.relay.openTunnel(pm.LocalPort, peer)
	}
	if err != nil {
		if pe, ok := err.(*proto.Error); ok {
			pe.Message = "cloud port " + pm.Name + ": " + pe.Message
		}
		return nil, err
	}
	return port, nil
}
