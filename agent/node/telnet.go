package node

import (
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
	opts ConsoleOptions

	mu      sync.Mutex // guards clients, recent, closed and guard
	guard   *lineGuard // checks command lines; nil passes everything
	clients map[*consoleClient]struct{}
	recent  []byte // the last output, replayed to each new client
	// recent is recentBuf[recentAt:], in a buffer of twice the replay's
	// size made once: new output is appended in place, and the window is
	// moved down when it reaches the end (an append past a slice cut at
	// its front made a new array every few reads).
	recentBuf []byte
	recentAt  int
	closed    bool
	wg        sync.WaitGroup // accept, read and client goroutines
}

type consoleClient struct {
	conn net.Conn
	// pending is output not written to the client yet, and gone tells it
	// was dropped; both guarded by consoleServer.mu. wake (capacity 1)
	// tells the writer that pending grew; closed when the client is
	// dropped.
	pending []byte
	gone    bool
	wake    chan struct{}
	// spare is the buffer the writer wrote last, given back to become
	// pending once the writer takes that (guarded by consoleServer.mu):
	// the two take turns, so output is not copied into a new buffer at
	// each write (BenchmarkConsoleOutput).
	spare []byte
	// stall is how long a write to the client may wait for it to read,
	// before it is dropped (guarded by consoleServer.mu).
	stall time.Duration
}

// spareMax is the largest buffer a client keeps for reuse: one that grew
// for a burst is let go.
const spareMax = 64 << 10

// queueLocked adds data to what c is sent, or drops c when it is too far
// behind. s.mu must be held.
func (s *consoleServer) queueLocked(c *consoleClient, data []byte) {
	if c.gone {
		return
	}
	if len(c.pending)+len(data) > clientBacklog { // too slow: it must not hold the node up
		s.dropLocked(c)
		return
	}
	c.pending = append(c.pending, data...)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

const (
	recentBytes = 4096 // output a new client sees first, so it meets a prompt
	// clientBacklog is how far (bytes) a client may fall behind before it
	// is dropped. It counts bytes, not reads: a VM's serial console comes
	// a few bytes per read, and a count of reads dropped clients that were
	// a few hundred bytes behind during a boot.
	clientBacklog = 1 << 20
	// clientStall is how long a client may read nothing while output
	// waits for it before it is dropped.
	clientStall = 10 * time.Second
)

// Telnet bytes (RFC 854, 857, 858).
const (
	iac    = 255
	will   = 251
	wont   = 252
	do     = 253
	dont   = 254
	sb     = 250
	se     = 240
	echo   = 1
	sga    = 3
	binary = 0
	naws   = 31
)

// greeting asks clients for character mode with remote echo: the node
// echoes what it gets and edits its own line.
var greeting = []byte{iac, will, echo, iac, will, sga, iac, do, sga}

// ttyGreeting is a container terminal's: character mode, remote echo,
// 8-bit data both ways, and the client's window size (NAWS).
var ttyGreeting = []byte{iac, will, echo, iac, will, sga, iac, will, binary, iac, do, binary, iac, do, naws}

// ConsoleOptions shape a console that is not VPCS's.
type ConsoleOptions struct {
	// Banner is sent to each client after the telnet options, before the
	// replay of recent output.
	Banner string
	// OnResize is called with each window size a client reports (telnet
	// NAWS); when set, clients are asked for it.
	OnResize func(cols, rows int)
	// KeepBang passes '!' through (only VPCS runs host commands after it).
	KeepBang bool
	// Replay is how much recent output a new client gets first
	// (recentBytes when 0).
	Replay int
}

// serveConsole starts serving VPCS's terminal on ln, checking command
// lines with guard if not nil. Close stops it.
func serveConsole(ln net.Listener, term io.ReadWriter, guard *lineGuard) *consoleServer {
	return newConsole(ln, term, ConsoleOptions{}, guard)
}

// A ConsoleServer shares a terminal (a container's TTY, an exec session)
// with telnet clients, as a node's console.
type ConsoleServer struct{ s *consoleServer }

// ServeConsole starts serving term on ln: what term prints goes to every
// client, with the last 4 KiB replayed to each new one, and what clients
// type goes to term. It returns at once; Close stops it. The caller closes
// term, which ends the server's reader.
func ServeConsole(ln net.Listener, term io.ReadWriter, opts ConsoleOptions) *ConsoleServer {
	opts.KeepBang = true
	return &ConsoleServer{newConsole(ln, term, opts, nil)}
}

// Close stops accepting, disconnects every client, and waits for the
// server's goroutines, including its reader of term.
func (c *ConsoleServer) Close() { c.s.Close() }

// serveConsoleWith starts serving term on ln with options, checking
// command lines with guard if not nil.
func serveConsoleWith(ln net.Listener, term io.ReadWriter, guard *lineGuard, opts ConsoleOptions) *consoleServer {
	return newConsole(ln, term, opts, guard)
}

func newConsole(ln net.Listener, term io.ReadWriter, opts ConsoleOptions, guard *lineGuard) *consoleServer {
	if opts.Replay <= 0 {
		opts.Replay = recentBytes
	}
	s := &consoleServer{ln: ln, term: term, opts: opts, guard: guard, clients: make(map[*consoleClient]struct{})}
	s.recentBuf = make([]byte, 2*opts.Replay)
	s.recent = s.recentBuf[:0]
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
		c := &consoleClient{conn: conn, wake: make(chan struct{}, 1), stall: clientStall}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.clients[c] = struct{}{}
		hello := greeting
		if s.opts.OnResize != nil {
			hello = ttyGreeting
		}
		// The telnet options, the banner and the replay, in one buffer
		// made to measure: the one copy each (the writer has the only
		// reference; readTerm appends what follows).
		c.pending = make([]byte, 0, len(hello)+len(s.opts.Banner)+len(s.recent))
		c.pending = append(append(append(c.pending, hello...), s.opts.Banner...), s.recent...)
		c.wake <- struct{}{}
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
			chunk := buf[:n] // queueLocked and recent copy it
			s.mu.Lock()
			s.keepRecentLocked(chunk)
			for c := range s.clients {
				s.queueLocked(c, chunk)
			}
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// keepRecentLocked adds output to what new clients are replayed, which
// keeps its last opts.Replay bytes. s.mu must be held.
func (s *consoleServer) keepRecentLocked(chunk []byte) {
	limit := s.opts.Replay
	if len(chunk) > limit {
		chunk = chunk[len(chunk)-limit:]
	}
	if s.recentAt+len(s.recent)+len(chunk) > len(s.recentBuf) {
		// Both hold limit bytes at most, and the buffer twice that.
		s.recent = s.recentBuf[:copy(s.recentBuf, s.recent)]
		s.recentAt = 0
	}
	s.recent = append(s.recent, chunk...) // in place: it fits
	if over := len(s.recent) - limit; over > 0 {
		s.recent = s.recent[over:]
		s.recentAt += over
	}
}

// dropLocked disconnects a client. s.mu must be held.
func (s *consoleServer) dropLocked(c *consoleClient) {
	if _, ok := s.clients[c]; ok {
		delete(s.clients, c)
		c.gone, c.pending, c.spare = true, nil, nil
		close(c.wake)
		c.conn.Close()
	}
}

func (s *consoleServer) write(c *consoleClient) {
	defer s.wg.Done()
	for range c.wake {
		s.mu.Lock()
		data := c.pending
		if len(data) == 0 {
			s.mu.Unlock()
			continue
		}
		c.pending, c.spare = c.spare[:0], nil
		stall := c.stall
		s.mu.Unlock()
		c.conn.SetWriteDeadline(time.Now().Add(stall))
		_, err := c.conn.Write(data)
		s.mu.Lock()
		if err != nil {
			// The client is disconnected: it sees its output end, never
			// a gap in it.
			s.dropLocked(c)
		} else if !c.gone && cap(data) <= spareMax {
			c.spare = data[:0]
		}
		s.mu.Unlock()
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
	f := telnetFilter{keepBang: s.opts.KeepBang, onResize: s.opts.OnResize}
	buf := make([]byte, 1024)
	for {
		n, err := c.conn.Read(buf)
		if n > 0 {
			data := f.filter(buf[:n])
			if s.guard != nil {
				var notice string
				s.mu.Lock()
				data, notice = s.guard.feed(data)
				if notice != "" {
					s.queueLocked(c, []byte(notice))
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
	state  int // 0 data, 1 after IAC, 2 after IAC+verb, 3 in SB, 4 in SB after IAC
	lastCR bool

	keepBang bool                 // pass '!' (not VPCS)
	onResize func(cols, rows int) // told each NAWS window size
	sub      []byte               // the current subnegotiation's bytes
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
				f.sub = f.sub[:0]
			default:
				f.state = 0
			}
		case 2:
			f.state = 0
		case 3:
			if b == iac {
				f.state = 4
			} else if len(f.sub) < 16 {
				f.sub = append(f.sub, b)
			}
		case 4:
			switch b {
			case se:
				f.state = 0
				f.subDone()
			case iac: // an escaped 255 inside the subnegotiation
				f.state = 3
				if len(f.sub) < 16 {
					f.sub = append(f.sub, b)
				}
			default:
				f.state = 3
			}
		}
	}
	return out
}

// subDone acts on a finished subnegotiation: NAWS (RFC 1073) carries the
// client's window width and height, 16 bits each.
func (f *telnetFilter) subDone() {
	if f.onResize == nil || len(f.sub) != 5 || f.sub[0] != naws {
		return
	}
	cols := int(f.sub[1])<<8 | int(f.sub[2])
	rows := int(f.sub[3])<<8 | int(f.sub[4])
	if cols > 0 && rows > 0 {
		f.onResize(cols, rows)
	}
}

// dropClients disconnects every client; the console keeps listening.
func (s *consoleServer) dropClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		s.dropLocked(c)
	}
}
