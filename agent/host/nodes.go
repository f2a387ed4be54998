package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/confined"
	"github.com/labtap/labtap/proto"
)

// A project's nodes: the node as the agent holds it (hostNode), the calls
// on one node, and those that change which nodes a project has, on the
// project that owns them.

// hostNode is one node of a project: its spec, its runner and the ports
// the relay sees.
type hostNode struct {
	projectID string
	spec      proto.NodeSpec
	dir       string
	runner    node.Runner
	ports     []*nodePort    // see portIndex; replaced with both ops and project.mu held
	sw        *bridge.Switch // the switch or hub the agent runs for this node, nil if none
	ops       sync.Mutex     // serialises start, stop and update (see projects.go)
}

// nodePort is one port of a node, as the relay sees it.
type nodePort struct {
	port bridge.Port
	udp  *bridge.UDPPort // the port's socket, when it is one: served and closed by the host
	// pkt is a cloud's ethernet port, closed by the host, and release
	// gives its interface back once it is closed.
	pkt     *bridge.PacketPort
	release func()
	link    string // the link using the port, "" if none; guarded by project.mu
	// carrier sets the NIC's carrier, for runners that are LinkSetters.
	carrier *carrier
}

// adapters reports whether the node's ports are adapters (endpoint
// adapter i, port 0), as every runner node's are, or the ports of adapter
// 0 (endpoint 0/i), as the cloud's, hub's and switch's.
func (n *hostNode) adapters() bool { return !builtin(n.spec.NodeType) }

// portIndex returns the index in n.ports of link endpoint adapter/port,
// -1 if the node has no such port.
func (n *hostNode) portIndex(adapter, port int) int {
	i := port
	if n.adapters() {
		if port != 0 {
			return -1
		}
		i = adapter
	} else if adapter != 0 {
		return -1
	}
	if i < 0 || i >= len(n.ports) {
		return -1
	}
	return i
}

// setCarriers gives the node's ports a carrier when its runner is a
// LinkSetter, their goroutines owned by owner. Ports that carry no link
// are down.
func (n *hostNode) setCarriers(owner *sync.WaitGroup) {
	ls, ok := n.runner.(LinkSetter)
	if !ok {
		return
	}
	for i, np := range n.ports {
		if np.carrier == nil {
			np.carrier = &carrier{set: func(up bool) error { return ls.SetLink(i, up) }, owner: owner}
			if np.link == "" {
				np.carrier.request(false)
			}
		}
	}
}

// adapterCount is how many ports a runner node's spec asks for: one per
// adapter, or one for a node type without adapters (VPCS).
func adapterCount(spec proto.NodeSpec) int {
	if spec.Adapters == nil {
		return 1
	}
	return len(spec.Adapters)
}

// close releases what the node holds in the agent: its sockets and its
// switch. The runner must be stopped first.
func (n *hostNode) close() {
	for _, p := range n.ports {
		if p.udp != nil {
			p.udp.Close()
		}
		if p.pkt != nil {
			p.pkt.Close()
			p.release()
		}
	}
	if n.sw != nil {
		n.sw.Close()
	}
}

// stopNodes stops the nodes of a closed project, and closes their ports.
func stopNodes(ctx context.Context, nodes []*hostNode, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if po, ok := n.runner.(PowerOffer); ok { // no waiting for guests at close
				n.ops.Lock()
				if err := po.PowerOff(ctx); err != nil {
					log.Warn("power off node", "node", n.spec.NodeID, "err", err)
				}
				n.ops.Unlock()
			} else {
				n.stop(ctx, log)
			}
			n.close()
			n.remove(ctx, log)
		})
	}
	wg.Wait()
}

// stop stops the node's runner.
func (n *hostNode) stop(ctx context.Context, log *slog.Logger) {
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := n.runner.Stop(ctx); err != nil {
		log.Warn("stop node", "node", n.spec.NodeID, "err", err)
	}
}

// remove removes what a forgotten node's runner made outside the agent.
func (n *hostNode) remove(ctx context.Context, log *slog.Logger) {
	if r, ok := n.runner.(Remover); ok {
		if err := r.Remove(ctx); err != nil {
			log.Warn("remove node", "node", n.spec.NodeID, "err", err)
		}
	}
}

// syncPeer points the node's ports (n.ports, read under n.ops or
// project.mu) at where the node receives each adapter's frames now: its
// NICs while it runs, nowhere while it is stopped. It is called after
// every start and stop, in any order, and always converges.
func syncPeer(n *hostNode, ports []*nodePort) {
	if n.runner == nil || builtin(n.spec.NodeType) {
		return
	}
	for i, np := range ports {
		if np.udp == nil {
			continue // the runner's own port
		}
		nic, _ := n.runner.NIC(i, 0) // invalid when stopped: frames are dropped
		np.udp.SetPeer(nic)
	}
}

// writeStartupVPC gives a new VPCS the startup.vpc GNS3 writes, which
// names the PC, unless it has one (a node created again, an imported or
// copied node, a user's edit). Clients' config editors open it; VPCS runs
// it at start.
func writeStartupVPC(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile("startup.vpc", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// One word of printable ASCII, as VPCS takes a name.
	word := strings.Map(func(r rune) rune {
		if r > ' ' && r < 0x7f {
			return r
		}
		return -1
	}, name)
	_, err = fmt.Fprintf(f, "set pcname %s\n", word)
	return errors.Join(err, f.Close())
}

// fileError words a node file failure for the client, naming the file as
// the client did, never the agent's paths.
func fileError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return proto.Errorf(proto.CodeNotFound, "File %s doesn't exist", name)
	case errors.Is(err, confined.ErrIsDir):
		return proto.Errorf(proto.CodeInvalid, "%s is a directory", name)
	case errors.Is(err, confined.ErrTooLarge):
		return proto.Errorf(proto.CodeInvalid, "File %s is over %d bytes", name, proto.MaxNodeFile)
	case errors.Is(err, confined.ErrNotRegular):
		return proto.Errorf(proto.CodeConflict, "%s is not a regular file", name)
	case errors.Is(err, confined.ErrTimeout):
		return proto.Errorf(proto.CodeConflict, "File %s could not be read in time", name)
	case errors.Is(err, confined.ErrBadPath):
		return proto.Errorf(proto.CodeInvalid, "Invalid file path %q", name)
	}
	return proto.Errorf(proto.CodeConflict, "Cannot access %s: outside the node's directory or unreadable", name)
}

func (ag *agentParts) nodeState(n *hostNode) proto.NodeState {
	console, kind := n.runner.Console()
	var props map[string]any
	if pr, ok := n.runner.(PropertyReporter); ok {
		props = pr.Properties()
	}
	return proto.NodeState{
		Properties:    props,
		NodeID:        n.spec.NodeID,
		Status:        n.runner.Status(),
		Console:       console,
		ConsoleHost:   ag.cfg.ConsoleHost,
		ConsoleType:   kind,
		CommandLine:   n.runner.CommandLine(),
		NodeDirectory: n.dir,
	}
}

// consoleResetter is a runner whose console can drop its clients.
type consoleResetter interface {
	ResetConsole()
}

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
