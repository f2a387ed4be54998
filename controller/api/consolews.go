package api

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// The web UI's console: a WebSocket bridged
// to the node's telnet console through its agent (remote ones too), behind
// the same authentication as every route (GNS3 exempts it). The node's
// output goes out as binary frames; the client's frames, text or binary,
// go to the console as bytes.

const rConsoleWS = "/v2/projects/{project_id}/nodes/{node_id}/console/ws"

// ConsoleDialer connects to a node's console through its agent (part of
// Agents).
type ConsoleDialer interface {
	DialConsole(ctx context.Context, computeID, projectID, nodeID string) (io.ReadWriteCloser, error)
}

// consoleKey is where the upgrade finds the console it bridges.
const consoleKey = "labtap.console"

// consoleFrame bounds what one frame to the client carries.
const consoleFrame = 16 << 10

func (a *API) consoleWS() fiber.Handler {
	ws := websocket.New(func(conn *websocket.Conn) {
		console := conn.Locals(consoleKey).(io.ReadWriteCloser)
		a.bridgeConsole(conn, console)
	})
	return websocketOnly(func(c *fiber.Ctx) error {
		dialer := a.cfg.Agents
		if dialer == nil {
			return &project.Error{Kind: project.ErrConflict, Msg: "Consoles are not reachable through this controller"}
		}
		n, err := a.projects.Nodes.Get(c.Params("project_id"), c.Params("node_id"))
		if err != nil {
			return err
		}
		// Checked here too, whatever the route table says: this is a
		// console, the one thing Node.Console is for.
		if !a.allowed(c, "Node.Console", "/projects/"+n.ProjectID+"/nodes/"+n.ID) {
			return fiber.NewError(fiber.StatusForbidden, "Forbidden: the privilege Node.Console is required on this node")
		}
		if n.Inert {
			return &project.Error{Kind: project.ErrConflict, Msg: "Node type " + n.Type + " is not supported by this server"}
		}
		// Dialled before the upgrade, so a refusal (a stopped node, no
		// telnet console) is a JSON error the client can read. It lives as
		// long as the server: the bridge closes it.
		console, err := dialer.DialConsole(a.cfg.Context, n.ComputeID, n.ProjectID, n.ID)
		if err != nil {
			return err
		}
		c.Locals(consoleKey, console)
		if err := ws(c); err != nil {
			console.Close()
			return err
		}
		return nil
	})
}

// bridgeConsole copies between the WebSocket and the console until either
// ends (or the server stops), then closes both.
func (a *API) bridgeConsole(conn *websocket.Conn, console io.ReadWriteCloser) {
	var once sync.Once
	end := func() {
		once.Do(func() {
			console.Close()
			conn.SetReadDeadline(time.Now()) // ends the reader below
		})
	}
	defer end()
	stop := context.AfterFunc(a.cfg.Context, end)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // client → console
		defer end()
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if _, err := console.Write(msg); err != nil {
				return
			}
		}
	})
	buf := make([]byte, consoleFrame)
	for { // console → client
		n, err := console.Read(buf)
		if n > 0 {
			conn.SetWriteDeadline(time.Now().Add(writeGrace))
			if werr := conn.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			conn.SetWriteDeadline(time.Now().Add(writeGrace))
			conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "console closed"))
			return
		}
	}
}
