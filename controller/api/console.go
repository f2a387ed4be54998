package api

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// consoleKey is where the console route leaves the node's telnet address
// for the WebSocket handler.
const consoleKey = "labtap.console"

// nodeConsoleWS is GNS3's web console: a WebSocket carrying a started
// node's telnet console both ways (binary frames from the console; text
// or binary frames to it), for the web UI's terminal.
func (a *API) nodeConsoleWS() fiber.Handler {
	ws := websocket.New(func(conn *websocket.Conn) {
		addr, _ := conn.Locals(consoleKey).(string)
		a.pipeConsole(conn, addr)
	})
	return websocketOnly(func(c *fiber.Ctx) error {
		n, err := a.projects.Node(c.Params("project_id"), c.Params("node_id"))
		if err != nil {
			return err
		}
		if n.Status != project.Started || n.Console == 0 || n.ConsoleType != "telnet" {
			return &project.Error{Kind: project.ErrConflict, Msg: "Node " + n.Name + " has no telnet console running"}
		}
		host := n.ConsoleHost
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		c.Locals(consoleKey, net.JoinHostPort(host, strconv.Itoa(n.Console)))
		return ws(c)
	})
}

// pipeConsole copies between the WebSocket and the telnet console until
// either side or the server ends.
func (a *API) pipeConsole(conn *websocket.Conn, addr string) {
	tcp, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "console unreachable"))
		return
	}
	var once sync.Once
	done := make(chan struct{})
	end := func() {
		once.Do(func() {
			close(done)
			tcp.Close()
			conn.SetReadDeadline(time.Now()) // ends the reader below
		})
	}
	go func() {
		select {
		case <-done:
		case <-a.cfg.Context.Done():
			end()
		}
	}()
	go func() { // console → WebSocket
		defer end()
		buf := make([]byte, 4096)
		for {
			n, err := tcp.Read(buf)
			if n > 0 {
				conn.SetWriteDeadline(time.Now().Add(writeGrace))
				if conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer end()
	for { // WebSocket → console
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if _, err := tcp.Write(msg); err != nil {
			return
		}
	}
}
