package web

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Bounds of tshark, unless configured.
const (
	// DefaultTsharkTimeout bounds one tshark process: a feed that runs
	// longer ends, saying so.
	DefaultTsharkTimeout = time.Hour
	// DefaultTsharkMemory is tshark's address-space limit (RLIMIT_AS).
	DefaultTsharkMemory = 2 << 30
	// DefaultMaxRecords is how many records one feed reads at most.
	DefaultMaxRecords = 1_000_000
	// tsharkCheckTimeout bounds tshark's check of a display filter.
	tsharkCheckTimeout = 20 * time.Second
	// maxPending and maxPendingBytes bound the frames read but not yet
	// answered by tshark that a feed keeps; past either the oldest half go
	// (tshark answered them long ago, or its display filter dropped them:
	// the pipe to tshark holds far less).
	maxPending      = 8192
	maxPendingBytes = 32 << 20
	// maxChecks bounds the filter checks that run tshark at once; more
	// wait their turn (within their request's time).
	maxChecks = 4
	// maxTsharkLine bounds one line of tshark's output.
	maxTsharkLine = 64 << 10
)

// LookTshark returns the path of tshark in PATH, or "" where there is none.
func LookTshark() string {
	p, err := exec.LookPath("tshark")
	if err != nil {
		return ""
	}
	return p
}

// tshark runs the tshark program, bounded: no shell, input on stdin only
// (never a path a user names), no name resolution (-n: nothing leaves the
// host), a timeout and an address-space limit (through prlimit where it is
// installed, set on the started process otherwise).
type tshark struct {
	path    string
	prlimit string
	timeout time.Duration
	memory  int64

	checks chan struct{} // a slot per check running

	mu      sync.Mutex
	checked map[string]string // display filter → tshark's complaint ("": valid)
}

// command returns tshark with args, killed when ctx is done.
func (t *tshark) command(ctx context.Context, args ...string) *exec.Cmd {
	if t.prlimit != "" {
		return exec.CommandContext(ctx, t.prlimit, append([]string{"--as=" + strconv.FormatInt(t.memory, 10), "--core=0", "--", t.path}, args...)...)
	}
	return exec.CommandContext(ctx, t.path, args...)
}

// start starts cmd and, without prlimit, limits its memory.
func (t *tshark) start(cmd *exec.Cmd) error {
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	if t.prlimit == "" {
		limitMemory(cmd.Process.Pid, t.memory)
	}
	return nil
}

// complaint is what tshark said on stderr, for the user: its own lines,
// without the "Running as user root" warning or the "tshark: " prefix.
func complaint(stderr []byte) string {
	var lines []string
	for _, l := range strings.Split(string(stderr), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "Running as user") {
			continue
		}
		lines = append(lines, strings.TrimPrefix(l, "tshark: "))
	}
	msg := strings.Join(lines, "\n")
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	return msg
}

// tsharkInvalidFilter is tshark's exit status for a display filter it
// refuses (INVALID_FILTER).
const tsharkInvalidFilter = 2

// checkDisplay reports whether tshark takes expr as a display filter: it
// reads an empty capture on stdin with it. A filter it refuses is its
// complaint (its message); err is a tshark that could not say.
func (t *tshark) checkDisplay(ctx context.Context, expr string) (complaint string, err error) {
	t.mu.Lock()
	msg, ok := t.checked[expr]
	t.mu.Unlock()
	if ok {
		return msg, nil
	}
	if msg, err = t.runCheck(ctx, expr); err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.checked == nil || len(t.checked) >= filterCacheSize {
		t.checked = make(map[string]string)
	}
	t.checked[expr] = msg
	t.mu.Unlock()
	return msg, nil
}

// runCheck runs tshark on an empty capture with expr: "" if it took it,
// else its complaint; err when tshark could not say.
func (t *tshark) runCheck(ctx context.Context, expr string) (string, error) {
	limit := min(t.timeout, tsharkCheckTimeout)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	select {
	case t.checks <- struct{}{}:
		defer func() { <-t.checks }()
	case <-ctx.Done():
		return "", fmt.Errorf("tshark is busy checking other filters: %w", ctx.Err())
	}
	var header bytes.Buffer
	pcapgo.NewWriter(&header).WriteFileHeader(65535, layers.LinkTypeEthernet)
	cmd := t.command(ctx, "-r", "-", "-n", "-Y", expr)
	cmd.Stdin = &header
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 16 << 10}
	if err := t.start(cmd); err != nil {
		return "", fmt.Errorf("run tshark: %w", err)
	}
	err := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("tshark took longer than %s to check the filter", limit)
	case err == nil:
		return "", nil
	}
	msg := complaint(stderr.Bytes())
	if exit, ok := errors.AsType[*exec.ExitError](err); ok && exit.ExitCode() == tsharkInvalidFilter && msg != "" {
		return msg, nil
	}
	if msg != "" {
		return "", fmt.Errorf("tshark failed: %s", msg)
	}
	return "", fmt.Errorf("tshark failed: %w", err)
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// pendingFrame is a frame given to tshark and not yet answered.
type pendingFrame struct {
	fed   int // its number in what tshark read
	no    int // its number in the capture
	ci    gopacket.CaptureInfo
	data  []byte
	iface string
}

// pendingQueue is the frames given to tshark, oldest first, at most
// maxPending. It is safe for concurrent use.
type pendingQueue struct {
	mu     sync.Mutex
	frames []pendingFrame
	bytes  int
}

func (q *pendingQueue) push(f pendingFrame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.frames) >= maxPending || q.bytes+len(f.data) > maxPendingBytes {
		// Down to half of both bounds, oldest first.
		i := 0
		for i < len(q.frames) && (len(q.frames)-i > maxPending/2 || q.bytes+len(f.data) > maxPendingBytes/2) {
			q.bytes -= len(q.frames[i].data)
			i++
		}
		n := copy(q.frames, q.frames[i:])
		clear(q.frames[n:]) // let the dropped frames' bytes go
		q.frames = q.frames[:n]
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f.data)
}

// take removes the frames before fed and returns the one numbered fed.
func (q *pendingQueue) take(fed int) (pendingFrame, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := 0
	for i < len(q.frames) && q.frames[i].fed < fed {
		i++
	}
	if i < len(q.frames) && q.frames[i].fed == fed {
		i++
	}
	dropped := q.frames[:i]
	for _, d := range dropped {
		q.bytes -= len(d.data)
	}
	var f pendingFrame
	found := i > 0 && dropped[i-1].fed == fed
	if found {
		f = dropped[i-1]
	}
	q.frames = q.frames[i:]
	return f, found
}

// tsharkFields are the columns asked of tshark, in this order; Info last,
// so that a tab in it stays in it.
var tsharkFields = []string{"frame.number", "_ws.col.Protocol", "_ws.col.Source", "_ws.col.Destination", "_ws.col.Info"}

// decodeTshark reads records until the stream ends, the record limit,
// ctx is done or quit is closed; gives the frames that pass f's BPF
// program to tshark (with f's display filter) on its stdin as a pcap; and
// sends a row for each frame tshark printed: its columns (protocol,
// source, destination, info) over gopacket's decode, which still gives
// the tree and bytes.
func (v *View) decodeTshark(ctx context.Context, c *capture, f *filter, rows chan<- Row, quit <-chan struct{}, br *bufio.Reader) error {
	ctx, cancel := context.WithTimeout(ctx, v.tshark.timeout)
	defer cancel()
	args := []string{"-r", "-", "-l", "-n", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f", "-E", "quote=n"}
	for _, e := range tsharkFields {
		args = append(args, "-e", e)
	}
	if f.display != "" {
		args = append(args, "-Y", f.display)
	}
	cmd := v.tshark.command(ctx, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 16 << 10}
	if err := v.tshark.start(cmd); err != nil {
		return fmt.Errorf("run tshark: %w", err)
	}
	var pending pendingQueue
	var first time.Time
	firstSet := make(chan struct{})
	feedErr := make(chan error, 1)
	go func() {
		defer stdin.Close()
		feedErr <- v.feedTshark(c, f, stdin, br, &pending, &first, sync.OnceFunc(func() { close(firstSet) }))
	}()

	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), maxTsharkLine)
	for sc.Scan() {
		cols := strings.SplitN(sc.Text(), "\t", len(tsharkFields))
		if len(cols) != len(tsharkFields) {
			continue
		}
		fed, err := strconv.Atoi(cols[0])
		if err != nil {
			continue
		}
		p, ok := pending.take(fed)
		if !ok {
			continue
		}
		<-firstSet // set before the first frame was fed
		r := decodeRow(p.no, first, p.ci, p.data, c.linkType)
		r.Iface = p.iface
		r.Protocol, r.Source, r.Dest, r.Info = cols[1], cols[2], cols[3], cols[4]
		select {
		case rows <- r:
		case <-quit:
			cancel()
			cmd.Wait()
			return nil
		}
	}
	scanErr := sc.Err()
	if scanErr != nil {
		cancel()
	}
	// tshark's output ended: it read its input to the end (the feeder
	// ended, and said why), or it failed (the feeder may still wait for
	// input; closing the capture, the caller's part, ends it).
	waitErr := cmd.Wait()
	expired := errors.Is(ctx.Err(), context.DeadlineExceeded)
	var ferr error
	select {
	case ferr = <-feedErr:
	default:
	}
	switch {
	case expired:
		return fmt.Errorf("the view stops after %s", v.tshark.timeout)
	case scanErr != nil:
		return fmt.Errorf("read tshark's output: %w", scanErr)
	case waitErr != nil:
		if msg := complaint(stderr.Bytes()); msg != "" {
			return errors.New("tshark: " + msg)
		}
		return fmt.Errorf("tshark: %w", waitErr)
	}
	return ferr
}

// feedTshark writes the capture's records that pass f's BPF program to w
// as a pcap, each flushed once no more input is at hand, and keeps them in
// pending. It sets *first to the first frame's time and calls firstSet
// before the first write, or when it returns.
func (v *View) feedTshark(c *capture, f *filter, w io.Writer, br *bufio.Reader, pending *pendingQueue, first *time.Time, firstSet func()) error {
	defer firstSet()
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(262144, c.linkType); err != nil {
		return err
	}
	fed := 0
	for no := 1; ; no++ {
		if no > v.maxRecords {
			return recordLimit(v.maxRecords)
		}
		data, ci, err := c.read()
		if err != nil {
			return err
		}
		if no == 1 {
			*first = ci.Timestamp
			firstSet()
		}
		if !f.matchRaw(data) {
			continue
		}
		fed++
		p := pendingFrame{fed: fed, no: no, ci: ci, data: data} // ReadPacketData gives each record its own bytes
		if c.iface != nil {
			p.iface = c.iface(ci.InterfaceIndex)
		}
		pending.push(p)
		ci.CaptureLength = len(data)
		if err := pw.WritePacket(ci, data); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// errRecordLimit ends a feed at its record limit.
var errRecordLimit = errors.New("record limit")

func recordLimit(n int) error {
	return fmt.Errorf("%w: the view reads at most %d records of a capture; download it for the rest", errRecordLimit, n)
}
