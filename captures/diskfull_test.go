package captures

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
)

// TestAWriteCutShortByAFullDiskKeepsTheWholeRecordsItWrote fills the disk in
// the middle of one write holding many records, both of a tail flush and of
// a run of full blocks (whose first record straddles from the block
// before): the file keeps exactly the records wholly below the limit, a
// pcap reader reads them, and the counts per direction say so.
func TestAWriteCutShortByAFullDiskKeepsTheWholeRecordsItWrote(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		for _, tc := range []struct {
			name   string
			frames int
			at     float64 // where the limit falls, as a share of the records' bytes
			early  int     // records written, and waited for, before the others come
		}{
			{"tail flush", 100, 0.61, 0},
			{"tail flush after flushes", 100, 0.61, 30},
			{"block run", 6000, 0.83, 0},
			{"block run, just after a block's start", 6000, -1, 0},
		} {
			t.Run(fmt.Sprintf("%s/%s", format, tc.name), func(t *testing.T) {
				testDiskFullMidWrite(t, format, tc.frames, tc.at, tc.early)
			})
		}
	}
}

func testDiskFullMidWrite(t *testing.T, format string, nframes int, at float64, early int) {
	enc, err := newEncoder(Options{Format: format, Snaplen: DefaultSnaplen})
	if err != nil {
		t.Fatal(err)
	}
	header := int64(len(enc.header))
	// Frames of varied sizes, in runs of one direction and the other.
	type rec struct {
		dir  Direction
		size int
	}
	recs := make([]rec, nframes)
	var total int64
	for i := range recs {
		recs[i] = rec{Direction((i / 3 % 2) ^ (i % 7 / 6)), 60 + i*37%1400}
		total += int64(enc.recordSize(recs[i].size))
	}
	limit := header + int64(float64(total)*at)
	if at < 0 {
		limit = 2*blockSize + 3000 // in the second 2-MiB block, past the record straddling into it and the next
	}
	disk := &memDisk{room: -1, limit: limit}
	interval := time.Hour // nothing is written before Close but full runs
	if early > 0 {
		interval = time.Millisecond
	}
	c, err := newFile("/nowhere/x."+format, disk, nil, Options{Format: format, FlushInterval: interval, Now: fixedClock(time.Unix(1e9, 0))})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if i == early && early > 0 {
			waitFor(t, func() bool { frames, _, _ := c.Stats(); return frames == uint64(early) })
		}
		frame := bytes.Repeat([]byte{byte(i)}, r.size)
		c.WritePacket(r.dir, frame)
	}
	if err := c.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close() = %v, want ENOSPC", err)
	}
	if disk.full == 0 {
		t.Fatal("no write reached the limit: the test tests nothing")
	}
	// The records wholly below the limit.
	var want [2]uint64
	size, kept := header, 0
	for _, r := range recs {
		n := int64(enc.recordSize(r.size))
		if size+n > limit {
			break
		}
		size += n
		want[r.dir]++
		kept++
	}
	if kept < 10 {
		t.Fatalf("only %d records fit below the limit: the test tests little", kept)
	}
	frames, gotSize, dropped := c.Stats()
	if frames != uint64(kept) || gotSize != size || frames+dropped != uint64(nframes) {
		t.Fatalf("Stats() = %d frames, %d bytes, %d dropped; want %d, %d, %d", frames, gotSize, dropped, kept, size, nframes-kept)
	}
	for d := range 2 {
		if got := c.written[d].Load(); got != want[d] {
			t.Errorf("direction %d: %d written, want %d", d, got, want[d])
		}
		if got := c.dropped[d].Load(); got != c.queued[d]-want[d] {
			t.Errorf("direction %d: %d dropped, want %d", d, got, c.queued[d]-want[d])
		}
	}
	file := disk.bytes()
	if int64(len(file)) != size {
		t.Fatalf("file holds %d bytes, want %d", len(file), size)
	}
	next := func() ([]byte, int, error) { return nil, 0, nil }
	if format == capspec.FormatPcapng {
		r, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
		if err != nil {
			t.Fatal(err)
		}
		next = func() ([]byte, int, error) {
			data, ci, err := r.ReadPacketData()
			return data, ci.InterfaceIndex, err
		}
	} else {
		r, err := pcapgo.NewReader(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		next = func() ([]byte, int, error) {
			data, _, err := r.ReadPacketData()
			return data, -1, err
		}
	}
	for i := range kept {
		data, intf, err := next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if len(data) != recs[i].size || data[len(data)-1] != byte(i) || (intf >= 0 && intf != int(recs[i].dir)) {
			t.Fatalf("record %d: %d bytes of %d on interface %d, want %d of %d on %d", i, len(data), data[len(data)-1], intf, recs[i].size, byte(i), recs[i].dir)
		}
	}
	if _, _, err := next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d records: %v, want EOF", kept, err)
	}
}
