package bridge

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"golang.org/x/net/bpf"
)

// FilterConfig is what a link does to the frames it relays: GNS3's link
// filters and labtap's bpf. The zero value passes every frame unchanged. Every filter
// applies to both directions of the link.
type FilterConfig struct {
	// Suspend drops every frame; it overrides every other filter.
	Suspend bool
	// BPF holds compiled programs (package pcapfilter compiles tcpdump
	// expressions into them). A frame matching any program is dropped.
	BPF [][]bpf.RawInstruction
	// FrequencyDrop drops one frame in N, counting frames of both
	// directions together: frames N, 2N, 3N... are dropped. -1 drops every
	// frame, 0 none. Range -1 to 32767.
	FrequencyDrop int
	// PacketLoss drops each frame with a probability of exactly
	// PacketLoss/100. Range 0 to 100.
	PacketLoss int
	// Corrupt corrupts each frame with a probability of exactly Corrupt/100,
	// with uBridge's algorithm (see corrupt). Range 0 to 100.
	Corrupt int
	// Latency and Jitter delay each frame by Latency ms, or by a whole
	// number of ms drawn uniformly from [Latency-Jitter, Latency+Jitter]
	// (never below 0), without ever reordering the frames of a direction.
	// Ranges 0 to 32767.
	Latency, Jitter int
}

// Ranges of the filter parameters (GNS3's catalogue, controller/link.py).
const (
	MaxFrequencyDrop = 32767
	MaxDelay         = 32767 // ms, for latency and jitter
)

// Filters is a link's filter chain, built and validated as a whole by
// NewFilters before a link uses it, so a link never runs half a chain. It is
// safe for concurrent use by both directions of a link: its state (the
// frequency_drop counter, the corrupt pattern position) is kept in atomics.
//
// The chain runs in a fixed order (ours; GNS3 documents none):
// bpf, frequency_drop, packet_loss, corrupt, delay.
type Filters struct {
	cfg FilterConfig
	vms []*bpf.VM

	count      atomic.Uint64 // frames seen by frequency_drop
	patternPos atomic.Uint64 // corrupt's position in its XOR pattern
}

// NewFilters checks cfg and builds its chain. Out-of-range values and BPF
// programs the relay cannot run are errors; nothing is half built.
func NewFilters(cfg FilterConfig) (*Filters, error) {
	var errs []error
	if cfg.FrequencyDrop < -1 || cfg.FrequencyDrop > MaxFrequencyDrop {
		errs = append(errs, fmt.Errorf("frequency_drop %d is out of range -1 to %d", cfg.FrequencyDrop, MaxFrequencyDrop))
	}
	if cfg.PacketLoss < 0 || cfg.PacketLoss > 100 {
		errs = append(errs, fmt.Errorf("packet_loss %d is out of range 0 to 100", cfg.PacketLoss))
	}
	if cfg.Corrupt < 0 || cfg.Corrupt > 100 {
		errs = append(errs, fmt.Errorf("corrupt %d is out of range 0 to 100", cfg.Corrupt))
	}
	if cfg.Latency < 0 || cfg.Latency > MaxDelay {
		errs = append(errs, fmt.Errorf("delay latency %d ms is out of range 0 to %d", cfg.Latency, MaxDelay))
	}
	if cfg.Jitter < 0 || cfg.Jitter > MaxDelay {
		errs = append(errs, fmt.Errorf("delay jitter %d ms is out of range 0 to %d", cfg.Jitter, MaxDelay))
	}
	f := &Filters{cfg: cfg}
	for i, prog := range cfg.BPF {
		vm, err := newVM(prog)
		if err != nil {
			errs = append(errs, fmt.Errorf("bpf program %d: %w", i, err))
			continue
		}
		f.vms = append(f.vms, vm)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// NewMatcher loads a compiled program for frames to be matched with in pure
// Go, as the bpf filter runs them: a frame matches when the program returns
// non-zero. It refuses instructions the interpreter does not run. The
// VM's Run is safe for concurrent use.
func NewMatcher(prog []bpf.RawInstruction) (*bpf.VM, error) { return newVM(prog) }

// newVM loads a program into golang.org/x/net/bpf's interpreter, refusing
// instructions it does not run (it would fail on every frame at run time).
func newVM(prog []bpf.RawInstruction) (*bpf.VM, error) {
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		return nil, errors.New("the program has instructions the relay cannot run")
	}
	for _, in := range insns {
		switch in := in.(type) {
		case bpf.NegateA:
			return nil, errors.New("the program negates a value, which the relay's BPF interpreter cannot do")
		case bpf.LoadExtension:
			if in.Num != bpf.ExtLen {
				return nil, fmt.Errorf("the program loads kernel extension %d, which the relay cannot do", in.Num)
			}
		}
	}
	return bpf.NewVM(insns)
}

// delays reports whether frames go through the delay line.
func (f *Filters) delays() bool { return f.cfg.Latency > 0 || f.cfg.Jitter > 0 }

// DropReason names what dropped a frame: the filter, or suspend.
type DropReason int

// The reasons a link drops a frame, in the order the chain runs.
const (
	NotDropped DropReason = iota
	DroppedBySuspend
	DroppedByBPF
	DroppedByFrequency
	DroppedByLoss
	numDropReasons
)

// DropReasons are the reasons a frame is dropped, for iterating
// DirStats.FilteredBy.
var DropReasons = [...]DropReason{DroppedBySuspend, DroppedByBPF, DroppedByFrequency, DroppedByLoss}

// String is the reason's name, as the filter is named in the API.
func (r DropReason) String() string {
	switch r {
	case DroppedBySuspend:
		return "suspend"
	case DroppedByBPF:
		return "bpf"
	case DroppedByFrequency:
		return "frequency_drop"
	case DroppedByLoss:
		return "packet_loss"
	}
	return "none"
}

// drop runs bpf, frequency_drop and packet_loss on a frame and reports
// which dropped it, NotDropped if none did.
func (f *Filters) drop(frame []byte) DropReason {
	for _, vm := range f.vms {
		if n, err := vm.Run(frame); err == nil && n != 0 {
			return DroppedByBPF
		}
	}
	switch n := f.cfg.FrequencyDrop; {
	case n == -1:
		return DroppedByFrequency
	case n > 0:
		if f.count.Add(1)%uint64(n) == 0 {
			return DroppedByFrequency
		}
	}
	if p := f.cfg.PacketLoss; p > 0 && rand.IntN(100) < p {
		return DroppedByLoss
	}
	return NotDropped
}

// corrupts reports whether this frame is to be corrupted.
func (f *Filters) corrupts() bool {
	p := f.cfg.Corrupt
	return p > 0 && rand.IntN(100) < p
}

// corruptPattern is uBridge's XOR pattern (src/packet_filter.c).
var corruptPattern = [8]byte{0x64, 0x13, 0x88, 0x40, 0x1F, 0xA0, 0xAA, 0x55}

// corrupt applies uBridge's corruption to frame in place: the middle
// quarter of the frame, len/4 bytes from offset len/2 - (len/4)/2 + 1, is
// XORed with the cyclic pattern, whose position carries over from frame to
// frame (both directions share it) and starts at 0 with each new chain.
// Frames shorter than 4 bytes are left alone.
func (f *Filters) corrupt(frame []byte) {
	n := len(frame) / 4
	if n == 0 {
		return
	}
	start := f.patternPos.Add(uint64(n)) - uint64(n)
	part := frame[len(frame)/2-n/2+1:][:n]
	for i := range part {
		part[i] ^= corruptPattern[(start+uint64(i))&7]
	}
}

// delay draws a frame's delay.
func (f *Filters) delay() time.Duration {
	ms := f.cfg.Latency
	if j := f.cfg.Jitter; j > 0 {
		ms = max(0, ms-j+rand.IntN(2*j+1))
	}
	return time.Duration(ms) * time.Millisecond
}
