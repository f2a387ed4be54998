package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labtap/labtap/capspec"
)

// An interface is named labtap_<project_id>_<link_id>, or
// labtap_<project_id>_all for the whole project: ids are letters, digits
// and dashes (UUIDs) and begin with a letter or digit, so the
// underscores part them and a name never reads as an option.
const (
	ifacePrefix = "labtap_"
	wholeSuffix = "all"
)

// idPattern is what a project or link id may be.
var idPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z-]{0,63}$`)

// ifaceName names a link's interface (link "" for the whole project).
func ifaceName(projectID, linkID string) string {
	if linkID == "" {
		linkID = wholeSuffix
	}
	return ifacePrefix + projectID + "_" + linkID
}

// parseIface reads an interface's name back: the project and the link
// ("" for the whole project).
func parseIface(name string) (projectID, linkID string, err error) {
	rest, ok := strings.CutPrefix(name, ifacePrefix)
	p, l, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || !idPattern.MatchString(p) || !idPattern.MatchString(l) {
		return "", "", fmt.Errorf("%q is not a labtap interface (labtap_<project_id>_<link_id>)", bounded(name, 100))
	}
	if l == wholeSuffix {
		l = ""
	}
	return p, l, nil
}

// maxDisplay bounds a name shown in Wireshark, in runes.
const maxDisplay = 60

// display makes a server's text safe for an extcap line: no braces (they
// end a field), no control characters, bounded.
func display(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '{' || r == '}':
			return '_'
		case unicode.IsControl(r) || r == utf8.RuneError:
			return ' '
		}
		return r
	}, s)
	return bounded(strings.TrimSpace(s), maxDisplay)
}

// bounded cuts s to n runes.
func bounded(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// listInterfaces writes the extcap's version line and an interface per
// link and per project of every server it finds (resolveServers). A
// server that cannot be listed is said on stderr; the others are listed.
func listInterfaces(ctx context.Context, w, stderr io.Writer, o options, getenv func(string) string) error {
	fmt.Fprintf(w, "extcap {version=%s}{help=%s}\n", version, helpURL)
	file, ferr := readConfig(configPath())
	if ferr != nil {
		fmt.Fprintln(stderr, "labtap-extcap:", ferr)
	}
	for i, srv := range resolveServers(o, getenv, file) {
		if err := listServer(ctx, w, srv); err != nil {
			// Wireshark shows nothing an extcap prints while listing: an
			// interface says it instead, and capturing it says all.
			fmt.Fprintln(stderr, "labtap-extcap:", err)
			fmt.Fprintf(w, "interface {value=%s}{display=labtap: %s: %s}\n", unlistedIface(i), display(srv.URL), shortReason(err))
		}
	}
	return nil
}

// shortReason says in a few words why a server could not be listed.
func shortReason(err error) string {
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Status == 401:
		return "wrong user or password (401): capture here to see more"
	case errors.As(err, &ae) && ae.Status == 429:
		return "too many failed logins (429): wait"
	case errors.As(err, &ae):
		return fmt.Sprintf("answers %d: capture here to see more", ae.Status)
	}
	return "cannot be listed: capture here to see why"
}

// unlistedIface names the interface that stands for the i-th server when
// it cannot be listed: labtap_server<i>_unlisted (no project or link id is
// so).
func unlistedIface(i int) string { return fmt.Sprintf("%sserver%d_unlisted", ifacePrefix, i) }

// unlistedServer says which server an interface of unlistedIface stands
// for.
func unlistedServer(projectID, linkID string) (int, bool) {
	var i int
	if linkID != "unlisted" {
		return 0, false
	}
	if _, err := fmt.Sscanf(projectID, "server%d", &i); err != nil || unlistedIface(i) != ifaceName(projectID, linkID) {
		return 0, false
	}
	return i, true
}

// listServer writes the interfaces of one server's opened projects.
func listServer(ctx context.Context, w io.Writer, srv server) error {
	c, err := newClient(srv)
	if err != nil {
		return err
	}
	var projects []projectJSON
	if err := c.call(ctx, "GET", "/v2/projects", nil, &projects); err != nil {
		return err
	}
	if len(projects) > maxProjects {
		projects = projects[:maxProjects]
	}
	var lines []string
	links := 0
	for _, p := range projects {
		if p.Status != "opened" || !idPattern.MatchString(p.ProjectID) {
			continue
		}
		var nodes []nodeJSON
		var ls []linkJSON
		base := "/v2/projects/" + p.ProjectID
		if err := c.call(ctx, "GET", base+"/nodes", nil, &nodes); err != nil {
			return err
		}
		if err := c.call(ctx, "GET", base+"/links", nil, &ls); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("interface {value=%s}{display=labtap: %s (whole project)}", ifaceName(p.ProjectID, ""), display(p.Name)))
		for _, l := range ls {
			if links++; links > maxLinks {
				return errors.New("more links than an extcap lists: " + fmt.Sprint(maxLinks))
			}
			if !idPattern.MatchString(l.LinkID) {
				continue
			}
			lines = append(lines, fmt.Sprintf("interface {value=%s}{display=labtap: %s (%s)}", ifaceName(p.ProjectID, l.LinkID), linkName(l, nodes), display(p.Name)))
		}
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// linkName names a link after its ends: "PC1 Ethernet0 ↔ SW1 Ethernet3".
func linkName(l linkJSON, nodes []nodeJSON) string {
	ends := make([]string, 0, 2)
	for _, e := range l.Nodes {
		end := fmt.Sprintf("%d/%d", e.Adapter, e.Port)
		name := "?"
		for _, n := range nodes {
			if n.NodeID != e.NodeID {
				continue
			}
			name = display(n.Name)
			for _, p := range n.Ports {
				if p.Adapter == e.Adapter && p.Port == e.Port && p.Name != "" {
					end = display(p.Name)
				}
			}
		}
		ends = append(ends, name+" "+end)
	}
	return strings.Join(ends, " ↔ ")
}

// listDLTs writes an interface's link type: Ethernet, as labtap captures
// by default (a whole project's pcapng names each link's own).
func listDLTs(w io.Writer, iface string) error {
	if _, _, err := parseIface(iface); err != nil {
		return err
	}
	fmt.Fprintln(w, "dlt {number=1}{name=EN10MB}{display=Ethernet}")
	return nil
}

// listConfig writes the options Wireshark's dialog asks for an interface:
// the server, its user and password (Wireshark keeps them per interface).
// The server's default is the one the list came from.
func listConfig(w io.Writer, iface string, o options, getenv func(string) string) error {
	if _, _, err := parseIface(iface); err != nil {
		return err
	}
	def := ""
	file, _ := readConfig(configPath())
	if srvs := resolveServers(o, getenv, file); len(srvs) > 0 {
		def = srvs[0].URL
	}
	fmt.Fprintf(w, "arg {number=0}{call=--server}{display=Server URL}{type=string}{default=%s}{tooltip=The labtap server, e.g. http://127.0.0.1:3080}{group=Server}\n", display(def))
	fmt.Fprintln(w, "arg {number=1}{call=--user}{display=User}{type=string}{tooltip=The server's user (--user); empty: none, or the configuration file's}{group=Server}")
	fmt.Fprintln(w, "arg {number=2}{call=--password}{display=Password}{type=password}{tooltip=The user's password (--password)}{group=Server}")
	fmt.Fprintln(w, "arg {number=3}{call=--ca-sha256}{display=CA SHA-256}{type=string}{tooltip=For an https server whose CA no system trusts (--tls auto): the fingerprint it logs as ca_sha256}{group=Server}")
	return nil
}

// checkFilter says what is wrong with a capture filter before the server
// compiles it (with libpcap, at the agent), or "" when nothing is.
// Wireshark compiles it for Ethernet itself before it asks.
func checkFilter(f string) string {
	if len(f) > capspec.MaxFilterLen {
		return fmt.Sprintf("capture filter longer than labtap's %d bytes", capspec.MaxFilterLen)
	}
	if !utf8.ValidString(f) || strings.ContainsFunc(f, unicode.IsControl) {
		return "capture filter holds control characters"
	}
	return ""
}
