package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// Agents calls the agents of a Registry's computes: it is what
// project.Service drives (project.Computes), and it serves the image, QEMU,
// metrics and capture stream routes. It only reads the registry, to find
// where each compute is and how to authorize to it; it holds no lock of
// its own but the open streams' count.
type Agents struct {
	reg     *Registry
	client  *Client
	log     *slog.Logger
	streams openStreams // capture streams open, per compute
}

var _ project.Computes = (*Agents)(nil)

// Exists reports whether a compute is registered.
func (a *Agents) Exists(id string) bool { return a.reg.Exists(id) }

// NodeTypes lists the node types a compute runs, as it last reported.
func (a *Agents) NodeTypes(id string) []string { return a.reg.NodeTypes(id) }

// do calls an agent by compute id.
func (a *Agents) do(ctx context.Context, computeID, method, path string, in, out any) error {
	t, err := a.reg.target(computeID)
	if err != nil {
		return err
	}
	return a.client.call(ctx, t, method, path, in, out)
}

// OpenProject opens a project on a compute.
func (a *Agents) OpenProject(ctx context.Context, computeID string, p project.ProjectRef) error {
	return a.do(ctx, computeID, "PUT", proto.ProjectPath(p.ID), proto.ProjectSpec{ProjectID: p.ID, Name: p.Name}, nil)
}

// HostInterface is one network interface of a compute's host, the agent's
// own type (GNS3's shape).
type HostInterface = proto.HostInterface

// Interfaces lists the network interfaces of a compute's host, sorted by
// name.
func (a *Agents) Interfaces(ctx context.Context, computeID string) ([]HostInterface, error) {
	list := []HostInterface{}
	if err := a.do(ctx, computeID, "GET", proto.InterfacesPath, nil, &list); err != nil {
		return nil, err
	}
	return list, nil
}

// DockerImages lists the image tags of a compute's Docker Engine.
func (a *Agents) DockerImages(ctx context.Context, computeID string) ([]string, error) {
	var images []proto.DockerImage
	if err := a.do(ctx, computeID, "GET", proto.DockerImagesPath, nil, &images); err != nil {
		return nil, err
	}
	tags := make([]string, 0, len(images))
	for _, im := range images {
		tags = append(tags, im.Image)
	}
	return tags, nil
}

// CloseProject closes a project on a compute.
func (a *Agents) CloseProject(ctx context.Context, computeID, projectID string) error {
	return a.do(ctx, computeID, "DELETE", proto.ProjectPath(projectID), nil, nil)
}

// CreateNode creates a node on a compute.
func (a *Agents) CreateNode(ctx context.Context, computeID, projectID string, n project.NodeSpec) (project.NodeRuntime, error) {
	var st proto.NodeState
	spec := proto.NodeSpec{NodeID: n.ID, NodeType: n.Type, Name: n.Name, MACIndex: n.MACIndex}
	for _, p := range n.Ports {
		spec.Ports = append(spec.Ports, proto.PortMapping{
			Name: p.Name, Type: p.Type, VLAN: p.VLAN, EtherType: p.EtherType, LocalPort: p.LocalPort, RemoteHost: p.RemoteHost, RemotePort: p.RemotePort, Interface: p.Interface,
		})
	}
	for _, a := range n.Adapters {
		spec.Adapters = append(spec.Adapters, proto.AdapterSpec{MACAddress: a.MACAddress, PortName: a.Name, AdapterType: a.AdapterType})
	}
	for _, v := range n.Variables {
		spec.Variables = append(spec.Variables, proto.Variable{Name: v.Name, Value: v.Value})
	}
	if n.Properties != nil {
		raw, err := json.Marshal(n.Properties)
		if err != nil {
			return project.NodeRuntime{}, fmt.Errorf("node %s properties: %w", n.ID, err)
		}
		spec.Properties = raw
	}
	err := a.do(ctx, computeID, "PUT", proto.NodePath(projectID, n.ID), spec, &st)
	return runtimeOf(st), err
}

// AdapterMACs is proto.AdapterMACs: the controller's ports and the
// agents' NICs share one MAC arithmetic (project.MACScheme).
func (a *Agents) AdapterMACs(nodeType, nodeID, base string, count int) ([]string, error) {
	return proto.AdapterMACs(nodeType, nodeID, base, count)
}

// SetNodeStatus starts or stops a node on a compute.
func (a *Agents) SetNodeStatus(ctx context.Context, computeID, projectID, nodeID, status string) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := a.do(ctx, computeID, "PUT", proto.NodeStatusPath(projectID, nodeID), proto.NodeStatusSpec{Status: status}, &st)
	return runtimeOf(st), err
}

// Node reports a node as a compute runs it now.
func (a *Agents) Node(ctx context.Context, computeID, projectID, nodeID string) (project.NodeRuntime, error) {
	var st proto.NodeState
	err := a.do(ctx, computeID, "GET", proto.NodePath(projectID, nodeID), nil, &st)
	return runtimeOf(st), err
}

// DeleteNode deletes a node on a compute.
func (a *Agents) DeleteNode(ctx context.Context, computeID, projectID, nodeID string) error {
	return a.do(ctx, computeID, "DELETE", proto.NodePath(projectID, nodeID), nil, nil)
}

func runtimeOf(st proto.NodeState) project.NodeRuntime {
	return project.NodeRuntime{
		Status: st.Status, Console: st.Console, ConsoleHost: st.ConsoleHost, ConsoleType: st.ConsoleType,
		CommandLine: st.CommandLine, NodeDirectory: st.NodeDirectory, Properties: st.Properties,
	}
}

// PutLink sets up or updates a link's relay on a compute.
func (a *Agents) PutLink(ctx context.Context, computeID, projectID string, w project.Wiring) error {
	end := func(e project.WireEnd) proto.Endpoint {
		ep := proto.Endpoint{NodeID: e.NodeID, Adapter: e.Adapter, Port: e.Port, Name: e.Name}
		if t := e.Tunnel; t != nil {
			ep.Tunnel = &proto.Tunnel{LocalPort: t.LocalPort, RemoteHost: t.RemoteHost, RemotePort: t.RemotePort}
		}
		return ep
	}
	f := w.Filters
	spec := proto.LinkSpec{
		LinkID: w.LinkID, A: end(w.A), B: end(w.B), Suspend: w.Suspend, DataLinkType: w.DataLinkType,
		Filters: proto.Filters{FrequencyDrop: f.FrequencyDrop, PacketLoss: f.PacketLoss, Corrupt: f.Corrupt, BPF: f.BPF},
	}
	if f.Delay != nil {
		spec.Filters.Delay = &proto.Delay{Latency: f.Delay[0], Jitter: f.Delay[1]}
	}
	return a.do(ctx, computeID, "PUT", proto.LinkPath(projectID, w.LinkID), spec, nil)
}

// CheckFilters has a compute compile bpf filter expressions (within its
// budget) without applying them.
func (a *Agents) CheckFilters(ctx context.Context, computeID, dataLinkType string, bpf []string) error {
	return a.do(ctx, computeID, "PUT", proto.FilterCheckPath, proto.FilterCheck{DataLinkType: dataLinkType, BPF: bpf}, nil)
}

// DeleteLink removes a link's relay on a compute.
func (a *Agents) DeleteLink(ctx context.Context, computeID, projectID, linkID string) error {
	return a.do(ctx, computeID, "DELETE", proto.LinkPath(projectID, linkID), nil, nil)
}

// StartCapture starts a capture on a compute's relay of a link.
func (a *Agents) StartCapture(ctx context.Context, computeID, projectID, linkID string, spec capspec.Spec) (capspec.State, error) {
	var st proto.CaptureState
	err := a.do(ctx, computeID, "PUT", proto.CapturePath(projectID, linkID), spec, &st)
	return st, err
}

// StopCapture stops a capture on a compute and returns its final state.
func (a *Agents) StopCapture(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error) {
	var st proto.CaptureState
	err := a.do(ctx, computeID, "DELETE", proto.CapturePath(projectID, linkID), nil, &st)
	return st, err
}

// CaptureState reports a running capture on a compute.
func (a *Agents) CaptureState(ctx context.Context, computeID, projectID, linkID string) (capspec.State, error) {
	var st proto.CaptureState
	err := a.do(ctx, computeID, "GET", proto.CapturePath(projectID, linkID), nil, &st)
	return st, err
}

// CaptureStream streams a running capture from a compute.
func (a *Agents) CaptureStream(ctx context.Context, computeID, projectID, linkID string) (io.ReadCloser, error) {
	t, err := a.reg.target(computeID)
	if err != nil {
		return nil, err
	}
	body, err := a.client.stream(ctx, t, proto.CaptureStreamPath(projectID, linkID))
	if err != nil {
		return nil, err
	}
	return a.streams.track(computeID, body), nil
}

// CaptureFile returns the file a running capture writes on a compute, as
// it is now (proto.CaptureFilePath).
func (a *Agents) CaptureFile(ctx context.Context, computeID, projectID, linkID string) (project.CaptureFile, error) {
	return a.captureFile(ctx, computeID, proto.CaptureFilePath(projectID, linkID))
}

// CaptureFiles lists the capture files of a project on every connected
// compute, each named by its compute; a compute that does not answer is
// left out and logged.
func (a *Agents) CaptureFiles(ctx context.Context, projectID string) []capspec.FileInfo {
	out := []capspec.FileInfo{}
	for _, c := range a.reg.List() {
		if !c.Connected {
			continue
		}
		var list []proto.CaptureFileInfo
		if err := a.do(ctx, c.ID, "GET", proto.CaptureFilesPath(projectID), nil, &list); err != nil {
			a.log.Warn("list a compute's capture files", "compute", c.ID, "project", projectID, "err", err)
			continue
		}
		for _, f := range list {
			if !capspec.ValidFileName(f.FileName) {
				continue // no name a client could ask for again
			}
			f.ComputeID = c.ID
			out = append(out, f)
		}
	}
	return out
}

// OpenCaptureFile returns a capture file of a project on a compute, by
// name: a stopped file whole, a running one up to its last whole record.
func (a *Agents) OpenCaptureFile(ctx context.Context, computeID, projectID, name string) (project.CaptureFile, error) {
	return a.captureFile(ctx, computeID, proto.CaptureFileNamePath(projectID, name))
}

// DeleteCaptureFile removes a stopped capture file of a project on a
// compute.
func (a *Agents) DeleteCaptureFile(ctx context.Context, computeID, projectID, name string) error {
	return a.do(ctx, computeID, "DELETE", proto.CaptureFileNamePath(projectID, name), nil, nil)
}

// captureFile gets a capture file from a compute's route path.
func (a *Agents) captureFile(ctx context.Context, computeID, path string) (project.CaptureFile, error) {
	t, err := a.reg.target(computeID)
	if err != nil {
		return project.CaptureFile{}, err
	}
	resp, err := a.client.get(ctx, t, path)
	if err != nil {
		return project.CaptureFile{}, err
	}
	_, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	name := params["filename"]
	if !capspec.ValidFileName(name) || resp.ContentLength < 0 {
		resp.Body.Close()
		return project.CaptureFile{}, &project.Error{Kind: project.ErrConflict,
			Msg: fmt.Sprintf("compute '%s' sent a capture file without a valid name or length", computeID)}
	}
	return project.CaptureFile{Name: name, Size: resp.ContentLength, Body: a.streams.track(computeID, resp.Body)}, nil
}

// Metrics returns a compute's metrics, Prometheus's text format as the
// agent serves them at proto.MetricsPath, at most 16 MiB of them. The
// caller closes the reader.
func (a *Agents) Metrics(ctx context.Context, computeID string) (io.ReadCloser, error) {
	t, err := a.reg.target(computeID)
	if err != nil {
		return nil, err
	}
	body, err := a.client.stream(ctx, t, proto.MetricsPath)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(body, 16<<20), body}, nil
}

// ReserveTunnelPort has a compute hold a UDP port for a tunnel end.
func (a *Agents) ReserveTunnelPort(ctx context.Context, computeID, projectID, id string) (int, error) {
	var tp proto.TunnelPort
	err := a.do(ctx, computeID, "PUT", proto.TunnelPortPath(projectID, id), nil, &tp)
	return tp.Port, err
}

// ReleaseTunnelPort frees a tunnel port no link took.
func (a *Agents) ReleaseTunnelPort(ctx context.Context, computeID, projectID, id string) error {
	return a.do(ctx, computeID, "DELETE", proto.TunnelPortPath(projectID, id), nil, nil)
}

// TunnelHost is the address other agents send a compute's tunnel traffic
// to: the host it was registered with (for the local compute, the address
// the controller advertises).
func (a *Agents) TunnelHost(computeID string) string {
	c, _ := a.reg.Get(computeID)
	return c.Host
}

// Running asks every connected compute what it still runs, for a
// controller that restarted (see project.Service.Adopt). Computes that do
// not answer are skipped: their projects open the ordinary way.
func (a *Agents) Running(ctx context.Context) []project.Running {
	var out []project.Running
	for _, c := range a.reg.List() {
		if c.Connected {
			out = append(out, a.runningOn(ctx, c.ID)...)
		}
	}
	return out
}

// runningOn asks one compute what it runs; nil if it does not answer.
func (a *Agents) runningOn(ctx context.Context, id string) []project.Running {
	var st proto.AgentState
	if err := a.do(ctx, id, "GET", proto.StatePath, nil, &st); err != nil {
		a.log.Warn("ask a compute what it runs", "compute", id, "err", err)
		return nil
	}
	var out []project.Running
	for _, p := range st.Projects {
		run := project.Running{ComputeID: id, ProjectID: p.ProjectID}
		for _, l := range p.Links {
			rl := project.RunningLink{ID: l.LinkID}
			for _, ep := range []proto.Endpoint{l.Spec.A, l.Spec.B} {
				if t := ep.Tunnel; t != nil {
					rl.Tunnel = &project.TunnelEnd{LocalPort: t.LocalPort, RemoteHost: t.RemoteHost, RemotePort: t.RemotePort}
				}
			}
			if l.Capture != nil && l.Capture.Active {
				rl.Capture = l.Capture
			}
			run.Links = append(run.Links, rl)
		}
		out = append(out, run)
	}
	return out
}

// NodeFile reads a file of a node's directory on its compute.
func (a *Agents) NodeFile(ctx context.Context, computeID, projectID, nodeID, name string) ([]byte, error) {
	var f proto.NodeFile
	if err := a.do(ctx, computeID, "GET", proto.NodeFilePath(projectID, nodeID, name), nil, &f); err != nil {
		return nil, err
	}
	return f.Content, nil
}

// WriteNodeFile replaces a file of a node's directory on its compute.
func (a *Agents) WriteNodeFile(ctx context.Context, computeID, projectID, nodeID, name string, data []byte) error {
	return a.do(ctx, computeID, "PUT", proto.NodeFilePath(projectID, nodeID, name), proto.NodeFile{Content: data}, nil)
}

// CopyNodeDir copies a node's directory into another node's of the same
// project on the same compute (a duplicate).
func (a *Agents) CopyNodeDir(ctx context.Context, computeID, projectID, fromID, toID string) error {
	return a.do(ctx, computeID, "POST", proto.NodeCopyPath(projectID, fromID), proto.NodeCopy{DestinationNodeID: toID}, nil)
}

// ResetConsole disconnects every client of a node's console.
func (a *Agents) ResetConsole(ctx context.Context, computeID, projectID, nodeID string) error {
	return a.do(ctx, computeID, "POST", proto.ConsoleResetPath(projectID, nodeID), nil, nil)
}

var _ project.Placer = (*Agents)(nil)

// Rooms lists what placement needs of every compute, in registration
// order: whether it answers, what it runs and its room as its agent last
// reported.
func (a *Agents) Rooms() []project.ComputeRoom {
	list := a.reg.List()
	out := make([]project.ComputeRoom, 0, len(list))
	for _, c := range list {
		r := project.ComputeRoom{ID: c.ID, Connected: c.Connected, NodeTypes: c.NodeTypes, Draining: c.Draining}
		if c.CPUPercent != nil {
			r.CPUPercent = *c.CPUPercent
		}
		if m := c.Capacity; m != nil {
			r.Room = &project.Room{CPUs: m.CPUs, MemoryTotal: m.MemoryTotal, MemoryAvailable: m.MemoryAvailable,
				DiskFree: m.DiskFree, Nodes: m.Nodes, NodesRunning: m.NodesRunning, KVM: m.KVM}
		}
		out = append(out, r)
	}
	return out
}

// Draining reports whether a compute takes no new nodes.
func (a *Agents) Draining(id string) bool {
	c, _ := a.reg.Get(id)
	return c.Draining
}

// ConsoleAccess tells a compute's agent who may connect to its node
// consoles (proto.ConsolesPath): its consoles gated or open, grants and
// revocations in one call. The call is idempotent, so retries are safe.
func (a *Agents) ConsoleAccess(ctx context.Context, computeID string, ca proto.ConsoleAccess) error {
	return a.do(ctx, computeID, "PUT", proto.ConsolesPath, ca, nil)
}
