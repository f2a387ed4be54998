package api

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// Consoles only for those allowed. The GNS3 GUI opens a node's console
// with plain telnet to the console port its agent reports: no credential
// can ride on it. So, when the server has users (and Config.ConsolesOpen
// is not set), every agent keeps its node consoles closed to any client
// address the controller has not granted for that node. A grant is made
// when a user allowed Node.Console on a node reads it through the API
// (GET of the project, of its nodes, or of the node: what a GUI does when
// it opens a project), for the address the request came from; it lasts
// ConsoleGrantIdle after that user's last such read, and is revoked, its
// open connections cut off, as soon as no user reading from that address
// is allowed any more (an ACE removed, a user disabled or deleted, a role
// changed). See docs/sharing.md, "Consoles".

// DefaultConsoleGrantIdle is how long a console grant lasts after its
// user's last read of the node.
const DefaultConsoleGrantIdle = time.Hour

// consoleSync is how often the controller re-states to every agent what
// its consoles' gate is (an agent that restarted has forgotten it) and
// checks the grants against the access model.
const consoleSync = time.Second

// consoleRestate is how often every agent is told the whole table again.
const consoleRestate = 10 * time.Second

// consoleCallTimeout bounds one call telling an agent its grants: a read
// waits for it (the GUI telnets right after opening a project).
const consoleCallTimeout = 3 * time.Second

// ConsoleGranter tells a compute's agent who may connect to its node
// consoles. *compute.Agents satisfies it.
type ConsoleGranter interface {
	ConsoleAccess(ctx context.Context, computeID string, a proto.ConsoleAccess) error
}

// grantKey is one node's console on one compute, for one client address.
type grantKey struct {
	compute, project, node string
	addr                   netip.Addr
}

type grantState struct {
	users map[string]time.Time // user id -> its last read of the node
	sent  time.Time            // when the agent last heard of the grant
}

// consoleGrants is the controller's table of console grants. It is safe
// for concurrent use.
type consoleGrants struct {
	ctx      context.Context // the server's: calls end with it
	agents   ConsoleGranter
	svc      *access.Service
	computes func() []string // the ids of the computes to keep gated
	idle     time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu     sync.Mutex // guards grants and restated
	grants map[grantKey]*grantState
	// restated is when every agent was last told the whole table.
	restated time.Time
}

func (g *consoleGrants) nodePath(k grantKey) string {
	return "/projects/" + k.project + "/nodes/" + k.node
}

// mayConsole reports whether a user may open a node's console. Without
// the access database the one user (Config.User) may.
func (g *consoleGrants) mayConsole(userID string, k grantKey) bool {
	return g.svc == nil || g.svc.Allowed(userID, "Node.Console", g.nodePath(k))
}

// ttl is the grant's lifetime the agents are told, in seconds.
func (g *consoleGrants) ttl() int { return max(1, int(g.idle/time.Second)) }

// read notes that user u, at addr, read nodes: it grants addr each node's
// console u may open, telling the agents at once what they have not
// heard lately (a read within a quarter of the idle time of the last one
// costs no call).
func (g *consoleGrants) read(ctx context.Context, u access.User, addr netip.Addr, nodes []project.Node) {
	now := g.now()
	batches := map[string][]proto.ConsoleGrant{}
	g.mu.Lock()
	for _, n := range nodes {
		if n.ComputeID == "" {
			continue
		}
		k := grantKey{n.ComputeID, strings.ToLower(n.ProjectID), strings.ToLower(n.ID), addr}
		if !u.Superadmin && !g.mayConsole(u.ID, k) {
			continue
		}
		st := g.grants[k]
		if st == nil {
			st = &grantState{users: map[string]time.Time{}}
			g.grants[k] = st
		}
		st.users[u.ID] = now
		if now.Sub(st.sent) < g.idle/4 {
			continue
		}
		st.sent = now
		batches[k.compute] = append(batches[k.compute], proto.ConsoleGrant{
			ProjectID: k.project, NodeID: k.node, Address: addr.String(), TTLSeconds: g.ttl()})
	}
	g.mu.Unlock()
	if len(batches) == 0 {
		return
	}
	// A compute that could not be told hears it at the next restatement
	// (consoleRestate): reads do not wait on an unreachable agent again.
	g.send(ctx, batches, nil)
}

// send tells each compute its grants and revocations, one call each, and
// returns the computes that could not be told.
func (g *consoleGrants) send(ctx context.Context, grants, revoke map[string][]proto.ConsoleGrant) map[string]bool {
	computes := map[string]bool{}
	for c := range grants {
		computes[c] = true
	}
	for c := range revoke {
		computes[c] = true
	}
	failed := map[string]bool{}
	gated := true
	for c := range computes {
		gs, rs := grants[c], revoke[c]
		for len(gs) > 0 || len(rs) > 0 || computes[c] {
			computes[c] = false
			body := proto.ConsoleAccess{Gated: &gated}
			n := min(len(rs), proto.MaxConsoleGrants)
			body.Revoke, rs = rs[:n], rs[n:]
			n = min(len(gs), proto.MaxConsoleGrants-len(body.Revoke))
			body.Grants, gs = gs[:n], gs[n:]
			cctx, cancel := context.WithTimeout(ctx, consoleCallTimeout)
			err := g.agents.ConsoleAccess(cctx, c, body)
			cancel()
			if err != nil {
				g.log.Warn("console grants not told to the compute", "compute", c, "err", err)
				failed[c] = true
				break
			}
		}
	}
	return failed
}

// sweep drops the grants whose users may no longer open the console
// (revoked on the agent, which cuts their connections off) or have not
// read the node for the idle time (left to expire on the agent), and,
// every consoleRestate, tells every agent its whole table again with its
// gate closed.
func (g *consoleGrants) sweep(ctx context.Context) {
	now := g.now()
	revoke := map[string][]proto.ConsoleGrant{}
	var all map[string][]proto.ConsoleGrant
	g.mu.Lock()
	for k, st := range g.grants {
		lost := false
		for uid, last := range st.users {
			switch {
			case !g.stillAllowed(uid, k):
				delete(st.users, uid)
				lost = true
			case now.Sub(last) >= g.idle:
				delete(st.users, uid)
			}
		}
		if len(st.users) > 0 {
			continue
		}
		delete(g.grants, k)
		if lost {
			revoke[k.compute] = append(revoke[k.compute], proto.ConsoleGrant{ProjectID: k.project, NodeID: k.node, Address: k.addr.String()})
		}
	}
	if now.Sub(g.restated) >= consoleRestate {
		g.restated = now
		all = map[string][]proto.ConsoleGrant{}
		for _, c := range g.computes() {
			all[c] = nil
		}
		for k, st := range g.grants {
			// What is left of the grant, not a fresh idle time: an agent
			// must not keep it longer than the controller does.
			var last time.Time
			for _, t := range st.users {
				if t.After(last) {
					last = t
				}
			}
			left := max(1, int((last.Add(g.idle).Sub(now)+time.Second-1)/time.Second))
			all[k.compute] = append(all[k.compute], proto.ConsoleGrant{
				ProjectID: k.project, NodeID: k.node, Address: k.addr.String(), TTLSeconds: min(left, g.ttl())})
		}
	}
	g.mu.Unlock()
	if len(revoke) > 0 {
		g.send(ctx, nil, revoke)
	}
	if all != nil {
		g.send(ctx, all, nil)
	}
}

// stillAllowed: the user exists, is active, and may open the console.
func (g *consoleGrants) stillAllowed(userID string, k grantKey) bool {
	if g.svc == nil {
		return true
	}
	u, err := g.svc.User(userID)
	if err != nil || !u.Active {
		return false
	}
	return u.Superadmin || g.mayConsole(userID, k)
}

// run sweeps until ctx is done.
func (g *consoleGrants) run(ctx context.Context) {
	t := time.NewTicker(consoleSync)
	defer t.Stop()
	g.sweep(ctx) // the agents' gates close at once
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.sweep(ctx)
		}
	}
}

// grantReads is the middleware that grants consoles to the users of
// projects and nodes: after a request on a project (its GET, open,
// update), on its nodes (list, create, from a template, start all...) or
// on one node (GET, update, start...) answered 2xx, the caller's address
// gets the consoles of those nodes that it may open. A DELETE grants
// nothing.
func (a *API) grantReads(c *fiber.Ctx) error {
	if err := c.Next(); err != nil || c.Method() == fiber.MethodDelete || c.Response().StatusCode()/100 != 2 {
		return err
	}
	// Other routes (links above all) pay this comparison, no more.
	const projectRoute = "/v2/projects/{project_id}"
	route := c.Response().Header.PeekBytes(xRoute)
	if !bytes.HasPrefix(route, []byte(projectRoute)) {
		return nil
	}
	var withNode bool
	switch rest := route[len(projectRoute):]; {
	case bytes.HasPrefix(rest, []byte("/nodes/{node_id}")):
		withNode = true
	case len(rest) == 0, string(rest) == "/open", bytes.HasPrefix(rest, []byte("/nodes")), bytes.HasPrefix(rest, []byte("/templates/")):
	default:
		return nil
	}
	var projectID, nodeID string
	segs := strings.Split(strings.Trim(c.Path(), "/"), "/") // v2 projects {id} [nodes [{id}]]
	if len(segs) < 3 || withNode && len(segs) < 5 {
		return nil
	}
	projectID = segs[2]
	if withNode {
		nodeID = segs[4]
	}
	u, ok := a.caller(c)
	if !ok {
		return nil
	}
	var nodes []project.Node
	if nodeID != "" {
		n, err := a.projects.Nodes.Get(projectID, nodeID)
		if err != nil {
			return nil
		}
		nodes = []project.Node{n}
	} else {
		var err error
		if nodes, err = a.projects.Nodes.List(projectID); err != nil {
			return nil
		}
	}
	addr, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return nil
	}
	// The request's own context ended with its handler.
	a.grants.read(a.grants.ctx, u, addr.Unmap(), nodes)
	return nil
}

// consolesGated reports whether node consoles are closed to addresses not
// granted: the server has credentials, and Config.ConsolesOpen is not set.
func (a *API) consolesGated() bool {
	return a.authOn() && !a.cfg.ConsolesOpen
}

// startConsoleGrants makes the grant table and its sweeper when consoles
// are gated and the agents can be told.
func (a *API) startConsoleGrants() {
	if !a.consolesGated() {
		return
	}
	agents, ok := a.cfg.Agents.(ConsoleGranter)
	if !ok {
		return
	}
	idle := a.cfg.ConsoleGrantIdle
	if idle <= 0 {
		idle = DefaultConsoleGrantIdle
	}
	ctx := a.cfg.Context
	if ctx == nil {
		ctx = context.Background()
	}
	a.grants = &consoleGrants{
		ctx: ctx, agents: agents, svc: a.cfg.Access, idle: idle, log: a.log, now: time.Now,
		grants: map[grantKey]*grantState{},
		computes: func() []string {
			var ids []string
			if a.computes != nil {
				for _, c := range a.computes.List() {
					if c.Connected {
						ids = append(ids, c.ID)
					}
				}
			}
			return ids
		},
	}
	go a.grants.run(ctx)
}
