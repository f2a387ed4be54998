package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// A browser hands the extcap, as its URL handler, one of two schemes:
//
//	labtap://HOST:PORT?project_id=P&link_id=L[&protocol=https][&name=...]
//	gns3+pcap://HOST:PORT?project_id=P&link_id=L[&protocol=https][&name=...]
//
// the second being what GNS3's web UI opens for a link's capture (its
// "WebClient pack" handles it), so that UI needs no pack either. A
// labtap:// URL without link_id opens the whole project. The URL comes
// from a web page, so it is read strictly: HOST, PORT and the ids are all
// it may carry, each checked, and only they reach Wireshark's argv (as
// "-i labtap_P_L", an interface name built from checked ids, never an
// option), with the server as LABTAP_URL in its environment. No shell
// runs.

const (
	schemeLabtap = "labtap"
	schemeGNS3   = "gns3+pcap"
	maxNameLen   = 200
)

// hostPattern is a DNS name or an IPv4 address.
var hostPattern = regexp.MustCompile(`^[0-9A-Za-z]([0-9A-Za-z.-]{0,251}[0-9A-Za-z])?$`)

// target is what a URL asks to open.
type target struct {
	server    string // http(s)://HOST:PORT
	projectID string
	linkID    string // "" for the whole project
}

// parseOpenURL reads a labtap:// or gns3+pcap:// URL.
func parseOpenURL(raw string) (target, error) {
	var t target
	if len(raw) > maxURLLen {
		return t, fmt.Errorf("URL longer than %d bytes", maxURLLen)
	}
	// What a handler's command line could take for its quoting (a Windows
	// "%1") never passes, nor anything a browser sends %-encoded. The
	// rest of what a name may hold (' $ ; ...) reaches nothing: only the
	// host, the port and the ids, each checked, are used.
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x21 || r >= 0x7f || strings.ContainsRune("\"`\\<>", r) }) {
		return t, errors.New("URL holds spaces, quotes, backslashes or non-ASCII characters: a browser sends them %-encoded")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return t, fmt.Errorf("URL: %v", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != schemeLabtap && scheme != schemeGNS3 {
		return t, fmt.Errorf("URL scheme %q: want %s:// or %s://", bounded(u.Scheme, 20), schemeLabtap, schemeGNS3)
	}
	if u.Opaque != "" || u.User != nil || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return t, errors.New("URL: want " + scheme + "://HOST:PORT?project_id=...&link_id=..., nothing else")
	}
	host, port := u.Hostname(), u.Port()
	if ip := net.ParseIP(host); ip == nil && !hostPattern.MatchString(host) {
		return t, fmt.Errorf("URL host %q is not a host name or an address", bounded(host, 60))
	}
	if port == "" {
		port = "3080"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return t, fmt.Errorf("URL port %q is not a port", bounded(port, 10))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return t, fmt.Errorf("URL query: %v", err)
	}
	for k, v := range q {
		if !slices.Contains([]string{"project_id", "link_id", "protocol", "name"}, k) {
			return t, fmt.Errorf("URL parameter %q is not one of project_id, link_id, protocol, name", bounded(k, 30))
		}
		if len(v) != 1 {
			return t, fmt.Errorf("URL parameter %s given %d times", k, len(v))
		}
	}
	if len(q.Get("name")) > maxNameLen {
		return t, fmt.Errorf("URL name longer than %d bytes", maxNameLen)
	}
	proto := q.Get("protocol")
	switch proto {
	case "":
		proto = "http"
	case "http", "https":
	default:
		return t, fmt.Errorf("URL protocol %q: want http or https", bounded(proto, 10))
	}
	t.projectID, t.linkID = q.Get("project_id"), q.Get("link_id")
	if !idPattern.MatchString(t.projectID) {
		return t, errors.New("URL project_id is missing or not an id")
	}
	if t.linkID == "" && scheme == schemeGNS3 || t.linkID != "" && (!idPattern.MatchString(t.linkID) || t.linkID == wholeSuffix) {
		return t, errors.New("URL link_id is missing or not an id")
	}
	t.server = proto + "://" + net.JoinHostPort(host, port)
	return t, nil
}

// wiresharkCommand is the command line and environment that open t: argv
// holds only checked text.
func wiresharkCommand(t target, wireshark string, environ []string) (argv, env []string) {
	argv = []string{wireshark, "-k", "-i", ifaceName(t.projectID, t.linkID)}
	// The user's LABTAP_USER and LABTAP_PASSWORD go along only for the
	// server of their own LABTAP_URL; otherwise the configuration file's
	// entry for t's server gives them.
	same := false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LABTAP_URL="); ok && sameURL(v, t.server) {
			same = true
		}
	}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LABTAP_URL" || !same && (k == "LABTAP_USER" || k == "LABTAP_PASSWORD") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LABTAP_URL="+t.server)
	return argv, env
}

// findWireshark returns Wireshark's program: $LABTAP_WIRESHARK, wireshark
// on PATH, or where its installer puts it.
func findWireshark() (string, error) {
	if p := os.Getenv("LABTAP_WIRESHARK"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("wireshark"); err == nil {
		return p, nil
	}
	var known []string
	switch runtime.GOOS {
	case "darwin":
		known = []string{"/Applications/Wireshark.app/Contents/MacOS/Wireshark"}
	case "windows":
		known = []string{`C:\Program Files\Wireshark\Wireshark.exe`}
	}
	for _, p := range known {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("wireshark is not installed (or set LABTAP_WIRESHARK to its program)")
}

// startProgram starts a program and leaves it running; a variable so that
// tests see what would run.
var startProgram = startProgramDefault

func startProgramDefault(argv, env []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return cmd.Start()
}

// openURL starts Wireshark on what a URL names.
func openURL(_ context.Context, raw string, stderr io.Writer) error {
	t, err := parseOpenURL(raw)
	if err != nil {
		return fmt.Errorf("labtap-extcap: %v", err)
	}
	ws, err := findWireshark()
	if err != nil {
		return fmt.Errorf("labtap-extcap: %v", err)
	}
	argv, env := wiresharkCommand(t, ws, os.Environ())
	if err := startProgram(argv, env); err != nil {
		return fmt.Errorf("labtap-extcap: %v", err)
	}
	fmt.Fprintf(stderr, "labtap-extcap: wireshark opens %s on %s\n", argv[3], t.server)
	return nil
}
