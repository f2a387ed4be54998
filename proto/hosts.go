package proto

import "time"

// This file holds the contract for links that cross agents, for agents that
// tell the controller what happens to them, and for a restarted controller
// finding what its agents still run (protocol version 3).

// TunnelPort is the reply of PUT /v1/projects/{project}/tunnel-ports/{id}:
// a UDP port the agent has bound and holds for a tunnel end. Asking again
// with the same id returns the same port; a LinkSpec whose tunnel endpoint
// names that LocalPort takes the socket over. DELETE on the same path
// releases a port no link took. An agent forgets a reservation no link has
// taken after a while (a controller that died mid-setup leaks nothing).
type TunnelPort struct {
	Port int `json:"port"`
}

// TunnelPortPath is the route of one tunnel port reservation.
func TunnelPortPath(project, id string) string {
	return ProjectPath(project) + "/tunnel-ports/" + id
}

// PingInterval is how often an agent's events stream carries a ping; a
// controller that hears nothing for three of them treats the agent as lost.
const PingInterval = 2 * time.Second

// EventsPath streams an agent's events: GET /v1/events answers JSON lines,
// first an Event of kind EventHello, then one Event per thing that happened
// to a node or a capture without being asked (a VPCS that died, a capture
// that ended because its disk filled). The stream never ends on its own;
// the controller reads a broken stream as a lost agent.
const EventsPath = "/v1/events"

// Event kinds.
const (
	EventHello          = "hello"           // first line: the agent's info
	EventPing           = "ping"            // every PingInterval, with the agent's info: silence means trouble
	EventNodeStatus     = "node.status"     // a node's status changed by itself
	EventCaptureEnded   = "capture.ended"   // a capture ended without a stop request (a failure, or a limit)
	EventCaptureRotated = "capture.rotated" // a capture's next file began (a ring of files)
	EventNodeWarning    = "node.warning"    // something users of a node should read (Message)
)

// Event is one line of the events stream.
type Event struct {
	Kind      string        `json:"kind"`
	ProjectID string        `json:"project_id,omitempty"`
	NodeID    string        `json:"node_id,omitempty"`
	LinkID    string        `json:"link_id,omitempty"`
	Node      *NodeState    `json:"node,omitempty"`
	Capture   *CaptureState `json:"capture,omitempty"`
	Info      *AgentInfo    `json:"info,omitempty"`
	// Message is the words of an EventNodeWarning.
	Message string `json:"message,omitempty"`
}

// StatePath is GET /v1/state: everything the agent runs, for a controller
// that restarted and must find its running labs and captures again.
const StatePath = "/v1/state"

// AgentState is the reply of StatePath.
type AgentState struct {
	Projects []ProjectState `json:"projects"`
}

// ProjectState is one project open on an agent.
type ProjectState struct {
	ProjectID string       `json:"project_id"`
	Nodes     []NodeState  `json:"nodes"`
	Links     []LinkStatus `json:"links"`
}

// LinkStatus is one link relay on an agent: its spec (tunnel ends
// included, so a controller adopts the relay as it is) and its capture,
// if running.
type LinkStatus struct {
	LinkID  string        `json:"link_id"`
	Spec    LinkSpec      `json:"spec"`
	Capture *CaptureState `json:"capture,omitempty"`
}

// MetricsPath is GET /metrics: the agent's metrics in Prometheus's text
// format (behind the shared secret, as every agent route).
const MetricsPath = "/metrics"
