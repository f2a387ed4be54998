// The labtap-extcap command is a Wireshark extcap for labtap: it lists a
// server's links (and one "whole project" interface per project) as
// Wireshark capture interfaces and streams a link's live capture into
// Wireshark, starting the capture when it does not run and stopping it
// at the end when it started it. Given a labtap:// or gns3+pcap:// URL
// (--open URL, what a browser's URL handler runs), it starts Wireshark on
// that link. docs/captures.md says how to install it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is the extcap's version, shown by Wireshark.
const version = "1.0.0"

// helpURL is the page Wireshark's help button opens.
const helpURL = "https://github.com/labtap/labtap/blob/main/docs/captures.md#wireshark-in-one-click"

// args are the command line: Wireshark's extcap options and labtap's own.
type args struct {
	interfaces, dlts, config, capture, reload bool
	iface, fifo, filter, wsVersion            string
	controlIn, controlOut                     string
	debug                                     bool
	debugFile                                 string
	opts                                      options
	open                                      string
}

func parseArgs(argv []string, stderr io.Writer) (args, error) {
	var a args
	fl := flag.NewFlagSet("labtap-extcap", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.BoolVar(&a.interfaces, "extcap-interfaces", false, "list the interfaces (Wireshark)")
	fl.StringVar(&a.wsVersion, "extcap-version", "", "Wireshark's version (Wireshark)")
	fl.BoolVar(&a.dlts, "extcap-dlts", false, "list an interface's link types (Wireshark)")
	fl.BoolVar(&a.config, "extcap-config", false, "list an interface's options (Wireshark)")
	fl.BoolVar(&a.reload, "extcap-reload-option", false, "reload an option's values (Wireshark; none here)")
	fl.StringVar(&a.iface, "extcap-interface", "", "the interface (Wireshark)")
	fl.BoolVar(&a.capture, "capture", false, "capture into --fifo (Wireshark)")
	fl.StringVar(&a.fifo, "fifo", "", "the pipe to write the capture to (Wireshark)")
	fl.StringVar(&a.filter, "extcap-capture-filter", "", "the capture filter: labtap's capture_filter (Wireshark)")
	fl.StringVar(&a.controlIn, "extcap-control-in", "", "toolbar control pipe (Wireshark; unused)")
	fl.StringVar(&a.controlOut, "extcap-control-out", "", "toolbar control pipe (Wireshark; unused)")
	fl.BoolVar(&a.debug, "debug", false, "debug messages (Wireshark; unused)")
	fl.StringVar(&a.debugFile, "debug-file", "", "debug file (Wireshark; unused)")
	fl.StringVar(&a.opts.Server, "server", "", "the labtap server's URL, e.g. http://127.0.0.1:3080")
	fl.StringVar(&a.opts.User, "user", "", "the server's user")
	fl.StringVar(&a.opts.Password, "password", "", "the user's password")
	fl.StringVar(&a.opts.CASHA256, "ca-sha256", "", "the SHA-256 fingerprint of an https server's CA (--tls auto)")
	fl.StringVar(&a.open, "open", "", "a labtap:// or gns3+pcap:// URL: start Wireshark on its link")
	if err := fl.Parse(argv); err != nil {
		return a, err
	}
	if fl.NArg() > 0 {
		return a, fmt.Errorf("unexpected argument %q: a URL goes after --open", fl.Arg(0))
	}
	return a, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status. Errors go to stderr,
// which Wireshark shows in its dialog when the status is not 0.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	a, err := parseArgs(argv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "labtap-extcap:", err)
		return 2
	}
	env := os.Getenv
	switch {
	case a.open != "":
		err = openURL(ctx, a.open, stderr)
	case a.interfaces:
		err = listInterfaces(ctx, stdout, stderr, a.opts, env)
	case a.dlts:
		err = listDLTs(stdout, a.iface)
	case a.config:
		err = listConfig(stdout, a.iface, a.opts, env)
	case a.capture:
		err = capture(ctx, a, env)
	case a.iface != "" && a.filter != "":
		// Wireshark checks a capture filter so: a line on stdout is the
		// error, nothing means it is valid.
		if msg := checkFilter(a.filter); msg != "" {
			fmt.Fprintln(stdout, msg)
		}
	case a.reload:
	default:
		fmt.Fprintln(stderr, "labtap-extcap is a Wireshark extcap: install it in Wireshark's personal extcap folder (docs/captures.md, \"Wireshark in one click\"), or run it with --open URL")
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
