package project

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// nodePlan is what a node update does, worked out from the node as it is
// and the request alone: the node as it will be, and the compute calls
// that make it so. Nodes.Update carries it out.
type nodePlan struct {
	next Node
	// respec, when set, goes to the node's compute (CreateNode on a node
	// it has changes it in place: the properties that changed, the
	// adapters), and what the compute reports is applied to next.
	respec *NodeSpec
	// ports, when not nil, is the node's new ports_mapping, for its
	// compute.
	ports []PortSpec
}

// nodePlanEnv is what planning a node update reads besides the node: no
// compute call, no lock, no disk.
type nodePlanEnv struct {
	// nameTaken reports whether another node of the project has a name.
	nameTaken func(string) bool
	symbols   SymbolSizes
	// spec is the compute's view of a node (Service.nodeSpec).
	spec func(*Node) (NodeSpec, error)
}

// planNodeUpdate plans u on cur, or refuses it with a 4xx error. A rename
// follows the naming rules, sets the label's text and resets its x (as
// GNS3); the console is the compute's to choose.
func planNodeUpdate(cur Node, u NodeUpdate, env nodePlanEnv) (nodePlan, error) {
	next := cur
	if u.Name != nil && *u.Name != cur.Name {
		var err error
		next.Name, err = allocateName(*u.Name, func(name string) bool { return name != cur.Name && env.nameTaken(name) })
		if err != nil {
			return nodePlan{}, err
		}
	}
	if u.Console != nil && *u.Console != cur.Console {
		return nodePlan{}, errorf(ErrConflict, "The console port of node %s is chosen by its compute and cannot be changed", cur.Name)
	}
	if u.ConsoleType != nil && *u.ConsoleType != cur.ConsoleType {
		k := kindOf(cur.Type)
		if k == nil || k.consoleTypes == nil {
			return nodePlan{}, errorf(ErrConflict, "Node %s only has a %s console", cur.Name, cur.ConsoleType)
		}
		if !slices.Contains(k.consoleTypes, *u.ConsoleType) {
			return nodePlan{}, errorf(ErrInvalid, "Node %s: console_type %q is not one of %s", cur.Name, *u.ConsoleType, strings.Join(k.consoleTypes, ", "))
		}
		next.ConsoleType = *u.ConsoleType // a node with adapters: its compute applies it
		if keepsConsoleType(cur.Type) {
			next.showConsole()
		}
	}
	set(&next.X, u.X)
	set(&next.Y, u.Y)
	set(&next.Z, u.Z)
	set(&next.PortSegmentSize, u.PortSegmentSize)
	set(&next.Locked, u.Locked)
	set(&next.ConsoleAutoStart, u.ConsoleAutoStart)
	set(&next.PortNameFormat, u.PortNameFormat)
	if u.FirstPortName != nil {
		next.FirstPortName = u.FirstPortName
	}
	if u.Symbol != nil && *u.Symbol != cur.Symbol {
		next.Symbol = *u.Symbol
		next.Width, next.Height = env.symbols(next.Symbol)
	}
	var plan nodePlan
	if u.Properties != nil {
		props := make(map[string]any, len(cur.Properties)+len(u.Properties))
		for k, v := range cur.Properties {
			props[k] = v
		}
		for k, v := range u.Properties {
			props[k] = v
		}
		if pm, given := u.Properties["ports_mapping"]; given && hasPortsMapping(cur.Type) && !reflect.DeepEqual(pm, cur.Properties["ports_mapping"]) {
			ports, err := parsePortsMapping(cur.Type, pm)
			if err != nil {
				return nodePlan{}, err
			}
			if ports == nil {
				ports = []PortSpec{}
			}
			plan.ports = ports
		}
		if err := checkProperties(cur.Name, props); err != nil {
			return nodePlan{}, err
		}
		next.Properties = props
	}
	if u.CustomAdapters != nil {
		next.CustomAdapters = u.CustomAdapters
	}
	switch {
	case u.Label != nil:
		next.Label = nodeLabel(u.Label, next.Name, next.Height)
	case next.Name != cur.Name:
		l := nodeLabel(cur.Label, next.Name, next.Height)
		l["x"] = json.RawMessage("null")
		next.Label = l
	}
	if hasAdapters(cur.Type) {
		// The compute gets the properties that changed, and the adapters.
		spec, err := env.spec(&next)
		if err != nil {
			return nodePlan{}, err
		}
		changed := map[string]any{}
		for k, v := range u.Properties {
			if !reflect.DeepEqual(v, cur.Properties[k]) {
				changed[k] = v
			}
		}
		if next.ConsoleType != cur.ConsoleType {
			changed["console_type"] = next.ConsoleType
		}
		if len(changed) > 0 || next.Name != cur.Name || !reflect.DeepEqual(next.Adapters, cur.Adapters) {
			spec.Properties = changed
			plan.respec = &spec
		}
	}
	plan.next = next
	return plan, nil
}

// linkPlan is what a link update does, worked out from the link as it is
// and the request alone. Links.Update carries it out.
type linkPlan struct {
	next Link
	// relay: the link's relays get next's filters and suspend.
	relay bool
	// announce is how many link.updated events the update sends: one per
	// step that changed, in GNS3's order (filters, style, suspend,
	// labels; labels are announced even when unchanged, as GNS3 does).
	announce int
}

// planLinkUpdate plans u on cur, or refuses it with a 4xx error; hasNode
// reports whether the project has a node (a label must name one).
func planLinkUpdate(cur Link, u LinkUpdate, hasNode func(string) bool) (linkPlan, error) {
	for _, lb := range u.Labels {
		if !hasNode(lb.NodeID) {
			return linkPlan{}, nodeNotFound(lb.NodeID)
		}
	}
	next := cur
	var filters, style, suspend bool
	if u.Filters != nil {
		f, err := normalizeFilters(u.Filters)
		if err != nil {
			return linkPlan{}, err
		}
		filters = !reflect.DeepEqual(f, cur.Filters)
		next.Filters = f
	}
	if u.Style != nil && !bytes.Equal(u.Style, cur.Style) {
		next.Style, style = u.Style, true
	}
	if u.Suspend != nil && *u.Suspend != cur.Suspend {
		next.Suspend, suspend = *u.Suspend, true
	}
	if u.Labels != nil {
		eps := slices.Clone(cur.Endpoints)
		for _, lb := range u.Labels {
			for i := range eps {
				if eps[i].NodeID == lb.NodeID && len(lb.Label) > 0 {
					eps[i].Label = lb.Label
				}
			}
		}
		next.Endpoints = eps
	}
	plan := linkPlan{next: next, relay: filters || suspend}
	for _, changed := range []bool{filters, style, suspend, u.Labels != nil} {
		if changed {
			plan.announce++
		}
	}
	return plan, nil
}
