package pcapfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"
)

// MaxInstructions is the largest program a filter may compile to: the
// kernel's BPF_MAXINSNS, which classic BPF tools hold to.
const MaxInstructions = 4096

// DefaultDeadline bounds one CompileAll.
const DefaultDeadline = 2 * time.Second

// ErrTooComplex is a filter over the budget: it took longer than the
// deadline to compile, or compiled to more than MaxInstructions.
var ErrTooComplex = errors.New("too complex")

// Subcommand is the last argument of the process CompileAll runs to
// compile: its own executable, whose main (or TestMain) calls Main first.
// The argument before it, -test.run=^$, makes a test binary that lacks
// the call run no test and exit, rather than run its tests again.
const Subcommand = "labtap-compile-filters"

// ready is the byte a compiling child writes first, once it runs.
const ready = 'R'

// startTimeout bounds how long a compiling child may take to start: past
// it the compile fails as an internal error, not as a filter too complex.
const startTimeout = time.Minute

// job is what a compiling child reads; result what it writes.
type job struct {
	LinkType layers.LinkType `json:"link_type"`
	Exprs    []string        `json:"exprs"`
}

type result struct {
	Progs [][]bpf.RawInstruction `json:"progs"`
	Err   string                 `json:"err"`
}

// Main turns this process into a compiling child when CompileAll started
// it so, and returns otherwise. libpcap's compiler can run for minutes on
// a large expression and cannot be interrupted; in a child process the
// deadline can kill it, and the process's other compiles (gopacket
// serialises them) never wait for it. A program that calls CompileAll
// calls Main first thing in main; a test binary, in TestMain.
func Main() {
	if len(os.Args) < 2 || os.Args[len(os.Args)-1] != Subcommand {
		return
	}
	// Say it has started: the deadline is for compiling, not for starting
	// a process, which a loaded machine can make slow.
	os.Stdout.Write([]byte{ready})
	var j job
	var r result
	if err := json.NewDecoder(os.Stdin).Decode(&j); err != nil {
		r.Err = err.Error()
	}
	for _, e := range j.Exprs {
		if r.Err != "" {
			break
		}
		prog, err := Compile(j.LinkType, e)
		if err != nil {
			r.Err = err.Error()
			break
		}
		r.Progs = append(r.Progs, prog)
	}
	json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

// CompileAll compiles each expression for a link type within a deadline (0
// means DefaultDeadline), in a child process of the running executable,
// which is killed when the deadline passes. A filter over the budget
// (deadline, or a program over MaxInstructions) is an error matching
// ErrTooComplex; an expression libpcap refuses is an error with libpcap's
// message.
func CompileAll(ctx context.Context, lt layers.LinkType, exprs []string, deadline time.Duration) ([][]bpf.RawInstruction, error) {
	if len(exprs) == 0 {
		return nil, nil
	}
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("compile filter: %w", err)
	}
	in, err := json.Marshal(job{LinkType: lt, Exprs: exprs})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-test.run=^$", Subcommand)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("compile filter: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compile filter: %w", err)
	}
	// The child's output, read whole; its first byte says it runs.
	started := make(chan struct{})
	done := make(chan []byte, 1)
	go func() {
		var first [1]byte
		if n, _ := io.ReadFull(stdout, first[:]); n == 1 && first[0] == ready {
			close(started)
		}
		rest, _ := io.ReadAll(stdout)
		done <- rest
	}()
	var out []byte
	var why error // why the child was killed, if it was
	select {
	case <-started:
		timer := time.NewTimer(deadline)
		defer timer.Stop()
		select {
		case out = <-done:
		case <-timer.C:
			why = fmt.Errorf("compiling took over %v: %w", deadline, ErrTooComplex)
		case <-ctx.Done():
			why = ctx.Err()
		}
	case out = <-done: // ended before saying it runs
		cmd.Wait()
		return nil, fmt.Errorf("compile filter: %s ended without compiling: its main (or TestMain) must call pcapfilter.Main first", self)
	case <-time.After(startTimeout):
		why = fmt.Errorf("compile filter: the compiling process did not start within %v", startTimeout)
	case <-ctx.Done():
		why = ctx.Err()
	}
	if why != nil {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
		return nil, why
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("compile filter: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("compile filter: child replied %q: %w", out, err)
	}
	if r.Err != "" {
		return nil, errors.New(r.Err)
	}
	for i, p := range r.Progs {
		if len(p) > MaxInstructions {
			return nil, fmt.Errorf("%q compiles to %d instructions, over %d: %w", exprs[i], len(p), MaxInstructions, ErrTooComplex)
		}
	}
	return r.Progs, nil
}
