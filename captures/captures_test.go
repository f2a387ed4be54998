package captures

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
)

func TestLinkTypeMapsEveryGNS3DataLinkType(t *testing.T) {
	tests := []struct {
		dlt  string
		want layers.LinkType
	}{
		{"DLT_EN10MB", 1},
		{"DLT_ATM_RFC1483", 100}, // the LINKTYPE, not libpcap's in-memory DLT 11
		{"DLT_FRELAY", 107},
		{"DLT_C_HDLC", 104},
		{"DLT_PPP_SERIAL", 50},
	}
	for _, tt := range tests {
		t.Run(tt.dlt, func(t *testing.T) {
			got, err := LinkType(tt.dlt)
			if err != nil || got != tt.want {
				t.Fatalf("LinkType(%q) = %d, %v; want %d", tt.dlt, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "EN10MB", "dlt_en10mb", "DLT_RAW", "DLT_EN10MB "} {
		if _, err := LinkType(bad); err == nil {
			t.Errorf("LinkType(%q) succeeded, want an error", bad)
		}
	}
}

// fixedClock returns a clock that starts at t0 and moves 1µs per call.
func fixedClock(t0 time.Time) func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Microsecond)
		return now
	}
}

// memDisk is a file in memory. It takes room bytes (any number when room
// is negative), then writes what fits of the next write and fails with
// ENOSPC, like a file system that has just filled up. With limit set, it
// holds only the bytes below that offset, failing the same way: whether a
// byte fits then depends on where it goes, not on the order of writes, so
// concurrent block writes fail the same way each run. With a gate, every
// write but the header's waits until the gate is closed, like a disk that
// cannot keep up.
type memDisk struct {
	gate  chan struct{}
	limit int64 // 0: none

	mu     sync.Mutex
	buf    []byte
	room   int
	full   int // writes that ran past limit
	closed bool
}

func (d *memDisk) WriteAt(p []byte, off int64) (int, error) {
	if d.gate != nil && off > 0 {
		<-d.gate
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := len(p), error(nil)
	if d.room >= 0 {
		if n > d.room {
			n, err = d.room, syscall.ENOSPC
		}
		d.room -= n
	}
	if d.limit > 0 && off+int64(n) > d.limit {
		n, err = int(max(d.limit-off, 0)), syscall.ENOSPC
		d.full++
	}
	if end := int(off) + n; end > len(d.buf) {
		d.buf = append(d.buf, make([]byte, end-len(d.buf))...)
	}
	copy(d.buf[off:], p[:n])
	return n, err
}

func (d *memDisk) Truncate(size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if int(size) <= len(d.buf) {
		d.buf = d.buf[:size]
	} else {
		d.buf = append(d.buf, make([]byte, int(size)-len(d.buf))...)
	}
	return nil
}

func (d *memDisk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

func (d *memDisk) bytes() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.Clone(d.buf)
}

func TestFileEndsWithWholeRecordsWhenTheDiskFills(t *testing.T) {
	disk := &memDisk{room: 24 + 3*(16+100) + 50} // header, three records, half of a fourth
	c, err := newFile("/nowhere/x.pcap", disk, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.WritePacket(AtoB, make([]byte, 100))
	}
	waitFor(t, func() bool { frames, _, _ := c.Stats(); return frames == 3 })
	for range 7 {
		c.WritePacket(AtoB, make([]byte, 100))
	}
	// The writer goroutine meets the full disk within a flush interval.
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("capture still running after the disk filled")
	}
	if err := c.Err(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Err() = %v, want ENOSPC", err)
	}
	if !disk.closed {
		t.Fatal("file not closed")
	}
	c.WritePacket(AtoB, make([]byte, 100)) // after the end: dropped too
	frames, size, dropped := c.Stats()
	// The write that hit the full disk is undone: its seven frames, and the
	// one after the end, are dropped.
	if frames != 3 || size != 24+3*116 || dropped != 8 {
		t.Fatalf("Stats() = %d frames, %d bytes, %d dropped; want 3, %d, 8", frames, size, dropped, 24+3*116)
	}
	file := disk.bytes()
	if len(file) != int(size) {
		t.Fatalf("file holds %d bytes, want %d (cut back to the last whole record)", len(file), size)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := r.ReadPacketData(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if _, _, err := r.ReadPacketData(); !errors.Is(err, io.EOF) {
		t.Fatalf("after 3 records: %v, want EOF", err)
	}
}

func openRoot(t testing.TB) (*os.Root, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

func TestCreateRefusesNamesThatLeaveTheFolder(t *testing.T) {
	root, dir := openRoot(t)
	for _, name := range []string{"../escape.pcap", "/tmp/abs.pcap", "sub/x.pcap", ".."} {
		if c, err := Create(root, name, Options{}); err == nil {
			c.Close()
			t.Errorf("Create(%q) succeeded", name)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		if e.Name() == "escape.pcap" {
			t.Fatal("a file was written outside the folder")
		}
	}
}

func TestCreateWritesAValidEmptyCaptureAtOnce(t *testing.T) {
	root, dir := openRoot(t)
	c, err := Create(root, "idle.pcap", Options{LinkType: layers.LinkTypeFRelay})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "idle.pcap"); c.Path() != want {
		t.Fatalf("Path() = %q, want %q", c.Path(), want)
	}
	// Readable before the first frame and before Close.
	data, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("idle capture unreadable: %v", err)
	}
	if r.LinkType() != layers.LinkTypeFRelay {
		t.Fatalf("link type %d, want 107", r.LinkType())
	}
	c.Close()
	c.Close() // twice is fine
	if c.Err() != nil {
		t.Fatalf("Err() after Close = %v", c.Err())
	}
}

func TestFollowStreamsTheWholeFileToEveryReaderUntilTheCaptureEnds(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "live.pcap", Options{})
	if err != nil {
		t.Fatal(err)
	}
	const readers = 3
	outs := make([]*safeBuffer, readers)
	errs := make(chan error, readers)
	for i := range outs {
		out := &safeBuffer{}
		outs[i] = out
		go func() { errs <- c.Follow(t.Context(), out, nil) }()
	}
	// A reader that joins before any frame gets the header at once.
	waitFor(t, func() bool { return outs[0].Len() >= 24 })
	for i := range 200 {
		c.WritePacket(Direction(i%2), bytes.Repeat([]byte{byte(i)}, 60+i))
		if i == 100 {
			// A late reader still gets everything from the first byte.
			outs = append(outs, &safeBuffer{})
			late := outs[len(outs)-1]
			go func() { errs <- c.Follow(t.Context(), late, nil) }()
		}
	}
	c.Close()
	for range outs {
		if err := <-errs; err != nil {
			t.Fatalf("Follow: %v", err)
		}
	}
	file, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if !bytes.Equal(o.Bytes(), file) {
			t.Fatalf("reader %d got %d bytes, the file has %d", i, o.Len(), len(file))
		}
	}
}

func TestFollowStopsWhenItsContextEnds(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "x.pcap", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx, io.Discard, nil) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
}

func TestFollowReturnsTheWriteErrorOfAGoneReader(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "x.pcap", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gone := errors.New("client went away")
	err = c.Follow(t.Context(), failingWriter{gone}, nil)
	if !errors.Is(err, gone) {
		t.Fatalf("Follow = %v, want %v", err, gone)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *safeBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	// Often at first (what it waits for takes microseconds), then every 5 ms.
	for wait := 10 * time.Microsecond; !cond(); wait = min(2*wait, 5*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(wait)
	}
}

func TestFileDropsAndCountsWhenTheDiskCannotKeepUpButNeverWaits(t *testing.T) {
	disk := &memDisk{gate: make(chan struct{}), room: -1}
	c, err := newFile("/nowhere/slow.pcap", disk, nil, Options{QueueBytes: 2 * blockSize, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000 // 7.5 MB of records for a 2 MiB queue
	frame := make([]byte, 1500)
	start := time.Now()
	for i := range n {
		binary.BigEndian.PutUint32(frame, uint32(i))
		c.WritePackets(Direction(i%2), [][]byte{frame})
	}
	if el := time.Since(start); el > 5*time.Second { // a generous bound: it must not wait for the disk
		t.Fatalf("writing to a stuck disk took %v", el)
	}
	_, _, dropped := c.Stats()
	if dropped == 0 {
		t.Fatal("nothing dropped although the queue could not hold the frames")
	}
	close(disk.gate) // the disk catches up
	c.Close()
	frames, size, dropped := c.Stats()
	if frames+dropped != n {
		t.Fatalf("%d written + %d dropped != %d", frames, dropped, n)
	}
	file := disk.bytes()
	if int64(len(file)) != size {
		t.Fatalf("file %d bytes, Stats says %d", len(file), size)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	last, got := -1, 0
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seq := int(binary.BigEndian.Uint32(data))
		if seq <= last { // drops leave gaps, never disorder
			t.Fatalf("record %d after %d", seq, last)
		}
		last = seq
		got++
	}
	if got != int(frames) {
		t.Fatalf("file holds %d records, Stats says %d", got, frames)
	}
}

func TestCloseWritesEveryFrameAcceptedBeforeIt(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "all.pcap", Options{FlushInterval: time.Hour}) // only Close writes
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const perDir = 3000
	for d := range 2 {
		wg.Go(func() {
			for i := range perDir {
				f := make([]byte, 60+i%1000)
				binary.BigEndian.PutUint32(f, uint32(d))
				binary.BigEndian.PutUint32(f[4:], uint32(i))
				c.WritePackets(Direction(d), [][]byte{f})
			}
		})
	}
	wg.Wait()
	c.Close()
	c.WritePacket(AtoB, []byte("too late")) // ignored, not counted
	frames, _, dropped := c.Stats()
	if frames != 2*perDir || dropped != 0 {
		t.Fatalf("Stats() = %d frames, %d dropped; want %d, 0", frames, dropped, 2*perDir)
	}
	data, _ := os.ReadFile(c.Path())
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	next := [2]int{}
	var lastTS time.Time
	for {
		rec, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d, i := binary.BigEndian.Uint32(rec), int(binary.BigEndian.Uint32(rec[4:]))
		if i != next[d] || len(rec) != 60+i%1000 {
			t.Fatalf("direction %d: frame %d, want %d", d, i, next[d])
		}
		next[d]++
		if ci.Timestamp.Before(lastTS) {
			t.Fatalf("time goes back: %v after %v", ci.Timestamp, lastTS)
		}
		lastTS = ci.Timestamp
	}
	if next != [2]int{perDir, perDir} {
		t.Fatalf("file holds %v frames per direction", next)
	}
}

func TestFollowSeesARecordWithoutWaitingForClose(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "live.pcap", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := &safeBuffer{}
	go c.Follow(t.Context(), out, nil)
	c.WritePacket(AtoB, make([]byte, 100))
	waitFor(t, func() bool { return out.Len() == 24+16+100 }) // within a flush interval, in practice
}

func TestPcapngFileHasOneNamedInterfacePerDirectionAndItsDropCounts(t *testing.T) {
	root, _ := openRoot(t)
	c, err := Create(root, "d.pcapng", Options{Format: capspec.FormatPcapng, LinkType: layers.LinkTypeEthernet,
		Interfaces: [2]string{"PC1 Ethernet0", "PC2 Ethernet0"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		c.WritePacket(Direction(i%2), bytes.Repeat([]byte{byte(i)}, 61+i)) // odd sizes: padded blocks
	}
	c.Close()
	f, err := os.Open(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []int
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != 61+len(ifaces) || data[0] != byte(len(ifaces)) {
			t.Fatalf("record %d: %d bytes", len(ifaces), len(data))
		}
		ifaces = append(ifaces, ci.InterfaceIndex)
	}
	if fmt.Sprint(ifaces) != "[0 1 0 1 0]" || r.NInterfaces() != 2 {
		t.Fatalf("interfaces %v of %d", ifaces, r.NInterfaces())
	}
	for i, name := range []string{"PC1 Ethernet0", "PC2 Ethernet0"} {
		intf, err := r.Interface(i)
		if err != nil || intf.Name != name {
			t.Fatalf("interface %d: %+v, %v", i, intf.Name, err)
		}
	}
}

// discardDisk is a disk that takes everything at once.
type discardDisk struct{}

func (discardDisk) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (discardDisk) Truncate(int64) error                   { return nil }
func (discardDisk) Close() error                           { return nil }

// BenchmarkFileWritePackets measures what a capture costs the forwarding
// path: queueing a batch of 32 frames (the disk here takes everything at
// once, so nothing is dropped and the queue's cost is what is measured).
func BenchmarkFileWritePackets(b *testing.B) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		for _, size := range []int{64, 1500} {
			benchmarkFileWritePackets(b, format, size)
		}
	}
}

func benchmarkFileWritePackets(b *testing.B, format string, size int) {
	name := fmt.Sprint(size)
	if format != capspec.FormatPcap {
		name = format + "/" + name
	}
	b.Run(name, func(b *testing.B) {
		c, err := newFile("/nowhere/b.pcap", discardDisk{}, nil, Options{Format: format, QueueBytes: 256 << 20}) // room for a writer thread the machine is slow to schedule
		if err != nil {
			b.Fatal(err)
		}
		batch := make([][]byte, 32)
		for i := range batch {
			batch[i] = make([]byte, size)
		}
		b.SetBytes(int64(size * len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			c.WritePackets(AtoB, batch)
		}
		c.Close()
		_, _, dropped := c.Stats()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/frame")
		b.ReportMetric(float64(dropped), "dropped")
	})
}

// BenchmarkFileWritePacketsPingPong writes 64-byte frames whose direction
// changes every frame (a ping and its reply): the worst case of a pcap
// file's direction runs, whose memory is kept across blocks (allocs/op).
func BenchmarkFileWritePacketsPingPong(b *testing.B) {
	c, err := newFile("/nowhere/b.pcap", discardDisk{}, nil, Options{Format: capspec.FormatPcap, QueueBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	frame := [][]byte{make([]byte, 64)}
	b.SetBytes(64)
	b.ReportAllocs()
	dir := AtoB
	for b.Loop() {
		c.WritePackets(dir, frame)
		dir ^= 1
	}
	c.Close()
	_, _, dropped := c.Stats()
	b.ReportMetric(float64(dropped), "dropped")
}
