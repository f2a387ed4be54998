package cli

import (
	"fmt"
	"regexp"
	"strings"
)

// A Walkthrough is a documented shell session: the fenced sh blocks of one
// Markdown file marked with the same name, joined in order into one bash
// script, which a test runs against a real controller.
//
// A block is marked by the line just before its fence:
//
//	<!-- walkthrough: NAME [needs=WHAT,...] -->
//
// and a sh block that is no walkthrough (it needs a display, a second
// host, ...) says so, with its reason, the same way:
//
//	<!-- not a walkthrough: REASON -->
type Walkthrough struct {
	Name string
	// Needs lists what the script needs beyond the controller, curl and
	// jq, from every block's needs= (e.g. docker, qemu, root).
	Needs []string
	// Script is the blocks' text, each after a comment naming its line.
	Script string
}

var (
	walkMark    = regexp.MustCompile(`^<!-- walkthrough: ([a-z0-9-]+)(?: needs=([a-z0-9,-]+))? -->$`)
	notWalkMark = regexp.MustCompile(`^<!-- not a walkthrough: [^>]+ -->$`)
)

// Walkthroughs returns the walkthroughs of a Markdown document, in the
// order of their first blocks. It is an error for a ```sh block to be
// neither marked as a walkthrough nor as not one (so that a new example
// is run or says why not), or for a mark to precede no sh block.
func Walkthroughs(doc string) ([]Walkthrough, error) {
	lines := strings.Split(doc, "\n")
	var out []Walkthrough
	index := map[string]int{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if m := walkMark.FindStringSubmatch(line); m != nil || notWalkMark.MatchString(line) {
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
				return nil, fmt.Errorf("line %d: %s is not just before a ```sh block", i+1, line)
			}
			continue
		}
		if line != "```sh" {
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the ```sh block never ends", start+1)
		}
		mark := ""
		if start > 0 {
			mark = strings.TrimSpace(lines[start-1])
		}
		if notWalkMark.MatchString(mark) {
			continue
		}
		m := walkMark.FindStringSubmatch(mark)
		if m == nil {
			return nil, fmt.Errorf("line %d: a ```sh block with neither <!-- walkthrough: NAME --> nor <!-- not a walkthrough: REASON --> before it", start+1)
		}
		k, ok := index[m[1]]
		if !ok {
			k = len(out)
			index[m[1]] = k
			out = append(out, Walkthrough{Name: m[1]})
		}
		w := &out[k]
		if m[2] != "" {
			for _, n := range strings.Split(m[2], ",") {
				if !contains(w.Needs, n) {
					w.Needs = append(w.Needs, n)
				}
			}
		}
		w.Script += fmt.Sprintf("# line %d\n%s\n", start+2, strings.Join(body, "\n"))
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
