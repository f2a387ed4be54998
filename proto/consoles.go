package proto

// ConsolesPath is PUT /v1/consoles (a ConsoleAccess, answered 204): who
// may connect to the agent's node consoles. The controller closes the
// agent's consoles (Gated) when its users are to reach only the consoles
// they are allowed, and grants each node's console to the client address
// of a user allowed it, for a while, renewing the grant while the user
// keeps reading the node; it revokes a grant when the access is taken
// away, which also ends that client's open connections to the console.
// Grants and revocations are batched: one call per agent carries many.
const ConsolesPath = "/v1/consoles"

// MaxConsoleGrants bounds the grants and revocations of one ConsoleAccess.
const MaxConsoleGrants = 4096

// MaxConsoleGrantTTL bounds a grant's TTLSeconds (a day).
const MaxConsoleGrantTTL = 24 * 60 * 60

// ConsoleAccess is the body of PUT ConsolesPath.
type ConsoleAccess struct {
	// Gated (required) closes the consoles to every address not granted;
	// false opens them to everyone (grants are kept for when they close
	// again).
	Gated  *bool          `json:"gated"`
	Grants []ConsoleGrant `json:"grants,omitempty"`
	Revoke []ConsoleGrant `json:"revoke,omitempty"`
}

// ConsoleGrant lets Address (an IP address, v4 or v6) connect to the
// consoles of one node for TTLSeconds (1 to MaxConsoleGrantTTL; ignored in
// a revocation).
type ConsoleGrant struct {
	ProjectID  string `json:"project_id"`
	NodeID     string `json:"node_id"`
	Address    string `json:"address"`
	TTLSeconds int    `json:"ttl_s,omitempty"`
}
