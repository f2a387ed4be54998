package api

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labtap/labtap/proto"
)

// serveConsole switches a request to the node's console: 101, then the
// connection carries the console's bytes both ways until either side
// closes.
func (h *handlers) serveConsole(w http.ResponseWriter, r *http.Request, cd ConsoleDialer) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), proto.ConsoleUpgrade) {
		writeError(w, proto.Errorf(proto.CodeInvalid, "Upgrade: %s required", proto.ConsoleUpgrade))
		return
	}
	console, err := cd.DialConsole(r.Context(), r.PathValue("project"), r.PathValue("node"))
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	defer console.Close()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, proto.Errorf(proto.CodeInternal, "cannot switch protocols: %v", err))
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{}) // the server's request deadlines end here
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + proto.ConsoleUpgrade + "\r\n\r\n")
	if err := rw.Flush(); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(console, rw) // what the server already read comes first
		console.Close()
	})
	io.Copy(conn, console)
	conn.Close()
	wg.Wait()
}
