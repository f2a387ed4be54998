package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// lineGuard sits between the console's clients and VPCS and checks each
// command line before VPCS runs it. VPCS's load runs a file's lines as
// commands, "! cmd" included (a shell on the agent's host), and save and
// load take any path. So:
//
//   - load and save take a plain file name only (no path), so they stay in
//     the node's own folder;
//   - load takes only a file saved through this console (remembered in
//     guardFile), never vpcs.log or anything else;
//   - save never writes over the files the agent keeps there;
//   - rlogin may not reach a port of denied (the agent's and the
//     controller's own).
//
// To know the line VPCS will run, the guard passes only what it can follow:
// printable ASCII, backspace and delete, CR, and Ctrl-C; line-editing keys
// (arrows, history, Tab completion) are dropped. A refused line is erased
// before VPCS sees its CR. The guard is not safe for concurrent use.
type lineGuard struct {
	dir    string
	denied []int
	saved  []string // files saved through the console
	line   []byte
}

// guardFile is where a node's guard remembers what was saved through the
// console.
const guardFile = ".console-saved.json"

// reservedFiles are the agent's files in a node's folder, never written
// by save.
var reservedFiles = []string{"vpcs.log", guardFile}

var plainFile = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func newLineGuard(dir string, denied []int) *lineGuard {
	g := &lineGuard{dir: dir, denied: denied}
	if data, err := os.ReadFile(filepath.Join(dir, guardFile)); err == nil {
		_ = json.Unmarshal(data, &g.saved)
	}
	return g
}

// feed takes what a client typed and returns what to pass to VPCS, and a
// notice for the client ("" if none).
func (g *lineGuard) feed(in []byte) (out []byte, notice string) {
	for _, b := range in {
		switch {
		case b >= 0x20 && b < 0x7f:
			g.line = append(g.line, b)
			out = append(out, b)
		case b == 0x08 || b == 0x7f:
			if len(g.line) > 0 {
				g.line = g.line[:len(g.line)-1]
				out = append(out, b)
			}
		case b == 0x03: // Ctrl-C: whatever VPCS does with the line, it is gone
			out = append(append(out, erase(len(g.line))...), b)
			g.line = g.line[:0]
		case b == '\r' || b == '\n':
			if why := g.check(string(g.line)); why != "" {
				out = append(append(out, erase(len(g.line))...), '\r')
				notice = "\r\n% " + why + "\r\n"
			} else {
				out = append(out, '\r')
			}
			g.line = g.line[:0]
		}
	}
	return out, notice
}

// erase is n backspaces.
func erase(n int) []byte { return []byte(strings.Repeat("\b", n)) }

// is reports whether word names command name: VPCS takes a command's
// leading letters, so any prefix of two letters or more counts.
func is(word, name string) bool {
	word = strings.ToLower(word)
	return word == name || len(word) >= 2 && strings.HasPrefix(name, word)
}

// check returns why a command line is refused, "" if it may run.
func (g *lineGuard) check(line string) string {
	words := strings.Fields(line)
	if len(words) == 0 {
		return ""
	}
	arg := "startup.vpc"
	if len(words) > 1 {
		arg = words[1]
	}
	switch {
	case is(words[0], "load"):
		if !plainFile.MatchString(arg) {
			return "load takes a file name saved from this console, without a path"
		}
		if !slices.Contains(g.saved, arg) && !slices.Contains(g.saved, arg+".vpc") {
			return fmt.Sprintf("load: %s was not saved from this console", arg)
		}
	case is(words[0], "save"):
		if !plainFile.MatchString(arg) {
			return "save takes a file name, without a path"
		}
		for _, r := range reservedFiles {
			if strings.EqualFold(arg, r) || strings.EqualFold(arg+".vpc", r) {
				return fmt.Sprintf("save: %s is the agent's", arg)
			}
		}
		g.remember(arg)
		if filepath.Ext(arg) == "" {
			g.remember(arg + ".vpc") // VPCS adds it
		}
	case is(words[0], "rlogin"):
		if port, err := strconv.Atoi(words[len(words)-1]); err == nil && slices.Contains(g.denied, port) {
			return fmt.Sprintf("rlogin: port %d is the agent's or the controller's", port)
		}
	}
	return ""
}

func (g *lineGuard) remember(name string) {
	if slices.Contains(g.saved, name) {
		return
	}
	g.saved = append(g.saved, name)
	if data, err := json.Marshal(g.saved); err == nil {
		_ = os.WriteFile(filepath.Join(g.dir, guardFile), data, 0o644)
	}
}
