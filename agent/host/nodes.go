package host

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/internal/confined"
	"github.com/labtap/labtap/proto"
)

// A project's nodes: what each node call does, on the project that owns
// the node.

// checkNode checks a node spec's id and type, and returns the factory of
// its runner (nil for a type built in).
func (ag *agentParts) checkNode(spec proto.NodeSpec) (RunnerFactory, error) {
	if err := checkID("node", spec.NodeID); err != nil {
		return nil, err
	}
	factory, ok := ag.runners[spec.NodeType]
	if !ok && !builtin(spec.NodeType) {
		return nil, proto.Errorf(proto.CodeInvalid, "node type %q is not supported by this agent", spec.NodeType)
	}
	return factory, nil
}

// createNode creates a node; creating an existing node returns it
// unchanged, but for a switch whose port types or VLANs changed, which are
// applied in place. factory builds it, unless its type is built in
// (checkNode).
func (p *project) createNode(ctx context.Context, spec proto.NodeSpec, factory RunnerFactory) (proto.NodeState, error) {
	err := p.lock()
	if err != nil {
		return proto.NodeState{}, err
	}
	if n, ok := p.nodes[spec.NodeID]; ok {
		if n.spec.NodeType != spec.NodeType {
			p.mu.Unlock()
			return proto.NodeState{}, proto.Errorf(proto.CodeConflict, "node %s exists with type %s", spec.NodeID, n.spec.NodeType)
		}
		if !builtin(spec.NodeType) {
			p.mu.Unlock()
			if err := p.updateRunner(ctx, n, spec); err != nil {
				return proto.NodeState{}, err
			}
			return p.ag.nodeState(n), nil
		}
		defer p.mu.Unlock()
		if err := reconfigure(n, spec); err != nil {
			return proto.NodeState{}, err
		}
		return p.ag.nodeState(n), nil
	}
	p.mu.Unlock()

	n := &hostNode{
		projectID: p.id,
		spec:      spec,
		dir:       filepath.Join(p.dir, "project-files", spec.NodeType, spec.NodeID),
	}
	if builtin(spec.NodeType) {
		err = p.ag.buildBuiltin(n)
	} else {
		err = p.buildRunner(ctx, n, factory)
	}
	if err != nil {
		return proto.NodeState{}, err
	}
	if spec.NodeType == "vpcs" {
		if err := writeStartupVPC(n.dir, spec.Name); err != nil {
			n.close()
			p.ag.log.Error("write startup.vpc", "node", spec.NodeID, "err", err)
			return proto.NodeState{}, proto.Errorf(proto.CodeInternal, "node %s: cannot write its startup.vpc", spec.NodeID)
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		n.close()
		return proto.NodeState{}, notOpen(p.id)
	}
	if other, ok := p.nodes[spec.NodeID]; ok { // created concurrently
		n.close()
		return p.ag.nodeState(other), nil
	}
	p.nodes[spec.NodeID] = n
	for _, np := range n.ports {
		if np.udp != nil {
			p.ag.relay.goServe(np.udp)
		}
	}
	return p.ag.nodeState(n), nil
}

// buildRunner makes a node run by a runner (an emulator process): one port
// per adapter (endpoint adapter i, port 0), each a socket facing the NIC
// of that adapter, unless the runner supplies its own (RelayPorter).
func (p *project) buildRunner(ctx context.Context, n *hostNode, factory RunnerFactory) error {
	addrs := make([]netip.AddrPort, adapterCount(n.spec))
	for i := range addrs {
		port, err := p.ag.relay.listenUDP(bridge.UDPConfig{Local: loopbackAny})
		if err != nil {
			n.close()
			return proto.Errorf(proto.CodeInternal, "node %s: %v", n.spec.NodeID, err)
		}
		n.ports = append(n.ports, &nodePort{port: port, udp: port})
		addrs[i] = port.LocalAddr()
	}
	env := RunnerEnv{
		ProjectID: n.projectID,
		Spec:      n.spec,
		Dir:       n.dir,
		Ports:     addrs,
		OnStop: func() {
			// A node may stop by itself, n.ops not held (and a stop asked
			// for holds it): the port list, which a PUT replaces, is
			// read under project.mu.
			p.mu.Lock()
			ports := slices.Clone(n.ports)
			p.mu.Unlock()
			syncPeer(n, ports)
			p.ag.nodeStopped(n)
		},
		Logger: p.ag.log.With("node", n.spec.NodeID),
	}
	if len(addrs) > 0 {
		env.Agent = addrs[0]
	}
	runner, err := factory(ctx, env)
	if err != nil {
		n.close()
		return asProtoError(err, proto.CodeConflict)
	}
	n.runner = runner
	n.setCarriers(p.ag.carriers)
	if rp, ok := runner.(RelayPorter); ok {
		for i, port := range rp.RelayPorts() {
			if port != nil && i < len(n.ports) {
				n.ports[i].udp.Close()
				n.ports[i] = &nodePort{port: port}
			}
		}
	}
	return nil
}

// updateRunner applies a changed spec to an existing runner node: its
// adapters (ports added or removed; a removed one must carry no link) and
// properties, which the runner takes if it is an Updater. A spec that
// changes nothing does nothing.
func (p *project) updateRunner(ctx context.Context, n *hostNode, spec proto.NodeSpec) error {
	n.ops.Lock()
	defer n.ops.Unlock()
	p.mu.Lock()
	same := reflect.DeepEqual(spec.Adapters, n.spec.Adapters) && len(spec.Properties) == 0 && spec.Name == n.spec.Name
	p.mu.Unlock()
	if same {
		return nil
	}
	u, ok := n.runner.(Updater)
	if !ok {
		if reflect.DeepEqual(spec.Adapters, n.spec.Adapters) {
			return nil // nothing the runner can take
		}
		return proto.Errorf(proto.CodeConflict, "node %s exists with other adapters; delete it to change them", spec.NodeID)
	}
	want := adapterCount(spec)
	p.mu.Lock()
	for i := want; i < len(n.ports); i++ {
		if l := n.ports[i].link; l != "" {
			p.mu.Unlock()
			return proto.Errorf(proto.CodeConflict, "adapter %d of node %s is used by link %s: delete the link first", i, spec.NodeID, l)
		}
	}
	p.mu.Unlock()
	var added []*nodePort
	for range max(0, want-len(n.ports)) {
		port, err := p.ag.relay.listenUDP(bridge.UDPConfig{Local: loopbackAny})
		if err != nil {
			for _, np := range added {
				np.udp.Close()
			}
			return proto.Errorf(proto.CodeInternal, "node %s: %v", spec.NodeID, err)
		}
		added = append(added, &nodePort{port: port, udp: port})
	}
	// The ports it keeps, then the new ones.
	p.mu.Lock()
	keep := min(want, len(n.ports))
	ports := append(slices.Clone(n.ports[:keep]), added...)
	p.mu.Unlock()
	addrs := make([]netip.AddrPort, len(ports))
	for i, np := range ports {
		if np.udp != nil {
			addrs[i] = np.udp.LocalAddr()
		}
	}
	if err := u.Update(ctx, spec, addrs); err != nil {
		for _, np := range added {
			np.udp.Close()
		}
		return asProtoError(err, proto.CodeConflict)
	}
	if rp, ok := n.runner.(RelayPorter); ok {
		// The runner's own ports for the adapters it has now (a docker
		// node's AF_PACKET ports), as buildRunner takes them.
		for i, port := range rp.RelayPorts() {
			if port == nil || i >= len(ports) || ports[i].port == port {
				continue
			}
			if ports[i].udp != nil {
				ports[i].udp.Close()
			}
			added = slices.DeleteFunc(added, func(np *nodePort) bool { return np == ports[i] })
			ports[i] = &nodePort{port: port}
		}
	}
	p.mu.Lock()
	for _, np := range n.ports[keep:] {
		if np.udp != nil {
			np.udp.Close()
		}
	}
	n.ports = ports
	n.spec.Adapters, n.spec.Name = spec.Adapters, spec.Name
	n.setCarriers(p.ag.carriers)
	p.mu.Unlock()
	for _, np := range added {
		p.ag.relay.goServe(np.udp)
	}
	syncPeer(n, n.ports)
	return nil
}

func (p *project) node(nodeID string) (*hostNode, error) {
	err := p.lock()
	if err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	n, ok := p.nodes[nodeID]
	if !ok {
		return nil, proto.Errorf(proto.CodeNotFound, "node %s does not exist on this agent", nodeID)
	}
	return n, nil
}

// setNodeStatus starts or stops a node and returns its new state. Asking
// for the status a node already has succeeds and changes nothing.
func (p *project) setNodeStatus(ctx context.Context, nodeID, status string) (proto.NodeState, error) {
	n, err := p.node(nodeID)
	if err != nil {
		return proto.NodeState{}, err
	}
	switch status {
	case proto.StatusStarted:
		n.ops.Lock()
		err := n.runner.Start(ctx)
		syncPeer(n, n.ports)
		n.ops.Unlock()
		if err != nil {
			return proto.NodeState{}, asProtoError(err, proto.CodeConflict)
		}
	case proto.StatusStopped:
		n.stop(ctx, p.ag.log)
		n.ops.Lock() // the port list is replaced under it
		syncPeer(n, n.ports)
		n.ops.Unlock()
	case proto.StatusSuspended:
		sr, ok := n.runner.(Suspender)
		if !ok {
			return proto.NodeState{}, proto.Errorf(proto.CodeConflict, "Suspend is not supported by %s nodes", n.spec.NodeType)
		}
		n.ops.Lock()
		err := sr.Suspend(ctx)
		n.ops.Unlock()
		if err != nil {
			return proto.NodeState{}, asProtoError(err, proto.CodeConflict)
		}
	default:
		return proto.NodeState{}, proto.Errorf(proto.CodeInvalid, "status %q: want %q or %q", status, proto.StatusStarted, proto.StatusStopped)
	}
	return p.ag.nodeState(n), nil
}

// deleteNode stops a node, removes the links on its ports and forgets it.
// Its directory stays. Deleting an unknown node does nothing.
func (p *project) deleteNode(ctx context.Context, nodeID string) error {
	err := p.lock()
	if err != nil {
		return err
	}
	n, ok := p.nodes[nodeID]
	var capturing []*hostCapture
	if ok {
		for _, np := range n.ports {
			if l, linked := p.links[np.link]; linked {
				if c := p.removeLinkLocked(l); c != nil {
					capturing = append(capturing, c)
				}
			}
		}
		delete(p.nodes, nodeID)
	}
	p.mu.Unlock()
	for _, c := range capturing {
		p.ag.captures.closeCapture(p, c)
	}
	if !ok {
		return nil
	}
	n.stop(ctx, p.ag.log)
	n.close()
	n.remove(ctx, p.ag.log)
	return nil
}

// readFile reads a regular file of a node's directory (confined to it):
// a link, FIFO or device a node's process made there is refused at once,
// and a read answers within confined.ReadTimeout.
func (n *hostNode) readFile(name string) ([]byte, error) {
	data, err := confined.Read(context.Background(), n.dir, name, proto.MaxNodeFile)
	return data, fileError(name, err)
}

// writeFile replaces a file of a node's directory (confined to it),
// atomically; a started VPCS reads startup.vpc at its next start.
func (n *hostNode) writeFile(name string, data []byte) error {
	if len(data) > proto.MaxNodeFile {
		return proto.Errorf(proto.CodeInvalid, "file over %d bytes", proto.MaxNodeFile)
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	return fileError(name, confined.Write(n.dir, name, data, 0o644))
}

// resetConsole disconnects every client of a node's console; a node
// without one is left as it is.
func (n *hostNode) resetConsole() error {
	if r, ok := n.runner.(consoleResetter); ok {
		r.ResetConsole()
	}
	return nil
}
