// Package proto is the wire contract between the labtap controller and its
// agents: the JSON bodies of the agent's HTTP API, its route paths and its
// error shape. It depends on the standard library and the capture
// vocabulary (capspec, itself standard library only), so both sides (and
// third-party tools) can import it without pulling in either program.
//
// Every agent route lives under /v1. Every non-2xx reply carries an [Error]
// body whose Code is stable and meant to be switched on; its Message is for
// people and is passed through to API users unchanged.
package proto

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/labtap/labtap/capspec"
)

// Version is the controller⇄agent protocol version. It only ever goes up, and
// an agent reports it in [AgentInfo] so a controller can refuse an agent it
// cannot speak to.
//
// History:
//   - 1: projects, VPCS nodes, same-agent links, captures and capture streams.
//   - 2: multi-port nodes (cloud UDP ports, ethernet_switch, ethernet_hub)
//     through NodeSpec.Ports; link filters; pcapng captures.
//   - 3: emulator nodes with adapters (docker, qemu): NodeSpec.Properties
//     and NodeSpec.Adapters, one port per adapter (link endpoint adapter
//     i, port 0), NodeState.Properties.
//   - 4: the capture vocabulary (capspec): CaptureSpec is capspec.Spec,
//     named as the controller's start_capture body (capture_file_name,
//     capture_format, capture_filter, capture_max_bytes, ...), and
//     CaptureState carries the spec and filtered/files/limit; the
//     capture.rotated event.
const Version = 4

// SecretHeader carries the shared secret on every controller→agent call.
// An agent configured with a secret refuses calls without the right one.
const SecretHeader = "X-Labtap-Secret"

// Code classifies an agent error. Values are stable wire data.
type Code string

// The codes an agent replies with, and the HTTP status each travels with.
const (
	CodeInvalid      Code = "invalid"      // 400: the request is malformed or out of range
	CodeUnauthorized Code = "unauthorized" // 401: missing or wrong shared secret
	CodeForbidden    Code = "forbidden"    // 403: a path outside what the agent may touch
	CodeNotFound     Code = "not_found"    // 404: no such project, node, link or capture
	CodeConflict     Code = "conflict"     // 409: the request clashes with the current state
	CodeInternal     Code = "internal"     // 500: the agent failed
	CodeUnavailable  Code = "unavailable"  // 503: the agent is shutting down
)

// Error is the body of every non-2xx agent reply.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Status returns the HTTP status that carries an error of this code.
func (c Code) Status() int {
	switch c {
	case CodeInvalid:
		return 400
	case CodeUnauthorized:
		return 401
	case CodeForbidden:
		return 403
	case CodeNotFound:
		return 404
	case CodeConflict:
		return 409
	case CodeUnavailable:
		return 503
	}
	return 500
}

// AgentInfo describes an agent: GET /v1/info.
type AgentInfo struct {
	ComputeID       string   `json:"compute_id"`
	ProtocolVersion int      `json:"protocol_version"`
	SoftwareVersion string   `json:"software_version"`
	Platform        string   `json:"platform"`
	NodeTypes       []string `json:"node_types"`
	// Unavailable names node types labtap has that this agent cannot run,
	// and why (e.g. docker without an Engine or without root).
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// CPUPercent and MemoryPercent are the host's load, 0-100.
	CPUPercent    float64 `json:"cpu_usage_percent"`
	MemoryPercent float64 `json:"memory_usage_percent"`
}

// ProjectSpec opens a project on an agent: PUT /v1/projects/{project}.
// The agent keeps the project's files in its own data directory.
type ProjectSpec struct {
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
}

// NodeSpec creates a node on an agent: PUT /v1/projects/{project}/nodes/{node}.
// Creating a node that exists already is not an error; the reply describes
// the existing node.
type NodeSpec struct {
	NodeID   string `json:"node_id"`
	NodeType string `json:"node_type"`
	Name     string `json:"name"`
	// MACIndex is the last byte of the node's first MAC address. The
	// controller hands them out per project, so nodes on different agents of
	// one project never share a MAC.
	MACIndex int `json:"mac_index"`
	// Ports describes the ports of node types whose ports are configured
	// (GNS3's "ports_mapping"): cloud, ethernet_switch, ethernet_hub. A
	// link endpoint (adapter 0, port i) is Ports[i]. Empty for VPCS.
	Ports []PortMapping `json:"ports,omitempty"`
	// Properties are the node's type-specific GNS3 properties as the
	// controller holds them (docker, qemu): all of them on creation, the
	// changed ones when an existing node is updated.
	Properties json.RawMessage `json:"properties,omitempty"`
	// Adapters are the network adapters of an emulator node with adapters
	// (docker, qemu); link endpoint (adapter i, port 0) is Adapters[i].
	Adapters []AdapterSpec `json:"adapters,omitempty"`
	// Variables are the project's variables (GNS3's project "variables"),
	// which a docker node puts into its environment and substitutes for
	// ${name} there. Older controllers send none.
	Variables []Variable `json:"variables,omitempty"`
}

// Variable is one project variable.
type Variable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AdapterSpec is one network adapter of an emulator node.
type AdapterSpec struct {
	// MACAddress is the adapter's MAC, as AdapterMACs computes it.
	MACAddress string `json:"mac_address"`
	// PortName is the port's name as the controller shows it (Ethernet0, eth1).
	PortName string `json:"port_name"`
	// AdapterType is the emulated NIC model (qemu: e1000, virtio-net-pci, ...).
	AdapterType string `json:"adapter_type,omitempty"`
}

// Port mapping types.
const (
	PortUDP    = "udp"    // cloud: a UDP tunnel to something outside the lab
	PortAccess = "access" // switch: untagged, in VLAN
	PortDot1Q  = "dot1q"  // switch: 802.1Q trunk, VLAN is the native one
	PortQinQ   = "qinq"   // switch: 802.1Q tunnel, VLAN is the outer one
	PortHub    = ""       // hub ports have no type
)

// PortMapping is one port of a cloud, switch or hub, as GNS3's
// ports_mapping entries describe them.
type PortMapping struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	// VLAN is an access port's VLAN, a trunk's native VLAN or a tunnel's
	// outer VLAN (switch), 1 to 4094; 0 (omitted) means 1, GNS3's default.
	VLAN int `json:"vlan,omitempty"`
	// EtherType is a tunnel (qinq) port's outer tag type: 0x8100 (0,
	// omitted, means it), 0x88a8, 0x9100 or 0x9200.
	EtherType int `json:"ethertype,omitempty"`
	// LocalPort, RemoteHost and RemotePort make a cloud's UDP port: frames
	// from the lab are sent to RemoteHost:RemotePort, from LocalPort.
	LocalPort  int    `json:"lport,omitempty"`
	RemoteHost string `json:"rhost,omitempty"`
	RemotePort int    `json:"rport,omitempty"`
}

// Node statuses, as GNS3 names them.
const (
	StatusStarted   = "started"
	StatusStopped   = "stopped"
	StatusSuspended = "suspended"
)

// NodeState is what an agent knows of a node: the reply of every node route.
type NodeState struct {
	NodeID string `json:"node_id"`
	// Status is StatusStarted, StatusStopped or StatusSuspended.
	Status string `json:"status"`
	// Console is the TCP port of the node's console, 0 when it has none.
	Console     int    `json:"console"`
	ConsoleHost string `json:"console_host"`
	// ConsoleType is "telnet", "none", ... (GNS3's values).
	ConsoleType   string `json:"console_type"`
	CommandLine   string `json:"command_line"`
	NodeDirectory string `json:"node_directory"`
	// Properties are what the agent computed of a node with properties
	// (container_id, aux, mac_address, ...); the controller merges them
	// into the node's properties as GNS3 does.
	Properties map[string]any `json:"properties,omitempty"`
}

// NodeStatusSpec changes a node's status: PUT /v1/projects/{project}/nodes/{node}/status.
// It is idempotent: starting a started node succeeds and changes nothing.
type NodeStatusSpec struct {
	Status string `json:"status"`
}

// Endpoint is one end of a link on an agent: either a port of a node that
// this agent runs, or a UDP tunnel to another agent.
type Endpoint struct {
	NodeID  string  `json:"node_id,omitempty"`
	Adapter int     `json:"adapter_number"`
	Port    int     `json:"port_number"`
	Tunnel  *Tunnel `json:"tunnel,omitempty"`
	// Name labels the frames this endpoint sends in a pcapng capture,
	// e.g. "PC1 Ethernet0".
	Name string `json:"name,omitempty"`
}

// Tunnel is a UDP tunnel end: frames are received on LocalPort and sent to
// RemoteHost:RemotePort, one frame per datagram, from LocalPort.
type Tunnel struct {
	LocalPort  int    `json:"local_port"`
	RemoteHost string `json:"remote_host"`
	RemotePort int    `json:"remote_port"`
}

// Filters are the active filters of a link, already validated by the
// controller. A nil field is a filter that is off.
type Filters struct {
	// FrequencyDrop drops every Nth frame; -1 drops every frame.
	FrequencyDrop *int `json:"frequency_drop,omitempty"`
	// PacketLoss is the percentage (0-100) of frames dropped at random.
	PacketLoss *int `json:"packet_loss,omitempty"`
	// Delay is the added latency in milliseconds and its +/- jitter.
	Delay *Delay `json:"delay,omitempty"`
	// Corrupt is the percentage (0-100) of frames corrupted at random.
	Corrupt *int `json:"corrupt,omitempty"`
	// BPF lists tcpdump expressions; a frame matching any one is dropped.
	BPF []string `json:"bpf,omitempty"`
}

// Delay is the delay filter's parameters, in milliseconds.
type Delay struct {
	Latency int `json:"latency"`
	Jitter  int `json:"jitter"`
}

// LinkSpec creates or updates the relay of a link on an agent:
// PUT /v1/projects/{project}/links/{link}. Sending the same spec again is
// harmless; sending new Filters or Suspend swaps them in atomically. GET on
// the same path returns the relay's [LinkState].
type LinkSpec struct {
	LinkID  string   `json:"link_id"`
	A       Endpoint `json:"a"`
	B       Endpoint `json:"b"`
	Filters Filters  `json:"filters"`
	// Suspend drops every frame, in both directions, while true.
	Suspend bool `json:"suspend"`
	// DataLinkType is the link's DLT_ name, used to compile BPF filters.
	DataLinkType string `json:"data_link_type,omitempty"`
}

// LinkState describes a link's relay on an agent: the reply of
// GET /v1/projects/{project}/links/{link}. Counters start at 0 when the link
// is created and only go up (but Delayed).
type LinkState struct {
	LinkID string `json:"link_id"`
	// Directions count frames per direction: [0] from A to B, [1] from B to A.
	Directions [2]LinkCounters `json:"directions"`
	// Ends describe the link's two ends, [0] A and [1] B.
	Ends [2]LinkEnd `json:"ends"`
}

// LinkCounters count the frames of one direction of a link's relay.
type LinkCounters struct {
	// Received frames entered the relay; Forwarded left it (and were
	// captured, when capturing).
	Received  uint64 `json:"received"`
	Forwarded uint64 `json:"forwarded"`
	// Filtered frames were dropped by suspend or a filter.
	Filtered uint64 `json:"filtered"`
	// Delayed frames are in the delay line now; DelayDrops found it full.
	Delayed    int64  `json:"delayed"`
	DelayDrops uint64 `json:"delay_drops"`
	// SendErrors could not be sent (peer not listening yet, ...).
	SendErrors uint64 `json:"send_errors"`
}

// LinkEnd describes one end of a link's relay on the agent: a UDP socket
// (facing a node's emulator, a cloud's remote end or another agent) or a
// port of a switch or hub the agent runs.
type LinkEnd struct {
	// Kind is "udp" or "internal".
	Kind string `json:"kind"`
	// LocalPort is the UDP port of a "udp" end.
	LocalPort int `json:"local_port,omitempty"`
	// RecvBuffer and SendBuffer are the socket buffers the kernel granted,
	// as getsockopt reports them (Linux reports twice the usable size).
	RecvBuffer int `json:"recv_buffer,omitempty"`
	SendBuffer int `json:"send_buffer,omitempty"`
	// GSO tells whether the end sends runs of frames with UDP segmentation
	// offload.
	GSO bool `json:"gso,omitempty"`
	// GRO tells whether the end takes runs a peer sent with GSO in one
	// piece; GRORuns counts the runs it took so.
	GRO     bool   `json:"gro,omitempty"`
	GRORuns uint64 `json:"gro_runs,omitempty"`
	// Strays are datagrams from an address other than the end's peer,
	// dropped; RxErrors and TxErrors count failed socket calls.
	Strays   uint64 `json:"strays,omitempty"`
	RxErrors uint64 `json:"rx_errors,omitempty"`
	TxErrors uint64 `json:"tx_errors,omitempty"`
}

// CaptureSpec starts a capture on a link's relay:
// PUT /v1/projects/{project}/links/{link}/capture. It is the capture
// vocabulary's Spec (package capspec), the same type the controller's API
// decodes: the agent checks it again (Spec.Check), as its trust boundary.
// Sending the spec of the running capture again succeeds and changes
// nothing; a different spec while capturing is a conflict.
type CaptureSpec = capspec.Spec

// CaptureState describes a link's capture: the reply of the capture routes.
type CaptureState = capspec.State

// FilterCheck asks an agent to compile bpf filter expressions for a data
// link type, within its budget, without applying them (PUT FilterCheckPath).
// The agent keeps the programs, so a PutLink with them that follows does
// not compile again. A bad or too complex filter is CodeInvalid.
type FilterCheck struct {
	DataLinkType string   `json:"data_link_type"`
	BPF          []string `json:"bpf"`
}

// FilterCheckPath is the route of [FilterCheck].
const FilterCheckPath = "/v1/filter-check"

// StatisticsPath is the route of [Statistics].
const StatisticsPath = "/v1/statistics"

// Statistics are an agent host's figures, in GNS3's compute statistics
// shape: percentages as integers, sizes in bytes.
type Statistics struct {
	CPUPercent     int   `json:"cpu_usage_percent"`
	DiskPercent    int   `json:"disk_usage_percent"`
	LoadAvgPercent []int `json:"load_average_percent"`
	MemoryFree     int64 `json:"memory_free"`
	MemoryTotal    int64 `json:"memory_total"`
	MemoryPercent  int   `json:"memory_usage_percent"`
	MemoryUsed     int64 `json:"memory_used"`
	SwapFree       int64 `json:"swap_free"`
	SwapTotal      int64 `json:"swap_total"`
	SwapPercent    int   `json:"swap_usage_percent"`
	SwapUsed       int64 `json:"swap_used"`
}

// InfoPath is the route of [AgentInfo].
const InfoPath = "/v1/info"

// DockerImagesPath lists the image tags of the agent's Docker Engine: a
// JSON array of [DockerImage].
const DockerImagesPath = "/v1/docker/images"

// DockerImage is one image tag of an agent's Docker Engine (GNS3's shape).
type DockerImage struct {
	Image string `json:"image"`
}

// ProjectPath is the route of a project on an agent.
func ProjectPath(project string) string {
	return "/v1/projects/" + url.PathEscape(project)
}

// NodePath is the route of a node on an agent.
func NodePath(project, node string) string {
	return ProjectPath(project) + "/nodes/" + url.PathEscape(node)
}

// NodeStatusPath is the route that starts and stops a node.
func NodeStatusPath(project, node string) string {
	return NodePath(project, node) + "/status"
}

// LinkPath is the route of a link's relay on an agent.
func LinkPath(project, link string) string {
	return ProjectPath(project) + "/links/" + url.PathEscape(link)
}

// CapturePath is the route of a link's capture on an agent.
func CapturePath(project, link string) string {
	return LinkPath(project, link) + "/capture"
}

// CaptureStreamPath is the route that streams a link's capture file as it
// grows: the whole file from its first byte, then each record as it is
// written, ending when the capture stops.
func CaptureStreamPath(project, link string) string {
	return CapturePath(project, link) + "/pcap"
}

// CaptureFilePath is the route that sends a running capture's file as it
// is now (for a ring, the file being written): up to its last whole
// record, with Content-Length, and its name in Content-Disposition.
func CaptureFilePath(project, link string) string {
	return CapturePath(project, link) + "/file"
}

// CaptureFilesPath lists the capture files of a project's captures folder
// (GET, a []CaptureFileInfo), whether the project is open on the agent or
// not: running, stopped and ring files.
func CaptureFilesPath(project string) string {
	return ProjectPath(project) + "/captures"
}

// CaptureFileNamePath is one file of a project's captures folder, by its
// name (capspec.ValidFileName): GET sends it (a running capture's file up
// to its last whole record, with Content-Length and Content-Disposition),
// DELETE removes it (a conflict while a capture writes it).
func CaptureFileNamePath(project, name string) string {
	return CaptureFilesPath(project) + "/" + url.PathEscape(name)
}

// CaptureFileInfo is one file of a project's captures folder.
type CaptureFileInfo = capspec.FileInfo

// Errorf builds an Error of the given code.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MaxNodeFile bounds a file of a node's directory read or written through
// the agent (a VPCS startup.vpc, a configuration).
const MaxNodeFile = 512 << 10

// NodeFile is the content of a file of a node's directory.
type NodeFile struct {
	Content []byte `json:"content"`
}

// NodeFilePath is the route of a file of a node's directory; name is
// relative to it ("startup.vpc").
func NodeFilePath(project, node, name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return NodePath(project, node) + "/files/" + strings.Join(parts, "/")
}

// ConsolePath is the route that connects to a started node's telnet
// console: a GET with "Upgrade: "+ConsoleUpgrade, answered 101, after
// which the connection carries the console's bytes both ways.
func ConsolePath(project, node string) string {
	return NodePath(project, node) + "/console"
}

// ConsoleUpgrade is the protocol ConsolePath switches to.
const ConsoleUpgrade = "labtap-console"

// NodeCopyPath is the route that copies a node's directory into another
// node's (body NodeCopy).
func NodeCopyPath(project, node string) string {
	return NodePath(project, node) + "/copy"
}

// NodeCopy names the node whose directory receives the copy.
type NodeCopy struct {
	DestinationNodeID string `json:"destination_node_id"`
}

// ConsoleResetPath is the route that disconnects every client of a node's
// console (a stuck session); the console keeps listening.
func ConsoleResetPath(project, node string) string {
	return NodePath(project, node) + "/console/reset"
}

// InterfacesPath lists the network interfaces of the agent's host: a JSON
// array of [HostInterface], sorted by name.
const InterfacesPath = "/v1/network/interfaces"

// HostInterface is one network interface of an agent's host, in GNS3's
// shape (its cloud node dialog lists them). IPAddress and Netmask are the
// interface's first IPv4 address, empty without one. Type is "tap" for a
// TAP device, else "ethernet". Special marks what a user rarely wants to
// bridge a lab to: loopback, virtual bridges and the veths of containers
// (the GUI hides them unless asked).
type HostInterface struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	IPAddress  string `json:"ip_address"`
	Netmask    string `json:"netmask"`
	MACAddress string `json:"mac_address"`
	Type       string `json:"type"`
	Special    bool   `json:"special"`
}
