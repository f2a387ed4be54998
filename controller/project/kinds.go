package project

import (
	"fmt"
	"slices"
)

// kind is what the controller knows of one node type: its ports, how it
// runs, its templates' and properties' defaults and checks. Every rule
// that depends on a node's type reads this table; a type not in it cannot
// be created.
type kind struct {
	// Type is the node_type.
	Type string
	// ports lists a node's ports, named as GNS3 names them.
	ports func(n *Node) []Port
	// alwaysRunning types run inside the agent and are started while their
	// project is open (GNS3's "always running"), so a capture on their
	// side is never cut short by a node stopping.
	alwaysRunning bool
	// macIndex types take a project-unique MAC index (VPCS's last byte).
	macIndex bool
	// portsMapping types take their ports from properties.ports_mapping.
	portsMapping bool
	// adapters types have one port per network adapter, link endpoint
	// adapter i, port 0, each with a MAC address (proto.AdapterMACs);
	// their properties go to the compute on create and update, and what
	// the compute computes comes back into them.
	adapters    func(n *Node) ([]Adapter, error)
	suspendable bool
	// consoleTypes are the console types a node of this type may be
	// created with or changed to (node PUT); nil: it keeps the one it was
	// created with.
	consoleTypes []string
	// template is the type's built-in template, nil when it has none.
	template *Template
	// templateDefaults returns the properties of a new user template of
	// this type; nil when the type has
	// no user templates.
	templateDefaults func() map[string]any
	// defaults fills in the properties a new node was not given.
	defaults func(props map[string]any)
	// check validates a node's properties (after defaults and any
	// update); its errors are ErrInvalid (400) or ErrConflict (409).
	check func(n *Node) error
}

// Adapter is one network adapter of a node with adapters, as its port
// shows it and its compute gets it.
type Adapter struct {
	Name, ShortName string
	// MACAddress is computed by the controller from the node's
	// properties.mac_address (see Service.resolveAdapters).
	MACAddress  string
	AdapterType string
}

// kinds lists the node types labtap models, in GNS3's order (templates
// are listed in it).
var kinds = []*kind{
	{
		Type:          TypeCloud,
		ports:         mappedPorts,
		alwaysRunning: true,
		portsMapping:  true,
		template:      ptr(builtinTemplate(TypeCloud, "Cloud", "Cloud{0}", ":/symbols/cloud.svg", "guest")),
		defaults:      mappingDefaults(TypeCloud),
	},
	{
		Type: "vpcs",
		ports: func(*Node) []Port {
			return []Port{{Name: "Ethernet0", ShortName: "e0", LinkType: Ethernet, DataLinkTypes: ethernetDLTs}}
		},
		macIndex: true,
		// GNS3's VPCS: a telnet console, or none (no console port).
		consoleTypes: []string{"telnet", "none"},
		template: func() *Template {
			t := builtinTemplate("vpcs", "VPCS", "PC{0}", ":/symbols/vpcs_guest.svg", "guest")
			t.Properties = map[string]any{"base_script_file": "vpcs_base_config.txt"}
			return &t
		}(),
	},
	{
		Type:          TypeSwitch,
		ports:         mappedPorts,
		alwaysRunning: true,
		portsMapping:  true,
		// GNS3's switch: no console, or a telnet one (labtap's switch has no
		// console to serve: the type is kept, its port stays null).
		consoleTypes: []string{"none", "telnet"},
		template: func() *Template {
			t := builtinTemplate(TypeSwitch, "Ethernet switch", "Switch{0}", ":/symbols/ethernet_switch.svg", "switch")
			t.ConsoleType = "none"
			return &t
		}(),
		defaults: mappingDefaults(TypeSwitch),
	},
	{
		Type:          TypeHub,
		ports:         mappedPorts,
		alwaysRunning: true,
		portsMapping:  true,
		template:      ptr(builtinTemplate(TypeHub, "Ethernet hub", "Hub{0}", ":/symbols/hub.svg", "switch")),
		defaults:      mappingDefaults(TypeHub),
	},
	qemuKind,   // kind_qemu.go
	dockerKind, // kind_docker.go
}

func ptr[T any](v T) *T { return &v }

// kindOf returns a node type's kind, nil for a type labtap does not model.
func kindOf(nodeType string) *kind {
	i := slices.IndexFunc(kinds, func(k *kind) bool { return k.Type == nodeType })
	if i < 0 {
		return nil
	}
	return kinds[i]
}

// is reports a property of a node type; unknown types have none.
func is(nodeType string, prop func(k *kind) bool) bool {
	k := kindOf(nodeType)
	return k != nil && prop(k)
}

func hasPortsMapping(nodeType string) bool {
	return is(nodeType, func(k *kind) bool { return k.portsMapping })
}

// usesMAC reports node types that take a MAC index: VPCS's one byte.
func usesMAC(nodeType string) bool { return is(nodeType, func(k *kind) bool { return k.macIndex }) }

func isAlwaysRunning(nodeType string) bool {
	return is(nodeType, func(k *kind) bool { return k.alwaysRunning })
}

func isSuspendable(nodeType string) bool {
	return is(nodeType, func(k *kind) bool { return k.suspendable })
}

// hasAdapters reports node types with one port per adapter, whose
// properties the compute gets.
// keepsConsoleType reports whether the controller keeps a node's
// console_type itself, its compute running the node the same whatever the
// type (VPCS, switch): the compute's report does not replace it.
func keepsConsoleType(nodeType string) bool {
	return is(nodeType, func(k *kind) bool { return k.consoleTypes != nil && k.adapters == nil })
}

func hasAdapters(nodeType string) bool {
	return is(nodeType, func(k *kind) bool { return k.adapters != nil })
}

// TemplateDefaults returns the properties of a new user template of a node
// type, and false when the type has no user templates.
func TemplateDefaults(nodeType string) (map[string]any, bool) {
	k := kindOf(nodeType)
	if k == nil || k.templateDefaults == nil {
		return nil, false
	}
	return k.templateDefaults(), true
}

// mappingDefaults gives a new node GNS3's default ports_mapping.
func mappingDefaults(nodeType string) func(map[string]any) {
	return func(props map[string]any) {
		if _, given := props["ports_mapping"]; !given {
			props["ports_mapping"] = defaultPortsMapping(nodeType)
		}
	}
}

// mappedPorts lists a switch's, hub's or cloud's ports: one per
// ports_mapping entry, all on adapter 0, numbered by position, named as
// the entry (short name "e<n>" for switches and hubs, the entry's name for
// clouds).
func mappedPorts(n *Node) []Port {
	mapping := portsMappingOf(n)
	out := make([]Port, 0, len(mapping))
	for i, pm := range mapping {
		short := fmt.Sprintf("e%d", i)
		if n.Type == TypeCloud {
			short = pm.Name
		}
		out = append(out, Port{Name: pm.Name, ShortName: short, PortNumber: i, LinkType: Ethernet, DataLinkTypes: ethernetDLTs})
	}
	return out
}

// adapterPorts lists the ports of a node with adapters: adapter i, port 0,
// as resolved into n.Adapters.
func adapterPorts(n *Node) []Port {
	out := make([]Port, 0, len(n.Adapters))
	for i, a := range n.Adapters {
		out = append(out, Port{
			Name: a.Name, ShortName: a.ShortName, AdapterNumber: i, LinkType: Ethernet, DataLinkTypes: ethernetDLTs,
			MACAddress: a.MACAddress, AdapterType: a.AdapterType,
		})
	}
	return out
}
