package captures

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/labtap/labtap/capspec"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// alignedDisk is the direct handle of a memDisk: like O_DIRECT on Linux, it
// refuses (EINVAL) a write whose file offset, length or memory is not
// aligned, and it counts what it wrote.
type alignedDisk struct {
	*memDisk
	mu      sync.Mutex
	writes  int
	bytes   int64
	sizes   []int // of each write
	misfits []string
}

func (d *alignedDisk) WriteAt(p []byte, off int64) (int, error) {
	return d.WriteVecAt([][]byte{p}, off)
}

// WriteVecAt is pwritev(2) on a direct handle (WriteAt is pwrite, one
// buffer): every buffer must be aligned, and the call is counted once, with
// its size.
func (d *alignedDisk) WriteVecAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if off%directAlign != 0 || len(b)%directAlign != 0 || addr%directAlign != 0 {
			d.mu.Lock()
			d.misfits = append(d.misfits, fmt.Sprintf("%d bytes at %d from %#x", len(b), off, addr))
			d.mu.Unlock()
			return 0, syscall.EINVAL
		}
		total += len(b)
	}
	n := 0
	var err error
	for _, b := range bufs {
		var k int
		k, err = d.memDisk.WriteAt(b, off+int64(n))
		n += k
		if err != nil {
			break
		}
	}
	d.mu.Lock()
	d.writes++
	d.bytes += int64(n)
	d.sizes = append(d.sizes, total)
	d.mu.Unlock()
	return n, err
}

func (d *alignedDisk) Close() error { return nil }

// lab drives a capture the way a busy link does: batches of frames of
// mixed sizes (so records straddle blocks anywhere), both directions, with
// pauses that let flushes of the block being filled fall between block
// writes. Each frame starts with its sequence number. The same seed gives
// the same calls, so two files written with one clock are equal.
func lab(c *File, seed uint64, total int, pause bool) (sent int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	frame := make([]byte, 9000)
	for sent < total {
		batch := make([][]byte, 1+rng.IntN(40))
		for i := range batch {
			n := 60 + rng.IntN(1455)
			if rng.IntN(50) == 0 {
				n = 9000 // a jumbo now and then
			}
			f := bytes.Clone(frame[:n])
			binary.BigEndian.PutUint32(f, uint32(sent+i))
			batch[i] = f
		}
		c.WritePackets(Direction(rng.IntN(2)), batch)
		sent += len(batch)
		nap := rng.IntN(60) // drawn either way: the calls stay the same
		if pause && nap < 3 {
			time.Sleep(time.Duration(nap) * time.Millisecond)
		}
	}
	return sent
}

// checkSequence reads a capture back and checks it holds frames 0..n-1 in
// order.
func checkSequence(t *testing.T, file []byte, format string, n int) {
	t.Helper()
	read := readerOf(t, format, file)
	for i := 0; ; i++ {
		data, _, err := read()
		if errors.Is(err, io.EOF) {
			if i != n {
				t.Fatalf("file holds %d frames, want %d", i, n)
			}
			return
		}
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got := int(binary.BigEndian.Uint32(data)); got != i {
			t.Fatalf("record %d holds frame %d", i, got)
		}
	}
}

func TestDirectWritesAreAlignedAndWriteWhatBufferedWritesWrite(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			const frames = 12000 // about 10 blocks

			plain := &memDisk{room: -1}
			c, err := newFile("/nowhere/plain", plain, nil, Options{Format: format, Now: fixedClock(t0), FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			sent := lab(c, 7, frames, false)
			c.Close()

			disk := &memDisk{room: -1}
			direct := &alignedDisk{memDisk: disk}
			c, err = newFile("/nowhere/direct", disk, direct, Options{Format: format, Now: fixedClock(t0), FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if n := lab(c, 7, frames, true); n != sent {
				t.Fatalf("sent %d frames, then %d", sent, n)
			}
			c.Close()
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			if got, _, dropped := c.Stats(); got != uint64(sent) || dropped != 0 {
				t.Fatalf("Stats: %d frames, %d dropped; want %d, 0", got, dropped, sent)
			}
			if len(direct.misfits) > 0 {
				t.Fatalf("%d direct writes not aligned, first: %s", len(direct.misfits), direct.misfits[0])
			}
			if c.noDirect.Load() {
				t.Fatal("the capture gave up direct writes")
			}
			file := disk.bytes()
			// Full blocks go direct: all but the last block and the pieces
			// flushed before their block filled.
			if min := int64(len(file)/blockSize-1) * blockSize; direct.bytes < min {
				t.Errorf("%d bytes written direct in %d writes, want at least %d", direct.bytes, direct.writes, min)
			}
			if !bytes.Equal(file, plain.bytes()) {
				t.Fatalf("direct and buffered files differ (%d and %d bytes)", len(file), len(plain.bytes()))
			}
			checkSequence(t, file, format, sent)
		})
	}
}

func TestABusyCaptureWritesItsFullBlocksInRunsOfOneSystemCall(t *testing.T) {
	disk := &memDisk{room: -1}
	direct := &alignedDisk{memDisk: disk}
	// No due time comes before Close: only whole runs are written while
	// the frames come.
	c, err := newFile("/nowhere/runs", disk, direct, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	frames := lab(c, 5, 60000, false) // about 26 blocks
	c.Close()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if len(direct.misfits) > 0 {
		t.Fatalf("%d direct writes not aligned, first: %s", len(direct.misfits), direct.misfits[0])
	}
	file := disk.bytes()
	checkSequence(t, file, capspec.FormatPcap, frames)
	blocks := len(file) / blockSize
	if blocks < 2*maxRun {
		t.Fatalf("the capture filled %d blocks, too few to tell", blocks)
	}
	// Close writes what is left in runs of up to maxRun and then the
	// aligned part of the block being filled: at most two writes that are
	// not whole runs. (Runs written at once may end in any order.)
	runs := 0
	for _, n := range direct.sizes {
		if n == maxRun*blockSize {
			runs++
		}
	}
	if len(direct.sizes)-runs > 2 {
		t.Fatalf("%d of %d direct writes are not runs of %d blocks (sizes %v)", len(direct.sizes)-runs, len(direct.sizes), maxRun, direct.sizes)
	}
	if runs < blocks/maxRun-1 {
		t.Fatalf("%d runs of %d blocks for %d blocks (sizes %v)", runs, maxRun, blocks, direct.sizes)
	}
}

// WritePackets wakes the writer for a run of blocks, not for one block. A
// block that fills while a due time ends, after its writes were started
// and before it checks for more, must still be written at once, not left
// until a run of them builds up or Close.
func TestABlockThatFillsAsADueTimeEndsIsWrittenAtOnce(t *testing.T) {
	disk := &memDisk{room: -1}
	reached, filled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c, err := newFile("/nowhere/late", disk, nil, Options{
		FlushInterval: 5 * time.Millisecond,
		hooks: hooks{due: func() {
			once.Do(func() {
				reached <- struct{}{}
				<-filled
			})
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := make([]byte, 1500)
	c.WritePacket(AtoB, frame) // arms the writer's timer
	<-reached
	batch := make([][]byte, blockSize/len(frame)+1) // fills the block, and one record goes on
	for i := range batch {
		batch[i] = frame
	}
	c.WritePackets(AtoB, batch)
	close(filled)
	want := uint64(1 + len(batch))
	deadline := time.Now().Add(5 * time.Second)
	for {
		frames, _, _ := c.Stats()
		if frames == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records in the file after 5 s, with a flush every 5 ms", frames, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A queue of fewer blocks than a run writes its blocks before they are
// due, once half of it is full: waiting for a whole run it cannot hold
// would drop frames until the next due time.
func TestASmallQueueWritesItsBlocksWithoutWaitingForARun(t *testing.T) {
	disk := &memDisk{room: -1}
	c, err := newFile("/nowhere/small", disk, nil, Options{QueueBytes: 4 * blockSize, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := make([]byte, 1500)
	batch := make([][]byte, 3*blockSize/len(frame)) // three blocks: two full, one being filled
	for i := range batch {
		batch[i] = frame
	}
	c.WritePackets(AtoB, batch)
	waitFor(t, func() bool { frames, _, _ := c.Stats(); return frames > 0 })
	if _, _, dropped := c.Stats(); dropped != 0 {
		t.Fatalf("%d dropped", dropped)
	}
}

// nullDisk takes every write and keeps nothing: it counts the calls.
type nullDisk struct{ calls atomic.Int64 }

func (d *nullDisk) WriteAt(p []byte, _ int64) (int, error) { d.calls.Add(1); return len(p), nil }
func (d *nullDisk) Truncate(int64) error                   { return nil }
func (d *nullDisk) Close() error                           { return nil }

// nullVecDisk is a nullDisk that also takes vectored writes, as a direct
// handle does.
type nullVecDisk struct{ nullDisk }

func (d *nullVecDisk) WriteVecAt(bufs [][]byte, _ int64) (n int, _ error) {
	d.calls.Add(1)
	for _, b := range bufs {
		n += len(b)
	}
	return n, nil
}

func TestABusyCaptureDoesNotFlushTheBlockBeingFilledInPieces(t *testing.T) {
	plain, direct := &nullDisk{}, &nullVecDisk{}
	// A busy link: by every due time, more than a block filled since the
	// last one, so each due time finds full blocks to write and the block
	// being filled waits for the next one, by which time it is full too.
	// The test fills the blocks while the writer waits at the start of each
	// due time (a hook), so no pause of either goroutine (a loaded machine)
	// can make a due time find no full block.
	const rounds = 20
	tick, wrote := make(chan struct{}), make(chan struct{})
	var ticks atomic.Int64
	c, err := newFile("/nowhere/busy", plain, direct, Options{
		FlushInterval: time.Millisecond,
		hooks: hooks{tick: func() {
			if ticks.Add(1) > rounds {
				return
			}
			tick <- struct{}{}
			<-wrote
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	batch := make([][]byte, 140)
	for i := range batch {
		batch[i] = make([]byte, 1500)
	}
	fill := func() { // about two and a half blocks
		for range 25 {
			c.WritePackets(AtoB, batch)
		}
	}
	fill() // arms the writer's timer
	for round := range rounds {
		// A due time comes while the queue holds records the file does not
		// have. If it has none, a due time flushed the block being filled.
		poll := time.NewTicker(10 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case <-tick:
				waiting = false
			case <-poll.C:
				if !c.hasUnwritten() {
					t.Fatalf("round %d: the block being filled was flushed (%d writes through the page cache)", round, plain.calls.Load())
				}
			}
		}
		poll.Stop()
		fill()
		wrote <- struct{}{}
	}
	c.Close()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	frames, size, dropped := c.Stats()
	if dropped != 0 || size < rounds*2*blockSize {
		t.Fatalf("Stats: %d frames, %d bytes, %d dropped", frames, size, dropped)
	}
	// The page cache takes the file header and the end at Close, nothing
	// else. Flushing the block being filled at every due time would take
	// one more write per round.
	if n := plain.calls.Load(); n > 2 {
		t.Fatalf("%d writes through the page cache for %d bytes in %d direct writes", n, size, direct.calls.Load())
	}
}

// shortWriter takes at most max bytes per vectored write.
type shortWriter struct {
	memDisk
	max   int
	calls int
}

func (w *shortWriter) WriteVecAt(bufs [][]byte, off int64) (int, error) {
	w.calls++
	n := 0
	for _, b := range bufs {
		b = b[:min(len(b), w.max-n)]
		k, err := w.WriteAt(b, off+int64(n))
		n += k
		if err != nil || n == w.max {
			return n, err
		}
	}
	return n, nil
}

func TestWriteVecFinishesShortWrites(t *testing.T) {
	var bufs [][]byte
	var want []byte
	for i, n := range []int{5, 1, 7, 3} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	for max := 1; max <= len(want); max++ {
		w := &shortWriter{memDisk: memDisk{room: -1}, max: max}
		if n, err := writeVec(w, slices.Clone(bufs), 3); err != nil || n != len(want) {
			t.Fatalf("max %d: writeVec = %d, %v; want %d, nil", max, n, err, len(want))
		}
		if got := w.bytes(); !bytes.Equal(got[3:], want) {
			t.Fatalf("max %d: wrote %q, want %q", max, got[3:], want)
		}
		if wantCalls := (len(want) + max - 1) / max; w.calls != wantCalls {
			t.Fatalf("max %d: %d calls, want %d", max, w.calls, wantCalls)
		}
	}
}

func TestADirectWriteRefusedByTheFileSystemFallsBackToThePageCache(t *testing.T) {
	disk := &memDisk{room: -1}
	refusing := &refusingDisk{}
	c, err := newFile("/nowhere/fallback", disk, refusing, Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	frames := lab(c, 3, 3000, false)
	c.Close()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if refusing.calls.Load() == 0 {
		t.Fatal("no direct write was tried")
	}
	if !c.noDirect.Load() {
		t.Fatal("the capture still writes direct after EINVAL")
	}
	checkSequence(t, disk.bytes(), capspec.FormatPcap, frames)
}

// refusingDisk refuses every write with EINVAL, like a file system that
// opens files for direct I/O and then takes no direct write of ours (one
// with blocks larger than 4 KiB, say).
type refusingDisk struct{ calls atomic.Int64 }

func (d *refusingDisk) WriteAt([]byte, int64) (int, error) { d.calls.Add(1); return 0, syscall.EINVAL }
func (d *refusingDisk) Truncate(int64) error               { return nil }
func (d *refusingDisk) Close() error                       { return nil }

// directIOWorks tells whether the file system under dir opens files with
// O_DIRECT and takes an aligned direct write.
func directIOWorks(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_WRONLY|os.O_CREATE|oDirect, 0o644)
	if err != nil {
		return false
	}
	defer f.Close()
	b := heapBlock()[:directAlign]
	_, err = f.WriteAt(b, 0)
	return err == nil && oDirect != 0
}

func TestCreateWritesFullBlocksDirectWhereTheFileSystemCan(t *testing.T) {
	root, dir := openRoot(t)
	canDirect := directIOWorks(dir)
	t.Logf("direct I/O in %s: %v", dir, canDirect)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	frames := 0
	write := func(name string, buffered bool) []byte {
		c, err := Create(root, name, Options{Format: capspec.FormatPcapng, Now: fixedClock(t0), FlushInterval: time.Millisecond, BufferedIO: buffered})
		if err != nil {
			t.Fatal(err)
		}
		frames = lab(c, 11, 8000, !buffered)
		c.Close()
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		// The writer opens the direct handle as it starts; read once it
		// is done.
		if got := c.direct != nil; got != (canDirect && !buffered) {
			t.Fatalf("%s: direct handle %v, want %v", name, got, canDirect && !buffered)
		}
		if c.noDirect.Load() {
			t.Fatalf("%s: the file system refused a direct write", name)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, size, _ := c.Stats(); size != int64(len(b)) {
			t.Fatalf("%s: %d bytes, Stats says %d", name, len(b), size)
		}
		return b
	}
	direct, buffered := write("direct.pcapng", false), write("buffered.pcapng", true)
	if !bytes.Equal(direct, buffered) {
		t.Fatalf("files differ: %d and %d bytes", len(direct), len(buffered))
	}
	checkSequence(t, direct, capspec.FormatPcapng, frames)
}
