package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
)

// Console is a client of a VPCS console (plain TCP with a few telnet
// option bytes): it sends one command at a time and returns what VPCS
// printed before its next prompt. It is not safe for concurrent use.
type Console struct {
	conn net.Conn
	buf  []byte
}

// prompt matches VPCS's prompt at the end of its output: "VPCS> " or, after
// "set pcname PC1", "PC1> ".
var prompt = regexp.MustCompile(`(?:^|\n)[^\n>]*> $`)

// quiet is how long a console must stay silent before a command is sent.
// VPCS handles one line per read, so a line sent while it is still busy
// with the previous one can be lost.
const quiet = 150 * time.Millisecond

// DialConsole connects to a console at addr ("127.0.0.1:5000") and waits
// until it has printed a prompt and gone quiet.
func DialConsole(ctx context.Context, addr string) (*Console, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", addr, err)
	}
	c := &Console{conn: conn}
	// The console replays its recent output, which ends with a prompt
	// unless a command is running; an empty line asks for a fresh one.
	if err := c.settle(ctx, true); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// settle reads until the console has been silent for a while, and, if
// needPrompt, until what it printed ends with a prompt (asking for one with
// an empty line after a second without).
func (c *Console) settle(ctx context.Context, needPrompt bool) error {
	c.buf = c.buf[:0]
	chunk := make([]byte, 4096)
	nudge := time.Now().Add(time.Second)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("console: no prompt: %w", err)
		}
		if err := c.conn.SetReadDeadline(time.Now().Add(quiet)); err != nil {
			return err
		}
		n, err := c.conn.Read(chunk)
		c.buf = append(c.buf, chunk[:n]...)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return fmt.Errorf("console: %w", err)
		}
		if !needPrompt || prompt.MatchString(clean(c.buf)) {
			return nil
		}
		if time.Now().After(nudge) {
			nudge = time.Now().Add(time.Second)
			if _, err := c.conn.Write([]byte("\r")); err != nil {
				return fmt.Errorf("console: %w", err)
			}
		}
	}
}

// runTimeout bounds Run when ctx has no deadline.
const runTimeout = 30 * time.Second

// Run sends one command line and returns VPCS's output up to its next
// prompt, without the echo of the command, carriage returns or telnet
// negotiation. Without a deadline in ctx it gives up after 30 s.
func (c *Console) Run(ctx context.Context, cmd string) (string, error) {
	return c.run(ctx, cmd, cmd)
}

// run is Run for a line that VPCS echoes as echo: what reaches VPCS is not
// always what was typed (the console drops '!').
func (c *Console) run(ctx context.Context, cmd, echo string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runTimeout)
		defer cancel()
	}
	if err := c.settle(ctx, false); err != nil { // drop what earlier commands left
		return "", err
	}
	c.buf = c.buf[:0]
	if _, err := c.conn.Write([]byte(cmd + "\n")); err != nil {
		return "", fmt.Errorf("console: send %q: %w", cmd, err)
	}
	chunk := make([]byte, 4096)
	for {
		if err := ctx.Err(); err != nil {
			return clean(c.buf), fmt.Errorf("console: %q: no prompt: %w", cmd, err)
		}
		if err := c.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			return "", err
		}
		n, err := c.conn.Read(chunk)
		c.buf = append(c.buf, chunk[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				return clean(c.buf), fmt.Errorf("console: %q: %w", cmd, err)
			}
		}
		text := clean(c.buf)
		i := strings.Index(text, echo+"\n") // the echo of our line
		if i < 0 {
			// The agent's console guard erased the line and said why;
			// VPCS then prints a fresh prompt.
			if why, ok := refusal(text); ok && prompt.MatchString(text) {
				return "", fmt.Errorf("console: %q: %w: %s", cmd, ErrRefused, why)
			}
			continue
		}
		after := text[i+len(echo)+1:]
		if loc := prompt.FindStringIndex(after); loc != nil {
			return strings.Trim(after[:loc[0]], "\n"), nil
		}
	}
}

// ErrRefused is Run's error for a line the agent's console guard refused
// (guard.go): VPCS never ran it.
var ErrRefused = errors.New("refused by the console guard")

// refusal finds the guard's notice in a console's output: a line "% why".
func refusal(text string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		if why, ok := strings.CutPrefix(line, "% "); ok {
			return why, true
		}
	}
	return "", false
}

// Close closes the connection; VPCS keeps running.
func (c *Console) Close() error { return c.conn.Close() }

// clean drops telnet negotiation (IAC, command, option) and carriage returns.
func clean(b []byte) string {
	var out bytes.Buffer
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == 0xff && i+2 < len(b):
			i += 2
		case b[i] == 0xff:
			i = len(b)
		case b[i] == '\r', b[i] == 0:
		default:
			out.WriteByte(b[i])
		}
	}
	return out.String()
}
