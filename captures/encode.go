package captures

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
)

// encoder turns frames into the records of one capture format, appending
// them to byte slices (gopacket's pcapgo writers write the file headers and
// pcapng's statistics blocks into an appender; see appendRecord for the
// records). It is not safe for concurrent use: its owner locks.
type encoder struct {
	pcapng  bool
	snaplen int
	out     *appender
	pw      *pcapgo.Writer
	ng      *pcapgo.NgWriter
	header  []byte // the file header: pcap global header, or pcapng SHB + IDBs
}

// appender is an io.Writer that appends to whatever slice b is.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func newEncoder(opts Options) (*encoder, error) {
	e := &encoder{snaplen: opts.Snaplen, out: &appender{}}
	switch opts.Format {
	case "", capspec.FormatPcap:
		e.pw = pcapgo.NewWriter(e.out)
		if err := e.pw.WriteFileHeader(uint32(opts.Snaplen), opts.LinkType); err != nil {
			return nil, fmt.Errorf("captures: write file header: %w", err)
		}
	case capspec.FormatPcapng:
		e.pcapng = true
		intf := func(name string) pcapgo.NgInterface {
			return pcapgo.NgInterface{
				Name:                name,
				OS:                  runtime.GOOS,
				LinkType:            opts.LinkType,
				SnapLength:          uint32(opts.Snaplen),
				TimestampResolution: 9,
			}
		}
		names := opts.Interfaces
		for i, def := range [2]string{"A", "B"} {
			if names[i] == "" {
				names[i] = def
			}
		}
		ng, err := pcapgo.NewNgWriterInterface(e.out, intf(names[AtoB]), pcapgo.NgWriterOptions{
			SectionInfo: pcapgo.NgSectionInfo{OS: runtime.GOOS, Application: "labtap"},
		})
		if err != nil {
			return nil, fmt.Errorf("captures: write pcapng header: %w", err)
		}
		if _, err := ng.AddInterface(intf(names[BtoA])); err != nil {
			return nil, fmt.Errorf("captures: write pcapng header: %w", err)
		}
		if err := ng.Flush(); err != nil {
			return nil, fmt.Errorf("captures: write pcapng header: %w", err)
		}
		e.ng = ng
	default:
		return nil, fmt.Errorf("captures: unknown format %q", opts.Format)
	}
	e.header, e.out.b = e.out.b, nil
	return e, nil
}

// recordSize returns the size of the record of a frame of n bytes.
func (e *encoder) recordSize(n int) int {
	data := min(n, e.snaplen)
	if !e.pcapng {
		return 16 + data
	}
	return 32 + data + (4-(data+32)&3)&3
}

// maxRecord bounds the size of the record of a frame of n bytes.
func maxRecord(n int) int { return 36 + n }

// appendRecord appends the record of frame, sent in direction dir at ts, to
// dst. Frames longer than the snapshot length are cut; the record keeps the
// original length.
//
// Records, the ones a busy link writes by the million, are encoded here
// directly, byte for byte as gopacket's pcapgo writers encode them:
// pcapgo's per-record checks, interface calls and buffer copies cost as
// much as copying a small frame. TestFileWritesWhatPcapgoWrites holds the
// two equal.
//
//   - pcap: a 16-byte header (seconds, microseconds, captured and original
//     length), then the data.
//   - pcapng: an enhanced packet block (type 6, total length, interface =
//     direction, nanoseconds since the epoch in two halves, captured and
//     original length), the data padded to 4 bytes, the total length again.
//
// All fields are little-endian, as the file headers pcapgo writes say.
func (e *encoder) appendRecord(dst []byte, dir Direction, ts time.Time, frame []byte) []byte {
	data := frame[:min(len(frame), e.snaplen)]
	le := binary.LittleEndian
	if !e.pcapng {
		dst = le.AppendUint32(dst, uint32(ts.Unix()))
		dst = le.AppendUint32(dst, uint32(ts.Nanosecond()/1000))
		dst = le.AppendUint32(dst, uint32(len(data)))
		dst = le.AppendUint32(dst, uint32(len(frame)))
		return append(dst, data...)
	}
	const enhancedPacketBlock = 6
	pad := (4 - (len(data)+32)&3) & 3
	total := uint32(len(data) + 32 + pad)
	ns := ts.UnixNano()
	dst = le.AppendUint32(dst, enhancedPacketBlock)
	dst = le.AppendUint32(dst, total)
	dst = le.AppendUint32(dst, uint32(dir)) // interface 0 is A's sends, 1 is B's
	dst = le.AppendUint32(dst, uint32(ns>>32))
	dst = le.AppendUint32(dst, uint32(ns))
	dst = le.AppendUint32(dst, uint32(len(data)))
	dst = le.AppendUint32(dst, uint32(len(frame)))
	dst = append(dst, data...)
	dst = append(dst, make([]byte, pad)...)
	return le.AppendUint32(dst, total)
}

// appendStats appends, for pcapng, one interface statistics block per
// direction, so the file itself says how many frames it could not hold.
func (e *encoder) appendStats(dst []byte, start, end time.Time, written, dropped [2]uint64) ([]byte, error) {
	if !e.pcapng {
		return dst, nil
	}
	e.out.b = dst
	for dir := range 2 {
		err := e.ng.WriteInterfaceStats(dir, pcapgo.NgInterfaceStatistics{
			LastUpdate:      end,
			StartTime:       start,
			EndTime:         end,
			PacketsReceived: written[dir] + dropped[dir],
			PacketsDropped:  dropped[dir],
		})
		if err != nil {
			return dst, err
		}
	}
	if err := e.ng.Flush(); err != nil {
		return dst, err
	}
	dst, e.out.b = e.out.b, nil
	return dst, nil
}

// recordLen returns the length of the record at the start of b, or 0 if b
// does not hold a whole one.
func (e *encoder) recordLen(b []byte) int {
	var n int
	if e.pcapng {
		if len(b) < 8 {
			return 0
		}
		n = int(binary.LittleEndian.Uint32(b[4:8])) // block total length
	} else {
		if len(b) < 16 {
			return 0
		}
		n = 16 + int(binary.LittleEndian.Uint32(b[8:12])) // header + captured length
	}
	if n <= 0 || n > len(b) {
		return 0
	}
	return n
}

// wholeRecords returns how many whole records b begins with, and their size.
func (e *encoder) wholeRecords(b []byte) (records int, size int) {
	for {
		n := e.recordLen(b[size:])
		if n == 0 {
			return records, size
		}
		records++
		size += n
	}
}

// linkTypeOrDefault returns lt, or Ethernet for 0.
func linkTypeOrDefault(lt layers.LinkType) layers.LinkType {
	if lt == 0 {
		return layers.LinkTypeEthernet
	}
	return lt
}
