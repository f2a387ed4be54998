package node

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// consoleServer shares a node's terminal with telnet clients on one TCP
// listener: what the node prints goes to every client, what any client
// types goes to the node. The node never waits for a client: output is
// read continuously, and a client that falls behind is disconnected.
type consoleServer struct {
	ln   net.Listener
	term io.ReadWriter // the pty master
	opts consoleOptions

	mu      sync.Mutex // guards clients, recent, closed and guard
	guard   *lineGuard // checks command lines; nil passes everything
	clients map[*consoleClient]struct{}
	recent  []byte // the last output, replayed to each new client
	closed  bool
	wg      sync.WaitGroup // accept, read and client goroutines
}

type consoleClient struct {
	conn net.Conn
	out  chan []byte
}

const (
	recentBytes   = 4096 // output a new client sees first, so it meets a prompt
	clientBacklog = 256  // chunks a client may fall behind before it is dropped
)

// Telnet bytes (RFC 854, 857, 858).
const (
	iac  = 255
	will = 251
	wont = 252
	do   = 253
	dont = 254
	sb   = 250
	se   = 240
	echo = 1
	sga  = 3
)

// greeting asks clients for character mode with remote echo: the node
// echoes what it gets and edits its own line.
var greeting = []byte{iac, will, echo, iac, will, sga, iac, do, sga}

// consoleOptions tune a console server to its node.
type consoleOptions struct {
	// replay is how much recent output a new client gets first
	// (recentBytes when 0).
	replay int
	// keepBang passes '!' through (VPCS's console drops it: see
	// telnetFilter).
	keepBang bool
}

// serveConsole starts serving term on ln, checking command lines with
// guard if not nil. Close stops it.
func serveConsole(ln net.Listener, term io.ReadWriter, guard *lineGuard) *consoleServer {
	return serveConsoleWith(ln, term, guard, consoleOptions{})
}

// serveConsoleWith starts serving term on ln with options.
func serveConsoleWith(ln net.Listener, term io.ReadWriter, guard *lineGuard, opts consoleOptions) *consoleServer {
	if opts.replay <= 0 {
		opts.replay = recentBytes
	}
	s := &consoleServer{ln: ln, term: term, guard: guard, opts: opts, clients: make(map[*consoleClient]struct{})}
	s.wg.Add(2)
	go s.accept()
	go s.readTerm()
	return s
}

// sawPrompt reports whether the node's recent output ends with a prompt.
func (s *consoleServer) sawPrompt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return prompt.MatchString(clean(s.recent))
}

func (s *consoleServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		c := &consoleClient{conn: conn, out: make(chan []byte, clientBacklog)}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.clients[c] = struct{}{}
		c.out <- append(bytes.Clone(greeting), s.recent...)
		s.mu.Unlock()
		s.wg.Add(2)
		go s.write(c)
		go s.read(c)
	}
}

// readTerm copies the node's output to every client until the terminal
// closes (the node exited).
func (s *consoleServer) readTerm() {
	defer s.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, err := s.term.Read(buf)
		if n > 0 {
			chunk := bytes.Clone(buf[:n])
			s.mu.Lock()
			s.recent = append(s.recent, chunk...)
			if over := len(s.recent) - s.opts.replay; over > 0 {
				s.recent = s.recent[over:]
			}
			for c := range s.clients {
				select {
				case c.out <- chunk:
				default: // too slow: it must not hold the node up
					s.dropLocked(c)
				}
			}
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// dropLocked disconnects a client. s.mu must be held.
func (s *consoleServer) dropLocked(c *consoleClient) {
	if _, ok := s.clients[c]; ok {
		delete(s.clients, c)
		close(c.out)
		c.conn.Close()
	}
}

func (s *consoleServer) write(c *consoleClient) {
	defer s.wg.Done()
	for chunk := range c.out {
		c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.conn.Write(chunk); err != nil {
			s.mu.Lock()
			s.dropLocked(c)
			s.mu.Unlock()
		}
	}
}

// read copies what a client types to the node, without telnet commands.
func (s *consoleServer) read(c *consoleClient) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.dropLocked(c)
		s.mu.Unlock()
	}()
	f := telnetFilter{keepBang: s.opts.keepBang}
	buf := make([]byte, 1024)
	for {
		n, err := c.conn.Read(buf)
		if n > 0 {
			data := f.filter(buf[:n])
			if s.guard != nil {
				var notice string
				s.mu.Lock()
				data, notice = s.guard.feed(data)
				if _, ok := s.clients[c]; ok && notice != "" {
					select {
					case c.out <- []byte(notice):
					default:
					}
				}
				s.mu.Unlock()
			}
			if len(data) > 0 {
				if _, werr := s.term.Write(data); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops accepting, disconnects every client and waits for the
// server's goroutines. The caller closes the terminal, which ends the
// output reader; Close waits for that too.
func (s *consoleServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.clients {
		s.dropLocked(c)
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// telnetFilter removes telnet commands from a client's input, keeps data
// bytes, and turns CR LF and CR NUL into CR. It also drops '!': VPCS runs
// whatever follows '!' as a command of the host (as the agent's user), and
// no other VPCS command needs the character. It keeps state across calls,
// since a command may be split between reads.
type telnetFilter struct {
	keepBang bool
	state    int // 0 data, 1 after IAC, 2 after IAC+verb, 3 in SB, 4 in SB after IAC
	lastCR   bool
}

func (f *telnetFilter) filter(in []byte) []byte {
	out := in[:0:0]
	for _, b := range in {
		switch f.state {
		case 0:
			if b == iac {
				f.state = 1
				continue
			}
			if f.lastCR && (b == '\n' || b == 0) {
				f.lastCR = false
				continue
			}
			f.lastCR = b == '\r'
			if b == '!' && !f.keepBang {
				continue
			}
			out = append(out, b)
		case 1:
			switch b {
			case iac: // an escaped 255 is data; no VPCS command needs it either
				f.state = 0
			case will, wont, do, dont:
				f.state = 2
			case sb:
				f.state = 3
			default:
				f.state = 0
			}
		case 2:
			f.state = 0
		case 3:
			if b == iac {
				f.state = 4
			}
		case 4:
			if b == se {
				f.state = 0
			} else {
				f.state = 3
			}
		}
	}
	return out
}

// dropClients disconnects every client; the console keeps listening.
func (s *consoleServer) dropClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		s.dropLocked(c)
	}
}
