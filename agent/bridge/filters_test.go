package bridge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/bpf"
)

func TestNewFiltersRefusesOutOfRangeValues(t *testing.T) {
	tests := []struct {
		name string
		cfg  FilterConfig
	}{
		{"frequency_drop below -1", FilterConfig{FrequencyDrop: -2}},
		{"frequency_drop above 32767", FilterConfig{FrequencyDrop: 32768}},
		{"negative packet_loss", FilterConfig{PacketLoss: -1}},
		{"packet_loss above 100", FilterConfig{PacketLoss: 101}},
		{"negative corrupt", FilterConfig{Corrupt: -1}},
		{"corrupt above 100", FilterConfig{Corrupt: 150}},
		{"negative latency", FilterConfig{Latency: -1}},
		{"latency above 32767", FilterConfig{Latency: 32768}},
		{"negative jitter", FilterConfig{Latency: 10, Jitter: -1}},
		{"jitter above 32767", FilterConfig{Latency: 10, Jitter: 40000}},
		{"bpf with an instruction the VM lacks", FilterConfig{BPF: [][]bpf.RawInstruction{{{Op: 0x84}, {Op: 0x16}}}}}, // neg; ret a
		{"empty bpf program", FilterConfig{BPF: [][]bpf.RawInstruction{{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFilters(tt.cfg); err == nil {
				t.Fatalf("NewFilters(%+v) succeeded", tt.cfg)
			}
		})
	}
	for _, ok := range []FilterConfig{
		{FrequencyDrop: -1}, {FrequencyDrop: 32767}, {PacketLoss: 100}, {Corrupt: 100},
		{Latency: 32767, Jitter: 32767}, {Jitter: 5}, // jitter alone: GNS3 never sends it, the relay takes it
	} {
		if _, err := NewFilters(ok); err != nil {
			t.Errorf("NewFilters(%+v) = %v", ok, err)
		}
	}
}

// seqFrame is a 64-byte frame whose first 8 bytes hold i.
func seqFrame(i int) []byte {
	f := make([]byte, 64)
	binary.BigEndian.PutUint64(f, uint64(i))
	for j := 8; j < len(f); j++ {
		f[j] = byte(i + j)
	}
	return f
}

func seqOf(f []byte) int { return int(binary.BigEndian.Uint64(f)) }

// udpRelay is a real relay between two emulators over loopback UDP.
type udpRelay struct {
	emA, emB *emulator
	pa, pb   *UDPPort
	l        *Link
}

func newUDPRelay(t *testing.T, f *Filters) *udpRelay {
	t.Helper()
	r := &udpRelay{emA: newEmulator(t), emB: newEmulator(t)}
	r.pa, r.pb = facing(t, r.emA), facing(t, r.emB)
	r.l = NewLink(r.pa, r.pb, f)
	t.Cleanup(r.l.Close)
	return r
}

// pump sends n sequence-numbered frames from A, a window at a time so that
// no socket buffer can overflow, and returns the frames B received. Every
// frame is accounted for by the relay (forwarded or filtered) before the next
// window goes.
func (r *udpRelay) pump(t *testing.T, n int, frame func(int) []byte) [][]byte {
	t.Helper()
	base := r.l.Stats()[AtoB]
	var got [][]byte
	const window = 128
	for sent := 0; sent < n; {
		w := min(window, n-sent)
		for i := range w {
			r.emA.sendTo(r.pa.LocalAddr(), frame(sent+i))
		}
		sent += w
		var forwarded int
		waitFor(t, func() bool {
			s := r.l.Stats()[AtoB]
			forwarded = int(s.Forwarded - base.Forwarded)
			return forwarded+int(s.Filtered-base.Filtered) == sent
		})
		for len(got) < forwarded {
			f := r.emB.recv(2 * time.Second)
			if f == nil {
				t.Fatalf("B received %d frames, the relay forwarded %d", len(got), forwarded)
			}
			got = append(got, f)
		}
	}
	return got
}

// sixSigma returns the bounds that a binomial count of n draws with
// probability p stays within except with probability about 2e-9.
func sixSigma(n int, p float64) (lo, hi int) {
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	return int(math.Floor(mean - 6*sd)), int(math.Ceil(mean + 6*sd))
}

func TestPacketLossDropsExactlyItsShareOfFramesThroughARealRelay(t *testing.T) {
	for _, p := range []int{0, 50, 100} {
		t.Run(fmt.Sprint(p, "%"), func(t *testing.T) {
			r := newUDPRelay(t, mustFilters(t, FilterConfig{PacketLoss: p}))
			const n = 10000
			got := r.pump(t, n, seqFrame)
			lo, hi := sixSigma(n, 1-float64(p)/100)
			if len(got) < lo || len(got) > hi {
				t.Fatalf("%d of %d frames passed packet_loss %d, want %d to %d", len(got), n, p, lo, hi)
			}
			last := -1
			for _, f := range got { // survivors arrive intact and in order
				if s := seqOf(f); s <= last || !bytes.Equal(f, seqFrame(s)) {
					t.Fatalf("frame %d after %d, or changed", s, last)
				}
				last = seqOf(f)
			}
			if st := r.l.Stats()[AtoB]; st.Filtered != uint64(n-len(got)) {
				t.Fatalf("stats %+v, want %d filtered", st, n-len(got))
			}
		})
	}
}

func TestFrequencyDropDropsEveryNthFrameCountingBothDirections(t *testing.T) {
	a, b := &memPort{}, &memPort{}
	l := NewLink(a, b, mustFilters(t, FilterConfig{FrequencyDrop: 3}))
	defer l.Close()
	for i := 1; i <= 12; i++ { // frames 3, 6, 9, 12 are dropped, whichever side sent them
		if i%2 == 1 {
			a.inject(seqFrame(i))
		} else {
			b.inject(seqFrame(i))
		}
	}
	var passed []int
	for _, p := range []*memPort{b, a} {
		frames, _ := p.received()
		for _, f := range frames {
			passed = append(passed, seqOf(f))
		}
	}
	want := []int{1, 5, 7, 11, 2, 4, 8, 10} // odd frames reach B, even ones A
	if fmt.Sprint(passed) != fmt.Sprint(want) {
		t.Fatalf("passed %v, want %v", passed, want)
	}

	l.SetFilters(mustFilters(t, FilterConfig{FrequencyDrop: -1}))
	a.inject(seqFrame(100))
	b.inject(seqFrame(101))
	if a.count()+b.count() != len(want) {
		t.Fatal("frequency_drop -1 let a frame through")
	}
}

// corrupted returns frame as uBridge's corrupt filter leaves it, with the
// pattern at position pos, and the next position.
func corrupted(frame []byte, pos int) ([]byte, int) {
	out := bytes.Clone(frame)
	n := len(out) / 4
	off := len(out)/2 - n/2 + 1
	for i := range n {
		out[off+i] ^= []byte{0x64, 0x13, 0x88, 0x40, 0x1F, 0xA0, 0xAA, 0x55}[(pos+i)%8]
	}
	return out, pos + n
}

func TestCorruptFlipsTheMiddleQuarterWithUBridgesPatternThroughARealRelay(t *testing.T) {
	r := newUDPRelay(t, mustFilters(t, FilterConfig{Corrupt: 100}))
	sizes := []int{106, 64, 3, 4, 1500, 61} // a VPCS echo, a runt, odd sizes
	pos := 0
	for i, size := range sizes {
		frame := bytes.Repeat([]byte{byte(0x10 + i)}, size)
		got := r.pump(t, 1, func(int) []byte { return frame })
		var want []byte
		want, pos = corrupted(frame, pos)
		if !bytes.Equal(got[0], want) {
			t.Fatalf("frame of %d bytes became\n%x\nwant\n%x", size, got[0], want)
		}
		if size >= 4 && bytes.Equal(got[0], frame) {
			t.Fatalf("frame of %d bytes was not corrupted", size)
		}
	}
	// A 106-byte ICMP echo frame: bytes 41 to 66 are flipped.
	f := make([]byte, 106)
	c, _ := corrupted(f, 0)
	for i := range c {
		if changed := c[i] != 0; changed != (i >= 41 && i <= 66) {
			t.Fatalf("byte %d changed: %v", i, changed)
		}
	}
}

func TestCorruptHitsItsShareOfFramesAndLeavesTheSenderUntouched(t *testing.T) {
	r := newUDPRelay(t, mustFilters(t, FilterConfig{Corrupt: 30}))
	const n = 3000
	got := r.pump(t, n, seqFrame)
	if len(got) != n {
		t.Fatalf("corrupt dropped frames: %d of %d arrived", len(got), n)
	}
	changed := 0
	for i, f := range got {
		if !bytes.Equal(f, seqFrame(i)) {
			changed++
		}
	}
	lo, hi := sixSigma(n, 0.3)
	if changed < lo || changed > hi {
		t.Fatalf("%d of %d frames corrupted at 30%%, want %d to %d", changed, n, lo, hi)
	}

	// The relay corrupts a copy: a frame a switch floods to two links must
	// reach the second one intact.
	a, b := &memPort{}, &memPort{}
	l := NewLink(a, b, mustFilters(t, FilterConfig{Corrupt: 100}))
	defer l.Close()
	frame := seqFrame(7)
	a.inject(frame)
	if !bytes.Equal(frame, seqFrame(7)) {
		t.Fatal("the relay changed the frame it was given")
	}
}

// dropFirstByte is a BPF program matching frames whose first byte is v.
func dropFirstByte(t *testing.T, v uint32) []bpf.RawInstruction {
	t.Helper()
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipFalse: 1},
		bpf.RetConstant{Val: 65535},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func TestBPFDropsFramesMatchingAnyProgram(t *testing.T) {
	r := newUDPRelay(t, mustFilters(t, FilterConfig{BPF: [][]bpf.RawInstruction{dropFirstByte(t, 0xaa), dropFirstByte(t, 0xbb)}}))
	frames := [][]byte{{0xaa, 1}, {0x01, 2}, {0xbb, 3}, {0xcc, 4}, {0x02}, {0xaa}}
	got := r.pump(t, len(frames), func(i int) []byte { return frames[i] })
	if fmt.Sprintf("%x", got) != fmt.Sprintf("%x", [][]byte{{0x01, 2}, {0xcc, 4}, {0x02}}) {
		t.Fatalf("passed %x", got)
	}
}

func TestSuspendOverridesEveryFilterAndChangesTakeEffectAtOnce(t *testing.T) {
	r := newUDPRelay(t, nil)
	if got := r.pump(t, 10, seqFrame); len(got) != 10 {
		t.Fatalf("%d of 10 frames passed a link without filters", len(got))
	}
	r.l.SetFilters(mustFilters(t, FilterConfig{Suspend: true, Latency: 10}))
	if got := r.pump(t, 10, seqFrame); len(got) != 0 {
		t.Fatalf("a suspended link passed %d frames", len(got))
	}
	r.l.SetFilters(mustFilters(t, FilterConfig{PacketLoss: 0, FrequencyDrop: 2}))
	if got := r.pump(t, 10, seqFrame); len(got) != 5 {
		t.Fatalf("frequency_drop 2 passed %d of 10 frames", len(got))
	}
}

func TestDelayReleasesEachFrameOnTimeWithoutHeadOfLineBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &memPort{}, &memPort{}
		l := NewLink(a, b, mustFilters(t, FilterConfig{Latency: 50}))
		defer l.Close()
		start := time.Now()
		// Ten frames 1 ms apart. Were the delay served in the receive loop
		// (uBridge), frame i would leave at (i+1)*50 ms.
		for i := range 10 {
			a.inject(seqFrame(i))
			if i == 0 && a.count() != 0 {
				t.Fatal("a delayed frame went the other way")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		frames, at := b.received()
		if len(frames) != 10 {
			t.Fatalf("%d of 10 frames left the delay line", len(frames))
		}
		for i := range frames {
			if seqOf(frames[i]) != i || at[i].Sub(start) != time.Duration(50+i)*time.Millisecond {
				t.Fatalf("frame %d (seq %d) left at %v, want %v", i, seqOf(frames[i]), at[i].Sub(start), time.Duration(50+i)*time.Millisecond)
			}
		}
		if st := l.Stats()[AtoB]; st.Forwarded != 10 || st.Delayed != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestJitterNeverReordersADirection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &memPort{}, &memPort{}
		l := NewLink(a, b, mustFilters(t, FilterConfig{Latency: 50, Jitter: 40}))
		defer l.Close()
		start := time.Now()
		// Dense traffic: frames 0.5 ms apart, much closer than the jitter.
		sent := make([]time.Duration, 200)
		for i := range sent {
			sent[i] = time.Since(start)
			a.inject(seqFrame(i))
			time.Sleep(time.Millisecond / 2)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		frames, at := b.received()
		if len(frames) != len(sent) {
			t.Fatalf("%d of %d frames arrived", len(frames), len(sent))
		}
		for i, f := range frames {
			d := at[i].Sub(start) - sent[i]
			if seqOf(f) != i || d < 10*time.Millisecond || i > 0 && at[i].Before(at[i-1]) {
				t.Fatalf("frame %d arrived in place %d after %v", seqOf(f), i, d)
			}
		}
	})
}

func TestJitterDrawsEachDelayFromItsRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &memPort{}, &memPort{}
		l := NewLink(a, b, mustFilters(t, FilterConfig{Latency: 50, Jitter: 40}))
		defer l.Close()
		// Sparse traffic: 100 ms apart, so no frame waits for another and
		// each delay is the one drawn, a whole number of ms in [10, 90].
		const n = 60
		sentAt := make([]time.Time, n)
		for i := range n {
			sentAt[i] = time.Now()
			a.inject(seqFrame(i))
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		_, at := b.received()
		if len(at) != n {
			t.Fatalf("%d of %d frames arrived", len(at), n)
		}
		seen := map[time.Duration]bool{}
		for i, arrival := range at {
			d := arrival.Sub(sentAt[i])
			if d < 10*time.Millisecond || d > 90*time.Millisecond || d%time.Millisecond != 0 {
				t.Fatalf("frame %d delayed %v, want 10-90 ms", i, d)
			}
			seen[d] = true
		}
		// 60 draws from 81 values: fewer than 20 distinct ones would be a
		// broken draw (the chance of it is below 1e-15).
		if len(seen) < 20 {
			t.Fatalf("only %d distinct delays in %d frames", len(seen), n)
		}
	})
}

func TestDelayLineIsBoundedAndSuspendEmptiesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &memPort{}, &memPort{}
		l := NewLink(a, b, mustFilters(t, FilterConfig{Latency: 1000}))
		defer l.Close()
		big := make([]byte, 60000)
		fits := delayMaxBytes / len(big)
		for range fits + 10 {
			a.inject(big)
		}
		if st := l.Stats()[AtoB]; st.Delayed != int64(fits) || st.DelayDrops != 10 {
			t.Fatalf("stats %+v, want %d delayed and 10 dropped", st, fits)
		}
		// Suspend drops what is in the line when it is due.
		l.SetFilters(mustFilters(t, FilterConfig{Suspend: true}))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if b.count() != 0 {
			t.Fatalf("%d frames left a suspended link", b.count())
		}
		if st := l.Stats()[AtoB]; st.Delayed != 0 || st.Filtered != uint64(fits) {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestRemovingTheDelayKeepsFramesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &memPort{}, &memPort{}
		l := NewLink(a, b, mustFilters(t, FilterConfig{Latency: 100}))
		defer l.Close()
		a.inject(seqFrame(0), seqFrame(1))
		l.SetFilters(nil)
		a.inject(seqFrame(2)) // must wait behind 0 and 1
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		a.inject(seqFrame(3)) // the line is empty again: straight through
		frames, _ := b.received()
		var seqs []int
		for _, f := range frames {
			seqs = append(seqs, seqOf(f))
		}
		if fmt.Sprint(seqs) != "[0 1 2 3]" {
			t.Fatalf("frames arrived in order %v", seqs)
		}
	})
}

func TestDelayThroughARealRelay(t *testing.T) {
	r := newUDPRelay(t, mustFilters(t, FilterConfig{Latency: 30}))
	start := time.Now()
	for i := range 20 { // sent back to back: none may wait for another
		r.emA.sendTo(r.pa.LocalAddr(), seqFrame(i))
	}
	for i := range 20 {
		f := r.emB.recv(5 * time.Second)
		if f == nil || seqOf(f) != i {
			t.Fatalf("frame %d: got %x", i, f)
		}
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("20 frames with a 30 ms delay arrived after %v", el)
	}
}

// BenchmarkLinkHandleFrames measures the relay's per-frame work in user
// space (filters, tap, hand-off to the send side), without sockets.
func BenchmarkLinkHandleFrames(b *testing.B) {
	prog := []bpf.Instruction{ // icmp[icmptype] == 8, as libpcap compiles it for Ethernet
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x0800, SkipFalse: 8},
		bpf.LoadAbsolute{Off: 23, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 1, SkipFalse: 6},
		bpf.LoadAbsolute{Off: 20, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},
		bpf.LoadMemShift{Off: 14},
		bpf.LoadIndirect{Off: 14, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 8, SkipFalse: 1},
		bpf.RetConstant{Val: 65535},
		bpf.RetConstant{Val: 0},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  *FilterConfig
	}{
		{"none", nil},
		{"bpf", &FilterConfig{BPF: [][]bpf.RawInstruction{raw}}},
		{"loss 10", &FilterConfig{PacketLoss: 10}},
		{"all but delay", &FilterConfig{BPF: [][]bpf.RawInstruction{raw}, FrequencyDrop: 1000, PacketLoss: 1, Corrupt: 1}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var f *Filters
			if tt.cfg != nil {
				f = mustFilters(b, *tt.cfg)
			}
			a, z := &memPort{}, &discardPort{}
			l := NewLink(a, z, f)
			defer l.Close()
			batch := make([][]byte, maxBatch)
			for i := range batch {
				batch[i] = seqFrame(i)
				batch[i][12], batch[i][13] = 0x08, 0x00
			}
			h := a.h.Load().h
			b.ReportAllocs()
			for b.Loop() {
				h.HandleFrames(batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/frame")
		})
	}
}

// discardPort is a Port that takes every frame and keeps none.
type discardPort struct{}

func (discardPort) Send(frames [][]byte) int { return len(frames) }
func (discardPort) SetHandler(Handler)       {}
