package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// CheckReadme compares the flag table that follows the line starting with
// section in readme (rows "| `--flag` | `ENV` | default | meaning |") with
// the flags of target, and returns what differs: a flag missing on either
// side, a different variable, or a different default where the table gives
// one literal value (`value`, or "none" for empty).
func CheckReadme(readme, section string, target any, vars map[string]string) ([]string, error) {
	parser, err := kong.New(target, kong.Vars(vars), kong.Writers(io.Discard, io.Discard))
	if err != nil {
		return nil, err
	}
	type row struct{ env, def string }
	code := map[string]row{}
	for _, f := range parser.Model.Flags {
		if f.Name != "help" && f.Name != "version" {
			code[f.Name] = row{strings.Join(f.Tag.Envs, ","), f.Default}
		}
	}
	start := strings.Index(readme, "\n"+section)
	if start < 0 {
		return nil, fmt.Errorf("no %q in the document", section)
	}
	ticked := regexp.MustCompile("`([^`]*)`")
	doc := map[string]row{}
	inTable := false
	for line := range strings.Lines(readme[start+1:]) {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 {
			continue
		}
		var flags, envs []string
		for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
			flags = append(flags, strings.TrimPrefix(m[1], "--"))
		}
		for _, m := range ticked.FindAllStringSubmatch(cells[1], -1) {
			envs = append(envs, m[1])
		}
		def, literal := strings.TrimSpace(cells[2]), false
		if def == "none" {
			def, literal = "", true
		} else if m := ticked.FindAllStringSubmatch(def, -1); len(m) == 1 && m[0][0] == def {
			def, literal = m[0][1], true
		}
		for i, f := range flags {
			r := row{def: "?"}
			if literal {
				r.def = def
			}
			if i < len(envs) {
				r.env = envs[i]
			}
			doc[f] = r
		}
	}
	var problems []string
	for name, c := range code {
		d, ok := doc[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("--%s is not in the docs' flag table", name))
		case d.env != c.env:
			problems = append(problems, fmt.Sprintf("--%s: the docs say its variable is %q, the code %q", name, d.env, c.env))
		case d.def != "?" && d.def != c.def:
			problems = append(problems, fmt.Sprintf("--%s: the docs say its default is %q, the code %q", name, d.def, c.def))
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			problems = append(problems, fmt.Sprintf("the docs' --%s is no flag", name))
		}
	}
	slices.Sort(problems)
	return problems, nil
}
