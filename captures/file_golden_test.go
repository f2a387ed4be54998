package captures

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
)

// handClock is a clock the test moves by hand: it returns what was last set.
type handClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *handClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// firstDiff returns the offset of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFileWritesWhatPcapgoWrites holds a File, the writer the agent really
// uses, byte for byte equal to gopacket's own pcapgo.Writer fed the same
// frames with the same timestamps: for every link type a capture may ask
// for, frames of every usual size, frames cut by the snapshot length, and a
// clock that steps back (a File stamps one time per batch, never earlier
// than the previous batch's).
func TestFileWritesWhatPcapgoWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	frame := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	empty, tiny, short, full, long := frame(0), frame(14), frame(60), frame(1514), frame(70000) // long: beyond DefaultSnaplen

	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type batch struct {
		clock  time.Time // what the clock says when the batch is written
		stamp  time.Time // what the File must stamp it with
		dir    Direction
		frames [][]byte
	}
	batches := []batch{
		{clock: t0.Add(789), stamp: t0.Add(789), dir: AtoB, frames: [][]byte{tiny}}, // sub-microsecond part dropped
		{clock: t0.Add(1500*time.Millisecond + 999), stamp: t0.Add(1500*time.Millisecond + 999), dir: BtoA, frames: [][]byte{short, full}},
		// The wall clock steps back two seconds: the batch keeps the previous stamp.
		{clock: t0.Add(-500 * time.Millisecond), stamp: t0.Add(1500*time.Millisecond + 999), dir: AtoB, frames: [][]byte{long}},
		{clock: t0.Add(3*time.Second + 999_999_999), stamp: t0.Add(3*time.Second + 999_999_999), dir: BtoA, frames: [][]byte{tiny, short, full, long}},
		{clock: t0.Add(3 * time.Second), stamp: t0.Add(3*time.Second + 999_999_999), dir: BtoA, frames: [][]byte{short}}, // back, within the same second
		{clock: t0.Add(10 * time.Second), stamp: t0.Add(10 * time.Second), dir: AtoB, frames: [][]byte{empty, short}},
	}
	wantFrames := 0
	for _, b := range batches {
		wantFrames += len(b.frames)
	}

	linkTypes := []layers.LinkType{
		layers.LinkTypeEthernet,    // 1, DLT_EN10MB
		layers.LinkTypeATM_RFC1483, // 100, DLT_ATM_RFC1483
		layers.LinkTypeFRelay,      // 107, DLT_FRELAY
		layers.LinkTypeC_HDLC,      // 104, DLT_C_HDLC
		layers.LinkTypePPP_HDLC,    // 50, DLT_PPP_SERIAL
	}
	snaplens := []struct{ opt, header int }{
		{0, DefaultSnaplen}, // the default cuts only the 70000-byte frame
		{64, 64},            // a small snapshot length cuts most frames
		{1514, 1514},        // exactly the size of a full Ethernet frame: not cut
		{1 << 20, DefaultSnaplen},
	}
	for _, lt := range linkTypes {
		for _, sl := range snaplens {
			t.Run(fmt.Sprintf("linktype=%d/snaplen=%d", lt, sl.opt), func(t *testing.T) {
				// What gopacket writes.
				var want bytes.Buffer
				pw := pcapgo.NewWriter(&want)
				if err := pw.WriteFileHeader(uint32(sl.header), lt); err != nil {
					t.Fatal(err)
				}
				for _, b := range batches {
					for _, f := range b.frames {
						n := min(len(f), sl.header)
						ci := gopacket.CaptureInfo{Timestamp: b.stamp, CaptureLength: n, Length: len(f)}
						if err := pw.WritePacket(ci, f[:n]); err != nil {
							t.Fatal(err)
						}
					}
				}

				// What a File writes.
				root, _ := openRoot(t)
				clock := &handClock{now: t0.Add(-time.Hour)}
				c, err := Create(root, "golden.pcap", Options{LinkType: lt, Snaplen: sl.opt, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				for i, b := range batches {
					clock.set(b.clock)
					// The File must not keep the frames: the caller reuses its
					// buffers as soon as WritePackets returns.
					frames := make([][]byte, len(b.frames))
					for j, f := range b.frames {
						frames[j] = bytes.Clone(f)
					}
					c.WritePackets(b.dir, frames)
					for _, f := range frames {
						for k := range f {
							f[k] = 0xee
						}
					}
					if i == 2 {
						c.WritePackets(AtoB, nil) // an empty batch writes nothing
					}
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if err := c.Err(); err != nil {
					t.Fatalf("Err() = %v", err)
				}
				got, err := os.ReadFile(c.Path())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Bytes()) {
					i := firstDiff(got, want.Bytes())
					t.Fatalf("file (%d bytes) differs from pcapgo's (%d bytes) at byte %d:\n got %x\nwant %x",
						len(got), want.Len(), i, got[i:min(len(got), i+32)], want.Bytes()[i:min(want.Len(), i+32)])
				}
				frames, size, dropped := c.Stats()
				if frames != uint64(wantFrames) || size != int64(want.Len()) || dropped != 0 {
					t.Fatalf("Stats() = %d frames, %d bytes, %d dropped; want %d, %d, 0", frames, size, dropped, wantFrames, want.Len())
				}
			})
		}
	}
}

// Concurrent writers: each goroutine writes perWriter frames, numbered, in
// batches of one to four, alternating directions; each frame says who wrote
// it, its number and its direction, and its length and contents follow from
// those, so a torn, mixed up or repeated record shows.
const (
	concWriters   = 8
	concPerWriter = 600
)

func concFrame(g, i int, dir Direction) []byte {
	f := make([]byte, 14+(g*7919+i*104729)%1501) // 14 to 1514 bytes
	binary.BigEndian.PutUint32(f[0:], uint32(g))
	binary.BigEndian.PutUint32(f[4:], uint32(i))
	f[8] = byte(dir)
	for k := 9; k < len(f); k++ {
		f[k] = byte(g*31 + i*7 + k)
	}
	return f
}

// concBatches returns, for writer g, its batches: their direction and the
// numbers of their frames.
func concBatches(g int) (dirs []Direction, sizes []int) {
	for i, b := 0, 0; i < concPerWriter; b++ {
		n := min(1+(g+b)%4, concPerWriter-i)
		dirs = append(dirs, Direction((g+b)%2))
		sizes = append(sizes, n)
		i += n
	}
	return dirs, sizes
}

// joltyClock moves forward a microsecond a call, but every fifth call it
// reads 10µs in the past, like a wall clock being stepped back.
func joltyClock(t0 time.Time) func() time.Time {
	var mu sync.Mutex
	n := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		d := time.Duration(n) * time.Microsecond
		if n%5 == 0 {
			d -= 10 * time.Microsecond
		}
		return t0.Add(d)
	}
}

// writeConcurrently runs the writers on c, started together, and waits for
// them. half is closed once every writer is halfway through.
func writeConcurrently(c *File, half chan<- struct{}) {
	var wg, halfway sync.WaitGroup
	start := make(chan struct{})
	for g := range concWriters {
		halfway.Add(1)
		wg.Go(func() {
			dirs, sizes := concBatches(g)
			<-start
			i := 0
			for b, dir := range dirs {
				batch := make([][]byte, sizes[b])
				for k := range batch {
					batch[k] = concFrame(g, i+k, dir)
				}
				c.WritePackets(dir, batch)
				if i < concPerWriter/2 && i+sizes[b] >= concPerWriter/2 {
					halfway.Done()
				}
				i += sizes[b]
			}
		})
	}
	close(start)
	if half != nil {
		halfway.Wait()
		close(half)
	}
	wg.Wait()
}

// checkConcurrentCapture reads file back and checks that it holds every
// frame of the writers exactly once, whole and byte for byte, each writer's
// in its own order, in non-decreasing time, and nothing else; and that
// Stats agrees with it.
func checkConcurrentCapture(t *testing.T, c *File, file []byte, format string) {
	t.Helper()
	// Walk the records by their lengths: the file must end on a record's end.
	headerLen, off, blocks := 24, 0, 0
	if format == capspec.FormatPcapng {
		for off < len(file) {
			if len(file)-off < 12 {
				t.Fatalf("partial block at byte %d: %d bytes left", off, len(file)-off)
			}
			n := int(binary.LittleEndian.Uint32(file[off+4:]))
			if n < 12 || n%4 != 0 || off+n > len(file) || int(binary.LittleEndian.Uint32(file[off+n-4:])) != n {
				t.Fatalf("partial or broken block at byte %d: length %d, %d bytes left", off, n, len(file)-off)
			}
			off += n
			blocks++
		}
	} else {
		off = headerLen
		for off < len(file) {
			if len(file)-off < 16 {
				t.Fatalf("partial record header at byte %d", off)
			}
			n := 16 + int(binary.LittleEndian.Uint32(file[off+8:]))
			if off+n > len(file) {
				t.Fatalf("partial record at byte %d: %d bytes, %d left", off, n, len(file)-off)
			}
			off += n
			blocks++
		}
	}

	var (
		read      func() ([]byte, gopacket.CaptureInfo, error)
		stats     = map[int]pcapgo.NgInterfaceStatistics{}
		perDir    [2]int
		next      [concWriters]int
		last      time.Time
		n         int
		wantTotal = concWriters * concPerWriter
	)
	opts := pcapgo.DefaultNgReaderOptions
	opts.StatisticsCallback = func(id int, s pcapgo.NgInterfaceStatistics) { stats[id] = s }
	read = readerOf(t, format, file, opts)
	for {
		data, ci, err := read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if len(data) < 9 {
			t.Fatalf("record %d: %d bytes", n, len(data))
		}
		g, i, dir := int(binary.BigEndian.Uint32(data[0:])), int(binary.BigEndian.Uint32(data[4:])), Direction(data[8])
		if g >= concWriters || i != next[g] {
			t.Fatalf("record %d is writer %d frame %d, want frame %d of that writer", n, g, i, next[g])
		}
		if want := concFrame(g, i, dir); !bytes.Equal(data, want) || ci.Length != len(want) {
			t.Fatalf("record %d (writer %d frame %d): %d bytes (length %d) differ from the %d written", n, g, i, len(data), ci.Length, len(want))
		}
		if format == capspec.FormatPcapng && ci.InterfaceIndex != int(dir) {
			t.Fatalf("record %d (writer %d frame %d) sent %d is on interface %d", n, g, i, dir, ci.InterfaceIndex)
		}
		if ci.Timestamp.Before(last) {
			t.Fatalf("record %d goes back in time: %v after %v", n, ci.Timestamp, last)
		}
		last = ci.Timestamp
		next[g]++
		perDir[dir]++
		n++
	}
	for g, got := range next {
		if got != concPerWriter {
			t.Errorf("writer %d: %d frames in the file, want %d", g, got, concPerWriter)
		}
	}
	frames, size, dropped := c.Stats()
	if frames != uint64(n) || frames != uint64(wantTotal) || size != int64(len(file)) || dropped != 0 {
		t.Fatalf("Stats() = %d frames, %d bytes, %d dropped; the file holds %d records in %d bytes, want %d, 0 dropped",
			frames, size, dropped, n, len(file), wantTotal)
	}
	if format == capspec.FormatPcapng {
		if blocks != 1+2+n+2 { // SHB, two IDBs, the packets, two ISBs
			t.Fatalf("%d blocks for %d packets, want %d", blocks, n, 1+2+n+2)
		}
		for d := range 2 {
			s, ok := stats[d]
			if !ok || s.PacketsReceived != uint64(perDir[d]) || s.PacketsDropped != 0 {
				t.Fatalf("interface %d statistics %+v (found %v): want %d received, 0 dropped", d, s, ok, perDir[d])
			}
		}
	} else if blocks != n {
		t.Fatalf("walked %d records, the reader %d", blocks, n)
	}
}

// TestFileKeepsRecordsWholeAndOrderedUnderConcurrentWriters writes from
// several goroutines at once, both directions, and reads the file back.
func TestFileKeepsRecordsWholeAndOrderedUnderConcurrentWriters(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			root, _ := openRoot(t)
			c, err := Create(root, "conc."+format, Options{Format: format, Now: joltyClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
				FlushInterval: time.Millisecond}) // many writes to disk while the writers run
			if err != nil {
				t.Fatal(err)
			}
			writeConcurrently(c, nil)
			if err := c.Close(); err != nil || c.Err() != nil {
				t.Fatalf("Close() = %v, Err() = %v", err, c.Err())
			}
			c.WritePacket(AtoB, concFrame(0, concPerWriter, AtoB)) // after Close: ignored
			file, err := os.ReadFile(c.Path())
			if err != nil {
				t.Fatal(err)
			}
			checkConcurrentCapture(t, c, file, format)
		})
	}
}

// TestFollowStreamsExactlyTheFileConcurrentWritersWrite follows a file
// while concurrent writers fill it: an early follower and one that joins
// halfway both get, when the capture ends, exactly the bytes of the file,
// and the file holds every frame, whole and in order.
func TestFollowStreamsExactlyTheFileConcurrentWritersWrite(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			root, _ := openRoot(t)
			c, err := Create(root, "follow."+format, Options{Format: format, Now: joltyClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
				FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			type follower struct {
				out     *safeBuffer
				flushes int // calls of flush; only Follow's goroutine touches it until it returns
				err     chan error
			}
			follow := func() *follower {
				f := &follower{out: &safeBuffer{}, err: make(chan error, 1)}
				go func() {
					f.err <- c.Follow(t.Context(), f.out, func() error { f.flushes++; return nil })
				}()
				return f
			}
			early := follow()
			waitFor(t, func() bool { return early.out.Len() > 0 }) // the header, before any frame
			half := make(chan struct{})
			lateCh := make(chan *follower, 1)
			go func() { <-half; lateCh <- follow() }()
			writeConcurrently(c, half)
			late := <-lateCh
			c.Close()
			file, err := os.ReadFile(c.Path())
			if err != nil {
				t.Fatal(err)
			}
			for name, f := range map[string]*follower{"early": early, "late": late} {
				select {
				case err := <-f.err:
					if err != nil {
						t.Fatalf("%s follower: Follow = %v", name, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s follower: Follow still running after Close", name)
				}
				if got := f.out.Bytes(); !bytes.Equal(got, file) {
					i := firstDiff(got, file)
					t.Fatalf("%s follower got %d bytes, the file has %d; first difference at byte %d", name, len(got), len(file), i)
				}
				if f.flushes == 0 {
					t.Fatalf("%s follower: flush never called", name)
				}
			}
			checkConcurrentCapture(t, c, file, format)
		})
	}
}
