// Package cli parses a command's flags and their environment twins with
// kong, the same way for every labtap binary: a flag wins over its
// variable, a variable that is set but empty counts as unset, and a bad
// value, on the command line or in the environment, is a usage error
// (exit code 2) that names the flag and the variable. A bad variable that a
// flag overrides is not an error: the flag's value is the one used.
package cli

import (
	"errors"
	"fmt"
	units "github.com/docker/go-units"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
)

// ErrHelp is returned by Parse when --help was asked for and printed.
var ErrHelp = errors.New("help requested")

// UsageError is a bad command line or environment variable: the command
// should print it and exit with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitUsage is the exit code of a usage error, as flag.Parse and most
// Unix tools use it.
const ExitUsage = 2

// helpExit is how kong's help flag stops the parse without exiting the
// process.
type helpExit struct{}

// Parse fills target (a struct with kong tags: `name`, `env`, `default`,
// `help`) from args and the environment. vars fill `${...}` in the tags
// (defaults computed at run time). Help goes to stdout.
func Parse(name, description string, target any, vars map[string]string, stdout io.Writer, args []string) (err error) {
	parser, err := kong.New(target,
		kong.Name(name),
		kong.Description(description),
		kong.Vars(vars),
		kong.Writers(stdout, io.Discard),
		kong.Exit(func(int) { panic(helpExit{}) }),
		// An empty variable counts as unset, as it always did here
		// (docker-compose and shells write FOO= to mean "not set").
		kong.WithBeforeReset(func(ctx *kong.Context) error {
			for _, f := range ctx.Model.Flags {
				f.Tag.Envs = slices.DeleteFunc(slices.Clone(f.Tag.Envs), func(env string) bool {
					v, ok := os.LookupEnv(env)
					return ok && v == ""
				})
			}
			return nil
		}),
		// With a resolver present, kong keeps a variable's parse error
		// until it knows whether the command line set that flag, and drops
		// it if so. This one resolves nothing else.
		kong.Resolvers(kong.ResolverFunc(func(*kong.Context, *kong.Path, *kong.Flag) (any, error) { return nil, nil })),
	)
	if err != nil {
		return err // a mistake in target's tags, not the user's
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(helpExit); !ok {
				panic(r)
			}
			err = ErrHelp
		}
	}()
	if _, err := parser.Parse(args); err != nil {
		return &UsageError{Err: err}
	}
	return nil
}

// Exit writes out the log lines still queued, prints err for the command
// name and exits: 0 after help, ExitUsage for a usage error, 1 for
// anything else. It returns only when err is nil.
func Exit(name string, err error) {
	logOut.Flush()
	switch {
	case err == nil:
		return
	case errors.Is(err, ErrHelp):
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	if _, ok := errors.AsType[*UsageError](err); ok {
		fmt.Fprintf(os.Stderr, "run %s --help for the flags and their variables\n", name)
		os.Exit(ExitUsage)
	}
	os.Exit(1)
}

// VersionFlag is the type of a command's --version flag: it prints the
// "version" variable given to Parse, and Parse returns ErrHelp.
type VersionFlag = kong.VersionFlag

// FlagError is a usage error about a flag's value that only showed once
// used (an address that cannot be bound, a directory that cannot be
// made): it names the flag and its variable.
func FlagError(flag, env string, err error) error {
	return &UsageError{Err: fmt.Errorf("--%s (%s): %w", flag, env, err)}
}

// ListenAddress checks a listen address: host:port with a port number
// (0 picks a free port) and a host that is empty, an IP or a name.
func ListenAddress(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("listen address %q: want host:port", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("listen address %q: the port must be a number within 0-65535", s)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("listen address %q: %q is no host", s, host)
	}
	return nil
}

// MaxByteSize bounds a size flag: 1 PiB.
const MaxByteSize = 1 << 50

// ByteSize parses a size in bytes, with an optional binary unit (512MiB,
// 20GiB, 20g; docker's RAMInBytes), 0 to MaxByteSize.
func ByteSize(s string) (int64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number and a unit: 512MiB, 20GiB)", s)
	}
	if n < 0 || n > MaxByteSize {
		return 0, fmt.Errorf("%q: want 0 to 1PiB", s)
	}
	return n, nil
}

// PortRange parses "LO-HI" (TCP or UDP ports, LO ≤ HI); "" is no range.
func PortRange(s string) ([2]int, error) {
	if s == "" {
		return [2]int{}, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	b, errB := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || errA != nil || errB != nil || a < 1 || b > 65535 || a > b {
		return [2]int{}, fmt.Errorf("port range %q: want LO-HI within 1-65535", s)
	}
	return [2]int{a, b}, nil
}

// Logger returns the logger of a command: lines on stderr, as text
// (key=value) or, with format "json", one JSON object each. The lines are
// written behind the caller (see behindWriter), so a line per request
// costs the request no write(2); Exit writes out what is left.
func Logger(format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(logOut, opts))
	}
	return slog.New(slog.NewTextHandler(logOut, opts))
}
