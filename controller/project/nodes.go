package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/labtap/labtap/dockerpolicy"
)

// NodeCreate is a request to create a node. Start from NewNodeCreate, which
// holds GNS3's defaults, and set what the client gave.
type NodeCreate struct {
	ID               string // "" picks a new one
	ComputeID, Type  string
	Name             string
	TemplateID       string
	Symbol           string
	X, Y, Z          int
	Locked           bool
	Label            Label // nil: generated from the name
	ConsoleAutoStart bool
	Properties       map[string]any
	PortNameFormat   string
	PortSegmentSize  int
	FirstPortName    *string
	CustomAdapters   []json.RawMessage
	// ConsoleType is the console a node with adapters asks for ("" is its
	// default: telnet).
	ConsoleType string
	// Extra are stored members labtap does not model, kept (a duplicate's).
	Extra Extra
}

// NewNodeCreate returns a request holding GNS3's defaults.
func NewNodeCreate() NodeCreate {
	return NodeCreate{
		Symbol:         DefaultSymbol,
		Z:              1,
		PortNameFormat: DefaultPortNameFormat,
		Properties:     map[string]any{},
		CustomAdapters: []json.RawMessage{},
	}
}

// Nodes are the nodes of projects: their creation from a kind's spec,
// changes, lifecycle (start, stop, suspend, reload) and removal with their
// links and captures.
type Nodes struct {
	core     *core
	links    *Links
	captures *Captures
}

// List returns a project's nodes in creation order. For a closed project
// they are the nodes its file holds (GNS3 lists them too).
func (s *Nodes) List(projectID string) ([]Node, error) {
	st, err := s.core.lookup(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]Node, 0, len(st.nodeOrder))
	for _, id := range st.nodeOrder {
		out = append(out, *st.nodes[id])
	}
	return out, nil
}

// Get returns one node.
func (s *Nodes) Get(projectID, nodeID string) (Node, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return Node{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	n, ok := st.nodes[nodeID]
	if !ok {
		return Node{}, nodeNotFound(nodeID)
	}
	return *n, nil
}

// nodeLocked returns a node. st.mu must be held.
func (st *state) nodeLocked(id string) (*Node, error) {
	n, ok := st.nodes[id]
	if !ok {
		return nil, nodeNotFound(id)
	}
	return n, nil
}

// Create creates a node on its compute, saves the project and returns
// the node. Creating a node whose id exists returns it unchanged.
func (s *Nodes) Create(ctx context.Context, projectID string, req NodeCreate) (_ Node, err error) {
	if !s.core.cfg.Computes.Exists(req.ComputeID) {
		return Node{}, computeNotFound(req.ComputeID)
	}
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Node{}, err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	if n, ok := st.nodes[req.ID]; ok && req.ID != "" {
		st.mu.RUnlock()
		return *n, nil
	}
	name, err := allocateName(req.Name, func(name string) bool { return st.nameTakenLocked(name) })
	mac := st.freeMACLocked()
	vars := st.p.Settings.Variables
	st.mu.RUnlock()
	if err != nil {
		return Node{}, err
	}
	if !s.core.mayRun(req.ComputeID, req.Type) {
		return Node{}, errorf(ErrConflict, "Node type %s is not supported by compute %s", req.Type, req.ComputeID)
	}
	req.Properties = withDefaults(req.Type, req.Properties)
	if err := checkProperties(name, req.Properties); err != nil {
		return Node{}, err
	}
	if !usesMAC(req.Type) {
		mac = -1
	}
	if req.ID == "" {
		req.ID = newID()
	}
	n := &Node{
		ID: req.ID, ProjectID: projectID, ComputeID: req.ComputeID, Type: req.Type, Name: name,
		TemplateID: req.TemplateID, ConsoleAutoStart: req.ConsoleAutoStart,
		Properties: req.Properties, X: req.X, Y: req.Y, Z: req.Z, Locked: req.Locked,
		Symbol: req.Symbol, PortNameFormat: req.PortNameFormat, PortSegmentSize: req.PortSegmentSize,
		FirstPortName: req.FirstPortName, CustomAdapters: req.CustomAdapters, MACIndex: mac,
		Extra: maps.Clone(req.Extra),
	}
	if hasAdapters(req.Type) || keepsConsoleType(req.Type) {
		n.ConsoleType = req.ConsoleType
	}
	spec, err := s.nodeSpec(n, vars)
	if err != nil {
		return Node{}, err
	}
	release, err := s.core.admit(claim{projectID: projectID, add: Usage{Nodes: 1},
		done: func(st *state) bool { return st.nodes[n.ID] != nil }})
	if err != nil {
		return Node{}, err
	}
	defer release()
	if err := s.core.openOn(ctx, st, req.ComputeID); err != nil {
		return Node{}, err
	}
	rt, err := s.core.cfg.Computes.CreateNode(ctx, req.ComputeID, projectID, spec)
	if err != nil {
		return Node{}, err
	}
	n.Width, n.Height = s.core.cfg.Symbols(n.Symbol)
	n.applyRuntime(rt)
	n.Label = nodeLabel(req.Label, name, n.Height)

	st.change(func() {
		st.nodes[n.ID] = n
		st.nodeOrder = append(st.nodeOrder, n.ID)
	})
	if err := s.core.save(st); err != nil {
		// Nothing stays of a node whose save failed at once. (One whose
		// flush fails later, at Unlock, is kept: see core.durable.)
		st.change(func() {
			delete(st.nodes, n.ID)
			st.nodeOrder = st.nodeOrder[:len(st.nodeOrder)-1]
		})
		if derr := s.core.cfg.Computes.DeleteNode(context.WithoutCancel(ctx), n.ComputeID, projectID, n.ID); derr != nil {
			s.core.log.Warn("roll back node", "node", n.ID, "err", derr)
		}
		return Node{}, err
	}
	out := *n
	s.core.emit(st, NodeCreated, &out, nil)
	s.warnNode(st, &out, nil)
	return out, nil
}

// nameTakenLocked reports whether a node of the project has this name.
// st.mu must be held.
func (st *state) nameTakenLocked(name string) bool {
	for _, n := range st.nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// MACIndexes is how many MAC indexes a project hands out: VPCS takes one
// byte of its MAC from its agent (00:50:79:66:68:NN), 255 of them as GNS3.
const MACIndexes = 255

// freeMACLocked returns the lowest MAC index no node of the project uses.
// Indexes are project-wide, so nodes on different computes do not share a
// MAC while there are fewer than MACIndexes; past that, the least used
// index (the lowest of them) is shared, so any number of VPCS still runs:
// only VPCS on one segment sharing a MAC would see it. st.mu must be held.
func (st *state) freeMACLocked() int {
	uses := make([]int, MACIndexes)
	for _, n := range st.nodes {
		if n.MACIndex >= 0 && n.MACIndex < len(uses) {
			uses[n.MACIndex]++
		}
	}
	return slices.Index(uses, slices.Min(uses))
}

// withDefaults returns a node's properties with its type's defaults filled
// in where they are missing: a new node's, and a stored node's when its
// project opens (a project file may leave out what GNS3 fills in). props
// is not changed.
func withDefaults(nodeType string, props map[string]any) map[string]any {
	k := kindOf(nodeType)
	if k == nil || k.defaults == nil {
		return props
	}
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	k.defaults(props)
	return props
}

// applyRuntime copies what the compute reported into the node; a
// console_type the controller keeps (keepsConsoleType) stays.
func (n *Node) applyRuntime(rt NodeRuntime) {
	own := n.ConsoleType
	defer func() {
		n.computeConsole = rt.Console
		if own != "" && keepsConsoleType(n.Type) {
			n.ConsoleType = own
			n.showConsole()
		}
	}()
	n.Status = rt.Status
	if n.Status == "" {
		n.Status = Stopped
	}
	n.Console = rt.Console
	n.ConsoleHost = rt.ConsoleHost
	n.ConsoleType = rt.ConsoleType
	if rt.ConsoleType == "none" && rt.Console == 0 {
		n.ConsoleType = "none"
	}
	cl, dir := rt.CommandLine, rt.NodeDirectory
	n.CommandLine, n.NodeDirectory = &cl, &dir
	if len(rt.Properties) > 0 {
		props := maps.Clone(n.Properties)
		if props == nil {
			props = make(map[string]any, len(rt.Properties))
		}
		maps.Copy(props, rt.Properties)
		n.Properties = props
	}
}

// showConsole sets Console for a node whose console_type the controller
// keeps: a VPCS with none has no console port (GNS3); otherwise the port
// is the compute's.
func (n *Node) showConsole() {
	n.Console = n.computeConsole
	if n.Type == "vpcs" && n.ConsoleType == "none" {
		n.Console = 0
	}
}

// nodeSpec is what n's compute needs to create it, with every property:
// it checks n's properties and resolves its adapters (n.Adapters).
// vars are the project's variables (Settings.Variables).
func (s *Nodes) nodeSpec(n *Node, vars json.RawMessage) (NodeSpec, error) {
	spec := NodeSpec{ID: n.ID, Type: n.Type, Name: n.Name, MACIndex: n.MACIndex}
	k := kindOf(n.Type)
	if k == nil {
		return spec, errorf(ErrConflict, "Node type %s is not supported", n.Type)
	}
	if k.consoleTypes != nil && n.ConsoleType != "" && !slices.Contains(k.consoleTypes, n.ConsoleType) {
		return spec, errorf(ErrInvalid, "Node %s: console_type %q is not one of %s", n.Name, n.ConsoleType, strings.Join(k.consoleTypes, ", "))
	}
	if k.portsMapping {
		var err error
		if spec.Ports, err = parsePortsMapping(n.Type, n.Properties["ports_mapping"]); err != nil {
			return spec, err
		}
	}
	if k.check != nil {
		if err := k.check(n); err != nil {
			return spec, err
		}
	}
	if n.Type == TypeDocker {
		// The local compute is the embedded agent, whose flag this is; a
		// remote agent decides with its own, by the same rule.
		unsafe := n.ComputeID != LocalCompute || s.core.cfg.DockerUnsafe
		if err := checkDockerPolicy(n, dockerpolicy.Policy{Unsafe: unsafe}); err != nil {
			return spec, err
		}
	}
	if k.adapters != nil {
		if err := s.resolveAdapters(n); err != nil {
			return spec, err
		}
		spec.Properties, spec.Adapters = maps.Clone(n.Properties), n.Adapters
		if n.ConsoleType != "" {
			spec.Properties["console_type"] = n.ConsoleType
		}
		spec.Variables = projectVariables(vars)
	}
	return spec, nil
}

// Bounds of the project variables a compute gets.
const (
	maxVariables     = 256
	maxVariableName  = 255
	maxVariableValue = 4096
)

// projectVariables reads a project's variables as GNS3 stores them
// ([{"name": ..., "value": ...}]): client data kept verbatim, so entries
// that are not such objects, have no name, or exceed the bounds are left
// out rather than refused.
func projectVariables(raw json.RawMessage) []Variable {
	var list []struct {
		Name  *string `json:"name"`
		Value any     `json:"value"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []Variable
	for _, v := range list {
		if v.Name == nil || *v.Name == "" || len(*v.Name) > maxVariableName || len(out) == maxVariables {
			continue
		}
		value := ""
		switch x := v.Value.(type) {
		case string:
			value = x
		case float64, bool:
			value = fmt.Sprint(x)
		}
		if len(value) > maxVariableValue {
			continue
		}
		out = append(out, Variable{Name: *v.Name, Value: value})
	}
	return out
}

// resolveAdapters sets n.Adapters from its properties: names and types as
// its kind says, MACs from properties.mac_address (or the type's default)
// through the compute's MAC scheme. An unusable base MAC is a 409.
func (s *Nodes) resolveAdapters(n *Node) error {
	k := kindOf(n.Type)
	if k == nil || k.adapters == nil {
		return nil
	}
	adapters, err := k.adapters(n)
	if err != nil {
		return err
	}
	if scheme, ok := s.core.cfg.Computes.(MACScheme); ok {
		base, _ := n.Properties["mac_address"].(string)
		if base == "" { // shown as the node's mac_address, as GNS3's compute does
			macs, err := scheme.AdapterMACs(n.Type, n.ID, "", 1)
			if err != nil {
				return errorf(ErrConflict, "Node %s: %v", n.Name, err)
			}
			n.Properties = maps.Clone(n.Properties)
			n.Properties["mac_address"] = macs[0]
		}
		macs, err := scheme.AdapterMACs(n.Type, n.ID, base, len(adapters))
		if err != nil {
			return errorf(ErrConflict, "Node %s: %v", n.Name, err)
		}
		for i := range adapters {
			if adapters[i].MACAddress == "" { // a custom adapter's MAC is kept
				adapters[i].MACAddress = macs[i]
			}
		}
	}
	n.Adapters = adapters
	return nil
}

// nodeLabel returns the node's label: the client's, with text set to the
// name, or GNS3's generated one above the symbol.
func nodeLabel(given Label, name string, height int) Label {
	text, _ := json.Marshal(name)
	if given != nil {
		l := make(Label, len(given)+1)
		for k, v := range given {
			l[k] = v
		}
		l["text"] = text
		return l
	}
	// y = -(round(height/2 + 10)), rounding halves to even as Python does.
	y := -int(math.RoundToEven(float64(height)/2 + 10))
	return Label{
		"text":     text,
		"style":    json.RawMessage("null"),
		"x":        json.RawMessage("null"),
		"y":        json.RawMessage(fmt.Sprint(y)),
		"rotation": json.RawMessage("0"),
	}
}

// Start starts a node and returns it with the status its compute
// reports (GNS3 returns before knowing it; clients then race its event).
func (s *Nodes) Start(ctx context.Context, projectID, nodeID string) (Node, error) {
	return s.setStatus(ctx, projectID, nodeID, Started)
}

// Stop stops a node. Captures that depend on it stop first.
func (s *Nodes) Stop(ctx context.Context, projectID, nodeID string) (Node, error) {
	return s.setStatus(ctx, projectID, nodeID, Stopped)
}

func (s *Nodes) setStatus(ctx context.Context, projectID, nodeID, status string) (Node, error) {
	st, unlock, err := s.core.lockLifecycle(projectID, nodeID)
	if err != nil {
		return Node{}, err
	}
	defer unlock()
	return s.setStatusLocked(ctx, st, nodeID, status)
}

// setStatusLocked starts or stops one node. Several run at once for
// different nodes of a project. st.ops must be held (shared will do), and
// the node's lifecycle lock.
func (s *Nodes) setStatusLocked(ctx context.Context, st *state, nodeID, status string) (Node, error) {
	st.mu.RLock()
	n, err := st.nodeLocked(nodeID)
	var computeID, projectID string
	var add Usage // what starting it adds to its quotas
	if err == nil {
		computeID, projectID = n.ComputeID, n.ProjectID
		err = inertRefusal(n, status)
		if status == Started && n.Status == Stopped && !isAlwaysRunning(n.Type) {
			add = Usage{Running: 1, RAMMB: ramOf(n)}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return Node{}, err
	}
	if add != (Usage{}) {
		release, err := s.core.admit(claim{projectID: projectID, add: add, done: func(st *state) bool {
			n := st.nodes[nodeID]
			return n == nil || runs(n)
		}})
		if err != nil {
			return Node{}, err
		}
		defer release()
	}
	rt, err := s.core.cfg.Computes.SetNodeStatus(ctx, computeID, projectID, nodeID, status)
	if err != nil {
		if status == Started {
			return Node{}, err
		}
		// GNS3 answers a stop with 200 whatever the compute says; the
		// node's status stays what we last knew.
		s.core.log.Warn("stop node", "node", nodeID, "err", err)
		st.mu.RLock()
		defer st.mu.RUnlock()
		return *n, nil
	}
	before, after := s.updateRuntime(ctx, st, n, rt)
	if before.Console != after.Console {
		if err := s.core.save(st); err != nil {
			s.core.log.Error("save project", "project", projectID, "err", err)
		}
	}
	if shownChanged(before, after) {
		s.core.emit(st, NodeUpdated, &after, nil)
	}
	return after, nil
}

// updateRuntime applies what a compute says of node n, and stops the
// captures that depend on it if it no longer runs. st.ops must be held
// (shared will do, with n's lifecycle lock: the captures stopped are
// those on n's side of a link, which only n's operations stop).
func (s *Nodes) updateRuntime(ctx context.Context, st *state, n *Node, rt NodeRuntime) (before, after Node) {
	st.change(func() {
		before = *n
		n.applyRuntime(rt)
		after = *n
	})
	if after.Status != Started {
		s.captures.stopOf(ctx, st, n.ID)
	}
	return before, after
}

// shownChanged tells whether a runtime update changed what clients see of
// a node, so that it is announced.
func shownChanged(before, after Node) bool {
	return before.Status != after.Status || before.Console != after.Console || derefStr(before.CommandLine) != derefStr(after.CommandLine)
}

// Suspend suspends a node.
func (s *Nodes) Suspend(ctx context.Context, projectID, nodeID string) (Node, error) {
	n, err := s.Get(projectID, nodeID)
	if err != nil {
		return Node{}, err
	}
	if !isSuspendable(n.Type) {
		return Node{}, errorf(ErrConflict, "Suspend is not supported by %s nodes", n.Type)
	}
	return s.setStatus(ctx, projectID, nodeID, Suspended)
}

// Reload restarts a node: stop, then start.
func (s *Nodes) Reload(ctx context.Context, projectID, nodeID string) (Node, error) {
	st, unlock, err := s.core.lockLifecycle(projectID, nodeID)
	if err != nil {
		return Node{}, err
	}
	defer unlock()
	if _, err := s.setStatusLocked(ctx, st, nodeID, Stopped); err != nil {
		return Node{}, err
	}
	return s.setStatusLocked(ctx, st, nodeID, Started)
}

// bulkParallel is how many nodes a bulk operation handles at once (GNS3:
// 3). Each is one agent call that mostly waits (a process to start), so
// more than the CPUs: 200 nodes start in a few seconds.
const bulkParallel = 32

// StartAll starts every node of a project, bulkParallel at a time.
func (s *Nodes) StartAll(ctx context.Context, projectID string) error {
	return s.bulk(ctx, projectID, func(ctx context.Context, st *state, n Node) error {
		_, err := s.setStatusLocked(ctx, st, n.ID, Started)
		return err
	})
}

// StopAll stops every node of a project.
func (s *Nodes) StopAll(ctx context.Context, projectID string) error {
	return s.bulk(ctx, projectID, func(ctx context.Context, st *state, n Node) error {
		_, err := s.setStatusLocked(ctx, st, n.ID, Stopped)
		return err
	})
}

// SuspendAll suspends every node that can be; the others are left as they are.
func (s *Nodes) SuspendAll(ctx context.Context, projectID string) error {
	return s.bulk(ctx, projectID, func(ctx context.Context, st *state, n Node) error {
		if !isSuspendable(n.Type) {
			return nil
		}
		_, err := s.setStatusLocked(ctx, st, n.ID, Suspended)
		return err
	})
}

// ReloadAll restarts every node of a project.
func (s *Nodes) ReloadAll(ctx context.Context, projectID string) error {
	return s.bulk(ctx, projectID, func(ctx context.Context, st *state, n Node) error {
		if _, err := s.setStatusLocked(ctx, st, n.ID, Stopped); err != nil {
			return err
		}
		_, err := s.setStatusLocked(ctx, st, n.ID, Started)
		return err
	})
}

// bulk runs op on every node, bulkParallel at a time, each as a lifecycle
// operation of its own (so a change, a node deletion, waits only for
// those running), and returns the first error after all have run. A node
// deleted before its turn is skipped.
func (s *Nodes) bulk(ctx context.Context, projectID string, op func(context.Context, *state, Node) error) error {
	if _, err := s.core.opened(projectID); err != nil {
		return err
	}
	nodes, err := s.List(projectID)
	if err != nil {
		return err
	}
	var g errgroup.Group // no context: one failure does not stop the others
	g.SetLimit(bulkParallel)
	for _, n := range nodes {
		if n.Inert {
			continue // never runs (archive.go)
		}
		g.Go(func() error {
			st, unlock, err := s.core.lockLifecycle(projectID, n.ID)
			if err != nil {
				return err
			}
			defer unlock()
			if err := op(ctx, st, n); err != nil && !(errors.Is(err, ErrNotFound) && st.hasNotNode(n.ID)) {
				return err
			}
			return nil
		})
	}
	return g.Wait() // the first error
}

// hasNotNode reports whether the project no longer has a node.
func (st *state) hasNotNode(id string) bool {
	st.mu.RLock()
	defer st.mu.RUnlock()
	_, ok := st.nodes[id]
	return !ok
}

// NodeUpdate is a change to a node (PUT); nil members stay as they are.
type NodeUpdate struct {
	Name             *string
	X, Y, Z          *int
	Locked           *bool
	Symbol           *string
	Label            Label // nil: unchanged
	PortNameFormat   *string
	PortSegmentSize  *int
	FirstPortName    *string
	ConsoleAutoStart *bool
	// Properties are merged into the node's: the keys given replace theirs.
	Properties     map[string]any
	CustomAdapters []json.RawMessage // nil: unchanged
	// Console and ConsoleType may only repeat the current values: the
	// compute picks the console.
	Console     *int
	ConsoleType *string
}

// Update applies a change to a node and announces it: planned from
// the node as it is (planNodeUpdate: a refused change changes nothing),
// then carried out on its compute, then saved. A rename follows the naming
// rules, sets the label's text and resets its x (as GNS3).
func (s *Nodes) Update(ctx context.Context, projectID, nodeID string, u NodeUpdate) (_ Node, err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Node{}, err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	cur, err := st.nodeLocked(nodeID)
	names := make(map[string]bool, len(st.nodes))
	for _, n := range st.nodes {
		names[n.Name] = true
	}
	vars := st.p.Settings.Variables
	st.mu.RUnlock()
	if err != nil {
		return Node{}, err
	}
	// cur is read without st.mu below: only changes write a node, and
	// this one holds st.ops.
	plan, err := planNodeUpdate(*cur, u, nodePlanEnv{
		nameTaken: func(name string) bool { return names[name] },
		symbols:   s.core.cfg.Symbols,
		spec:      func(n *Node) (NodeSpec, error) { return s.nodeSpec(n, vars) },
	})
	if err != nil {
		return Node{}, err
	}
	next := plan.next
	if runs(cur) {
		// More RAM for a running node (counted as it runs) keeps its quotas.
		if more := ramOf(&next) - ramOf(cur); more > 0 {
			was := ramOf(cur)
			release, err := s.core.admit(claim{projectID: projectID, add: Usage{RAMMB: more}, done: func(st *state) bool {
				n := st.nodes[nodeID]
				return n == nil || !runs(n) || ramOf(n) != was
			}})
			if err != nil {
				return Node{}, err
			}
			defer release()
		}
	}
	if plan.respec != nil {
		rt, err := s.core.cfg.Computes.CreateNode(ctx, cur.ComputeID, cur.ProjectID, *plan.respec)
		if err != nil {
			return Node{}, err
		}
		next.applyRuntime(rt)
	}
	if reflect.DeepEqual(*cur, next) {
		return next, nil
	}
	if plan.ports != nil {
		if err := s.reconfigurePorts(ctx, st, cur, plan.ports); err != nil {
			return Node{}, err
		}
	}
	st.mu.Lock()
	prev := *cur
	*cur = next
	st.mu.Unlock()
	if err := s.core.save(st); err != nil {
		st.change(func() {
			*cur = prev
		})
		return Node{}, err
	}
	s.core.emit(st, NodeUpdated, &next, nil)
	s.warnNode(st, &next, &prev)
	return next, nil
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// reconfigurePorts applies a new ports_mapping on the node's compute. A
// switch keeps its ports and links when only types and VLANs change; any
// other change needs the node to have no link (its ports are rebuilt).
// st.ops must be held.
func (s *Nodes) reconfigurePorts(ctx context.Context, st *state, n *Node, ports []PortSpec) error {
	spec, err := s.nodeSpec(n, nil) // a switch, hub or cloud: no variables
	if err != nil {
		return err
	}
	spec.Ports = ports
	err = func() error {
		_, err := s.core.cfg.Computes.CreateNode(ctx, n.ComputeID, n.ProjectID, spec) // in place
		return err
	}()
	if err == nil || !errors.Is(err, ErrConflict) {
		return err
	}
	st.mu.RLock()
	linked := false
	for _, l := range st.links {
		linked = linked || l.touches(n.ID)
	}
	st.mu.RUnlock()
	if linked {
		return errorf(ErrConflict, "Delete the links of %s before changing the number of its ports", n.Name)
	}
	if err := s.core.cfg.Computes.DeleteNode(ctx, n.ComputeID, n.ProjectID, n.ID); err != nil && !isNotFound(err) {
		return err
	}
	_, err = s.core.cfg.Computes.CreateNode(ctx, n.ComputeID, n.ProjectID, spec)
	return err
}

// Delete deletes a node's links, then the node. A locked node stays.
func (s *Nodes) Delete(ctx context.Context, projectID, nodeID string) (err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	n, err := st.nodeLocked(nodeID)
	var node Node
	var links []string
	if err == nil {
		node = *n
		for _, id := range st.linkOrder {
			if st.links[id].touches(nodeID) {
				links = append(links, id)
			}
		}
	}
	st.mu.RUnlock()
	if err != nil {
		return err
	}
	if node.Locked {
		return errorf(ErrConflict, "Node %s cannot be deleted because it is locked", node.Name)
	}
	// The links go first; the project is saved once, for them and the
	// node, and announced after.
	var gone []Link
	for _, id := range links {
		old, err := s.links.removeLocked(ctx, st, id)
		if err != nil {
			s.core.log.Warn("delete link of deleted node", "link", id, "err", err) // GNS3 ignores these
			continue
		}
		gone = append(gone, old)
	}
	announce := func() {
		for _, old := range gone {
			s.links.emitGone(st, old)
		}
	}
	if err := s.core.deleteFromCompute(ctx, node); err != nil {
		if len(gone) > 0 {
			s.core.saveKept(st) // a failure is Unlock's too: this one answers
			announce()
		}
		return err
	}
	st.mu.Lock()
	delete(st.nodes, nodeID)
	st.nodeOrder = slices.DeleteFunc(st.nodeOrder, func(x string) bool { return x == nodeID })
	st.mu.Unlock()
	st.forgetLifecycle(nodeID)
	// Deleted on its compute: the node stays deleted if the save fails,
	// and the delete answers the failure.
	serr := s.core.saveKept(st)
	announce()
	s.core.emit(st, NodeDeleted, &node, nil)
	return serr
}

// ResetConsole disconnects every client of a started node's console (a
// stuck session); a node without a console is left as it is.
func (s *Nodes) ResetConsole(ctx context.Context, projectID, nodeID string) error {
	n, err := s.Get(projectID, nodeID)
	if err != nil {
		return err
	}
	if n.Status != Started || n.Console == 0 || n.ConsoleType != "telnet" {
		return nil
	}
	return s.core.cfg.Computes.ResetConsole(ctx, n.ComputeID, projectID, nodeID)
}

// ResetConsoles resets the console of every started node of a project.
func (s *Nodes) ResetConsoles(ctx context.Context, projectID string) error {
	nodes, err := s.List(projectID)
	if err != nil {
		return err
	}
	if p, _ := s.core.project(projectID); p.Status != Opened {
		return errNotOpened
	}
	var errs []error
	for _, n := range nodes {
		if err := s.ResetConsole(ctx, projectID, n.ID); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Duplicate copies a stopped node (switches, hubs and clouds may run)
// next to it: the same settings and the original's name through the
// naming rules, a new id and MAC, unlocked, at x, y, z; a VPCS's
// startup.vpc comes along. Links are not copied (GNS3).
func (s *Nodes) Duplicate(ctx context.Context, projectID, nodeID string, x, y, z int) (Node, error) {
	n, err := s.Get(projectID, nodeID)
	if err != nil {
		return Node{}, err
	}
	if n.Status != Stopped && !isAlwaysRunning(n.Type) {
		return Node{}, errorf(ErrConflict, "Cannot duplicate node data while the node is running")
	}
	nc := NewNodeCreate()
	nc.ComputeID, nc.Type, nc.Name, nc.TemplateID = n.ComputeID, n.Type, n.Name, n.TemplateID
	nc.Symbol, nc.X, nc.Y, nc.Z = n.Symbol, x, y, z
	nc.ConsoleAutoStart, nc.PortNameFormat, nc.PortSegmentSize = n.ConsoleAutoStart, n.PortNameFormat, n.PortSegmentSize
	nc.FirstPortName, nc.CustomAdapters, nc.ConsoleType = n.FirstPortName, n.CustomAdapters, n.ConsoleType
	// Everything the node's entry holds but what names this one node
	// (GNS3's list), members labtap does not model included.
	notCopied := func(k string) bool {
		return k == "mac_address" || k == "mac_addr" || k == "application_id" || k == "dynamips_id"
	}
	for k, v := range n.Properties {
		if !notCopied(k) {
			nc.Properties[k] = v
		}
	}
	nc.Extra = maps.Clone(n.Extra)
	maps.DeleteFunc(nc.Extra, func(k string, _ json.RawMessage) bool { return notCopied(k) })
	dup, err := s.Create(ctx, projectID, nc)
	if err != nil {
		return Node{}, err
	}
	// The node's files go with it: what it holds that labtap does not
	// model too (an agent without the copy route gets startup.vpc).
	if c, ok := s.core.cfg.Computes.(nodeCopier); ok {
		err = c.CopyNodeDir(ctx, n.ComputeID, projectID, nodeID, dup.ID)
	} else if n.Type == "vpcs" {
		var data []byte
		data, err = s.core.cfg.Computes.NodeFile(ctx, n.ComputeID, projectID, nodeID, "startup.vpc")
		if err == nil {
			err = s.core.cfg.Computes.WriteNodeFile(ctx, dup.ComputeID, projectID, dup.ID, "startup.vpc", data)
		} else if isNotFound(err) {
			err = nil
		}
	}
	if err != nil {
		if derr := s.Delete(context.WithoutCancel(ctx), projectID, dup.ID); derr != nil {
			s.core.log.Warn("remove a failed duplicate", "node", dup.ID, "err", derr)
		}
		return Node{}, err
	}
	return dup, nil
}
