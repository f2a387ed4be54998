package captures

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/labtap/labtap/capspec"
)

// A capture that sees no traffic holds no memory of the pool: not from its
// start (the header goes straight to the file), and not once what a burst
// queued is written. The pool gives the regions back to the kernel once no
// capture needed them for a trim interval.
func TestAnIdleCaptureHoldsNoBlockOfThePool(t *testing.T) {
	pool := NewPool(64<<20, 20*time.Millisecond)
	var files []*File
	for i := range 50 {
		c, err := newFile(fmt.Sprintf("/nowhere/idle-%d", i), &memDisk{room: -1}, nil, Options{Pool: pool, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		files = append(files, c)
	}
	if st := pool.Stats(); st.InUse != 0 || st.Allocated != 0 {
		t.Fatalf("50 captures that saw no frame hold %d bytes of the pool (%d allocated)", st.InUse, st.Allocated)
	}
	sent := make([]int, len(files))
	for i, c := range files {
		sent[i] = lab(c, uint64(i), 300, false)
	}
	if pool.Stats().InUse == 0 {
		t.Fatal("the captures queued records without a block")
	}
	for i, c := range files {
		waitFor(t, func() bool { frames, _, _ := c.Stats(); return frames == uint64(sent[i]) })
	}
	waitFor(t, func() bool { return pool.Stats().InUse == 0 })
	waitFor(t, func() bool { return pool.Stats().Allocated == 0 })
	if st := pool.Stats(); st.Refused != 0 {
		t.Fatalf("the pool refused %d blocks", st.Refused)
	}
	for _, c := range files {
		if _, _, dropped := c.Stats(); dropped != 0 {
			t.Fatalf("%d dropped", dropped)
		}
	}
}

// Traffic that stops and starts again, over and over, gives its block
// back and takes another each time, with the end of the file's last page
// put back: the file is the same, byte for byte, as one written through
// the page cache by a capture that never let go of its memory, and every
// direct write is aligned.
func TestACaptureThatGoesIdleAndBusyAgainWritesTheSameFile(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			write := func(disk *memDisk, direct fileHandle, idle bool) (int, uint64) {
				pool := NewPool(64<<20, time.Hour)
				c, err := newFile("/nowhere/again", disk, direct, Options{Format: format, Now: fixedClock(t0), FlushInterval: time.Millisecond, Pool: pool})
				if err != nil {
					t.Fatal(err)
				}
				sent, takes := 0, uint64(0)
				for round := range 10 {
					sent += lab(c, uint64(round), 100+round*500, false) // small bursts and ones of several blocks
					if idle {
						waitFor(t, func() bool { frames, _, _ := c.Stats(); return frames == uint64(sent) })
						waitFor(t, func() bool { return pool.Stats().InUse == 0 })
						takes++
					}
				}
				c.Close()
				if err := c.Err(); err != nil {
					t.Fatal(err)
				}
				if frames, _, dropped := c.Stats(); frames != uint64(sent) || dropped != 0 {
					t.Fatalf("Stats: %d frames, %d dropped; want %d, 0", frames, dropped, sent)
				}
				return sent, takes
			}
			plain := &memDisk{room: -1}
			write(plain, nil, false)
			disk := &memDisk{room: -1}
			aligned := &alignedDisk{memDisk: disk}
			sent, takes := write(disk, aligned, true)
			if len(aligned.misfits) > 0 {
				t.Fatalf("%d direct writes not aligned, first: %s", len(aligned.misfits), aligned.misfits[0])
			}
			if aligned.bytes == 0 {
				t.Fatal("nothing was written direct")
			}
			if !bytes.Equal(disk.bytes(), plain.bytes()) {
				t.Fatalf("the file of a capture that gave its memory back %d times differs from the page cache's (%d and %d bytes)",
					takes, len(disk.bytes()), len(plain.bytes()))
			}
			read := readerOf(t, format, disk.bytes())
			for i := range sent {
				if _, _, err := read(); err != nil {
					t.Fatalf("record %d of %d: %v", i, sent, err)
				}
			}
		})
	}
}

// Many captures that each queue a little take a small block each, not a
// huge page: a thousand links with a frame waiting hold 128 MiB, not 2 GiB.
func TestCapturesThatQueueALittleTakeSmallBlocks(t *testing.T) {
	pool := NewPool(1<<30, time.Hour)
	disk := &memDisk{gate: make(chan struct{}), room: -1} // stuck: the blocks stay taken
	const n = 100
	var files []*File
	for i := range n {
		c, err := newFile(fmt.Sprintf("/nowhere/trickle-%d", i), disk, nil, Options{Pool: pool, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, c)
		c.WritePacket(AtoB, make([]byte, 1500))
	}
	st := pool.Stats()
	close(disk.gate)
	for _, c := range files {
		c.Close()
	}
	if st.InUse != n*smallBlock {
		t.Fatalf("%d captures with one frame queued hold %d KiB of the pool, want %d KiB", n, st.InUse>>10, n*smallBlock>>10)
	}
	if st.Allocated > (n*smallBlock/blockSize+1)*blockSize {
		t.Fatalf("the pool took %d MiB from the kernel for %d small blocks", st.Allocated>>20, n)
	}
	if st := pool.Stats(); st.InUse != 0 {
		t.Fatalf("closed captures hold %d bytes of the pool", st.InUse)
	}
}

// The pool lends no more than its bound, whatever the captures ask for:
// when it is exhausted, the frames that needed memory are dropped and
// counted, WritePackets never waits for memory (nor for the disk), and the
// records the files hold are whole and in order.
func TestAnExhaustedPoolCountsDropsAndNeverBlocksTheRelay(t *testing.T) {
	const bound = 4 << 20 // two huge pages for four captures that each could queue 64 MiB
	pool := NewPool(bound, time.Hour)
	disk := make([]*memDisk, 4)
	files := make([]*File, 4)
	gate := make(chan struct{})
	for i := range files {
		disk[i] = &memDisk{gate: gate, room: -1}
		c, err := newFile(fmt.Sprintf("/nowhere/bounded-%d", i), disk[i], nil, Options{Pool: pool, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		files[i] = c
	}
	const perFile = 4000 // 6 MB of records each, 24 MB in all
	done := make(chan struct{})
	var over string // set by the goroutine before done is closed
	go func() {
		defer close(done)
		frame := make([]byte, 1500)
		for k := range perFile {
			for _, c := range files {
				binary.BigEndian.PutUint32(frame, uint32(k))
				c.WritePackets(AtoB, [][]byte{frame})
				if st := pool.Stats(); (st.InUse > bound || st.Allocated > bound) && over == "" {
					over = fmt.Sprintf("the pool lends %d and holds %d bytes, over its bound of %d", st.InUse, st.Allocated, bound)
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // liveness, not speed: with the disk stuck, only a relay that waits never ends
		t.Fatal("WritePackets waited: for memory or for the stuck disk")
	}
	if over != "" {
		t.Fatal(over)
	}
	st := pool.Stats()
	if st.Refused == 0 {
		t.Fatal("the pool refused nothing: the test did not exhaust it")
	}
	var dropped uint64
	for _, c := range files {
		_, _, d := c.Stats()
		dropped += d
	}
	if dropped == 0 {
		t.Fatalf("no frame counted as dropped, with %d blocks refused", st.Refused)
	}
	close(gate)
	for i, c := range files {
		c.Close()
		frames, size, d := c.Stats()
		if frames+d != perFile {
			t.Fatalf("file %d: %d written + %d dropped != %d", i, frames, d, perFile)
		}
		if int64(len(disk[i].bytes())) != size {
			t.Fatalf("file %d: %d bytes, Stats says %d", i, len(disk[i].bytes()), size)
		}
		checkInOrder(t, disk[i].bytes(), frames)
	}
	if st := pool.Stats(); st.InUse != 0 {
		t.Fatalf("closed captures hold %d bytes of the pool", st.InUse)
	}
}

// checkInOrder checks that a pcap holds n whole records whose sequence
// numbers rise (some may be missing: dropped).
func checkInOrder(t *testing.T, file []byte, n uint64) {
	t.Helper()
	read := readerOf(t, capspec.FormatPcap, file)
	last := -1
	for i := uint64(0); i < n; i++ {
		data, _, err := read()
		if err != nil {
			t.Fatalf("record %d of %d: %v", i, n, err)
		}
		seq := int(binary.BigEndian.Uint32(data))
		if seq <= last {
			t.Fatalf("record %d: frame %d after frame %d", i, seq, last)
		}
		last = seq
	}
	if _, _, err := read(); err == nil {
		t.Fatalf("more than %d records", n)
	}
}
