package project

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Node types whose ports are configured by a "ports_mapping" property, and
// which run inside the agent, always started (GNS3's "always running").
const (
	TypeCloud  = "cloud"
	TypeHub    = "ethernet_hub"
	TypeSwitch = "ethernet_switch"
)

// PortSpec is one entry of a cloud's, hub's or switch's ports_mapping, as
// the compute needs it. Link endpoint (0, i) is entry i.
type PortSpec struct {
	Name string
	Type string // switch: "access", "dot1q" or "qinq"; cloud: "udp" or "ethernet"; hub: ""
	VLAN int    // switch: the access VLAN, a trunk's native VLAN, or a tunnel's outer VLAN
	// EtherType is a qinq port's outer tag type on trunks (GNS3's
	// "ethertype"): 0x8100 (or 0), 0x88a8, 0x9100 or 0x9200.
	EtherType int
	// Cloud UDP ports: frames leave from LocalPort to RemoteHost:RemotePort.
	LocalPort  int
	RemoteHost string
	RemotePort int
	// Interface is a cloud ethernet port's host interface (GNS3's
	// "interface"): frames are relayed to and from it on the compute.
	Interface string
}

// defaultPortsMapping is GNS3's for a new node: eight access ports in VLAN 1
// for a switch, eight ports for a hub, none for a cloud (GNS3 lists the
// host's interfaces there; a cloud's port names one of them or a UDP tunnel).
func defaultPortsMapping(nodeType string) []any {
	var out []any
	switch nodeType {
	case TypeSwitch:
		for i := range 8 {
			out = append(out, map[string]any{"name": fmt.Sprintf("Ethernet%d", i), "port_number": i, "type": "access", "vlan": 1})
		}
	case TypeHub:
		for i := range 8 {
			out = append(out, map[string]any{"name": fmt.Sprintf("Ethernet%d", i), "port_number": i})
		}
	default:
		out = []any{}
	}
	return out
}

// maxPorts bounds a ports_mapping.
const maxPorts = 4096

// parsePortsMapping checks a node's ports_mapping and returns what the
// compute needs. Refusals are invalid requests (400).
func parsePortsMapping(nodeType string, v any) ([]PortSpec, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errorf(ErrInvalid, "ports_mapping of a %s must be a list", nodeType)
	}
	if len(list) > maxPorts {
		return nil, errorf(ErrInvalid, "ports_mapping has %d entries, at most %d", len(list), maxPorts)
	}
	out := make([]PortSpec, 0, len(list))
	names := make(map[string]bool, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, errorf(ErrInvalid, "ports_mapping entry %d must be an object", i)
		}
		p := PortSpec{}
		var err error
		if p.Name, err = str(m, "name", true); err != nil {
			return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
		}
		if names[p.Name] {
			return nil, errorf(ErrInvalid, "ports_mapping entry %d: the name %q is used twice", i, p.Name)
		}
		names[p.Name] = true
		if _, err := integer(m, "port_number", 0, 1<<16, false); err != nil {
			return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
		}
		switch nodeType {
		case TypeSwitch:
			if p.Type, err = str(m, "type", true); err != nil || (p.Type != "access" && p.Type != "dot1q" && p.Type != "qinq") {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: type must be \"access\", \"dot1q\" or \"qinq\"", i)
			}
			if p.Type == "qinq" {
				if p.EtherType, err = tagType(m); err != nil {
					return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
				}
			}
			if p.VLAN, err = integer(m, "vlan", 1, 4094, false); err != nil {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
			}
			if p.VLAN == 0 {
				p.VLAN = 1
			}
		case TypeHub:
			if t, _ := str(m, "type", false); t != "" {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: hub ports have no type", i)
			}
		case TypeCloud:
			if p.Type, err = str(m, "type", true); err != nil || p.Type != "udp" && p.Type != "ethernet" {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: a cloud port's type must be \"udp\" (with lport, rhost and rport) or \"ethernet\" (with interface)", i)
			}
			if p.Type == "ethernet" {
				if p.Interface, err = str(m, "interface", true); err != nil || !ifaceName(p.Interface) {
					return nil, errorf(ErrInvalid, "ports_mapping entry %d: interface must be a host interface's name (1 to %d bytes, no '/', ':' or space)", i, maxIfaceName)
				}
				break
			}
			if p.LocalPort, err = integer(m, "lport", 1, 65535, true); err != nil {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
			}
			if p.RemotePort, err = integer(m, "rport", 1, 65535, true); err != nil {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: %v", i, err)
			}
			if p.RemoteHost, err = str(m, "rhost", true); err != nil || CheckHost("rhost", p.RemoteHost) != nil {
				return nil, errorf(ErrInvalid, "ports_mapping entry %d: rhost must be a host name or address", i)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// maxIfaceName is the longest interface name Linux takes (IFNAMSIZ-1).
const maxIfaceName = 15

// ifaceName reports whether s can name a Linux network interface.
func ifaceName(s string) bool {
	if s == "" || len(s) > maxIfaceName || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || r == '/' || r == ':' {
			return false
		}
	}
	return true
}

// tagType reads a qinq port's "ethertype": GNS3's "0x8100" (or "", or
// absent), "0x88A8", "0x9100" or "0x9200".
func tagType(m map[string]any) (int, error) {
	s, err := str(m, "ethertype", false)
	if err != nil {
		return 0, err
	}
	switch strings.ToLower(s) {
	case "", "0x8100":
		return 0, nil
	case "0x88a8":
		return 0x88a8, nil
	case "0x9100":
		return 0x9100, nil
	case "0x9200":
		return 0x9200, nil
	}
	return 0, fmt.Errorf("ethertype %q is not one of 0x8100, 0x88A8, 0x9100, 0x9200", s)
}

func str(m map[string]any, key string, required bool) (string, error) {
	v, ok := m[key]
	if !ok {
		if required {
			return "", fmt.Errorf("%s is missing", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || required && s == "" {
		return "", fmt.Errorf("%s must be a non-empty string", key)
	}
	return s, nil
}

func integer(m map[string]any, key string, lo, hi int, required bool) (int, error) {
	v, ok := m[key]
	if !ok {
		if required {
			return 0, fmt.Errorf("%s is missing", key)
		}
		return 0, nil
	}
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case int:
		n = float64(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("%s must be an integer", key)
		}
		n = f
	default:
		return 0, fmt.Errorf("%s must be an integer", key)
	}
	if n != float64(int(n)) || int(n) < lo || int(n) > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d", key, lo, hi)
	}
	return int(n), nil
}

// portsMappingOf returns a node's configured ports; a node whose stored
// mapping is unreadable has none.
func portsMappingOf(n *Node) []PortSpec {
	ports, err := parsePortsMapping(n.Type, n.Properties["ports_mapping"])
	if err != nil {
		return nil
	}
	return ports
}
