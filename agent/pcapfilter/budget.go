package pcapfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// childEnv marks the process CompileAll runs to compile: its own
// executable, which compiles what it reads on stdin and exits (see init).
const childEnv = "LABTAP_PCAPFILTER_CHILD"

// job is what a compiling child reads; result what it writes.
type job struct {
	LinkType layers.LinkType `json:"link_type"`
	Exprs    []string        `json:"exprs"`
}

type result struct {
	Progs [][]bpf.RawInstruction `json:"progs"`
	Err   string                 `json:"err"`
}

// init turns this process into a compiling child when CompileAll started
// it so. libpcap's compiler can run for minutes on a large expression and
// cannot be interrupted; in a child process the deadline can kill it, and
// the agent's other compiles (gopacket serialises them) never wait for it.
func init() {
	if os.Getenv(childEnv) != "1" {
		return
	}
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
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("compiling took over %v: %w", deadline, ErrTooComplex)
	}
	if err != nil {
		return nil, fmt.Errorf("compile filter: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("compile filter: child replied %q: %w", out.Bytes(), err)
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
