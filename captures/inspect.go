package captures

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/labtap/labtap/capspec"
)

// Info is what a capture file holds, read from the file itself: what a
// list of capture files shows of each.
type Info struct {
	Format string // capspec.FormatPcap or capspec.FormatPcapng
	// Records counts the whole records (packets) read; First and Last are
	// the first and the last one's time, zero without records.
	Records     uint64
	First, Last time.Time
	// Dropped is what the file says it could not hold: a pcapng file's
	// interface statistics (isb_ifdrop of each interface's last block,
	// summed). A pcap file has no place to say it: 0.
	Dropped uint64
	// Whole is the length of the file up to its last whole record (or
	// block): what was read.
	Whole int64
}

// Scanner reads a capture file's records to tell its Info, and goes on
// from where it stopped when the file has grown since (a running
// capture's file): a file is read once however often it is asked about.
// The zero value is ready; a Scanner is for one file and not safe for
// concurrent use.
type Scanner struct {
	info    Info
	started bool
	order   binary.ByteOrder
	nanos   bool            // pcap: nanosecond timestamps
	tsres   []time.Duration // pcapng: each interface's timestamp unit
	drops   []uint64        // pcapng: each interface's last isb_ifdrop
}

// maxBlock bounds one record or block a Scanner reads whole: a pcapng
// block longer than this is skipped unread (its length is still checked),
// so a hostile file costs no memory.
const maxBlock = 1 << 20

// Scan reads r's bytes from where the last Scan stopped up to size, the
// file's length now, and returns what the whole file holds so far. A
// record cut short at size is left for the next Scan. A file that is not a
// capture, or whose records make no sense, is an error.
func (s *Scanner) Scan(r io.ReaderAt, size int64) (Info, error) {
	if size < s.info.Whole {
		return s.info, errors.New("captures: the file got shorter since it was read")
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, s.info.Whole, size-s.info.Whole), 64<<10)
	off := s.info.Whole
	if !s.started {
		n, ok, err := s.header(br)
		if err != nil || !ok {
			return s.info, err // !ok: the header is not all there yet
		}
		s.started = true
		off += n
		s.info.Whole = off
	}
	for {
		n, err := s.record(br)
		if err != nil {
			return s.info, err
		}
		if n == 0 {
			return s.info, nil
		}
		off += n
		s.info.Whole = off
	}
}

// header reads a pcap file header, or tells a pcapng file (whose section
// header is a block like the others), and returns the bytes it took; !ok
// when the file is shorter than its header.
func (s *Scanner) header(br *bufio.Reader) (n int64, ok bool, err error) {
	head, err := br.Peek(24)
	if err != nil {
		return 0, false, nil
	}
	le, be := binary.LittleEndian, binary.BigEndian
	switch {
	case le.Uint32(head) == 0xa1b2c3d4 || le.Uint32(head) == 0xa1b23c4d:
		s.order, s.nanos = le, le.Uint32(head) == 0xa1b23c4d
	case be.Uint32(head) == 0xa1b2c3d4 || be.Uint32(head) == 0xa1b23c4d:
		s.order, s.nanos = be, be.Uint32(head) == 0xa1b23c4d
	case le.Uint32(head) == 0x0a0d0d0a:
		s.info.Format = capspec.FormatPcapng
		return 0, true, nil // the section header block is read as a record
	default:
		return 0, false, errors.New("captures: not a pcap or pcapng file")
	}
	s.info.Format = capspec.FormatPcap
	_, err = br.Discard(24)
	return 24, err == nil, err
}

// record reads one pcap record or pcapng block and returns its length; 0
// when it is not all there yet.
func (s *Scanner) record(br *bufio.Reader) (int64, error) {
	if s.info.Format == capspec.FormatPcap {
		h, err := br.Peek(16)
		if err != nil {
			return 0, nil
		}
		sec, frac, caplen := s.order.Uint32(h), s.order.Uint32(h[4:]), s.order.Uint32(h[8:])
		if caplen > maxBlock {
			return 0, fmt.Errorf("captures: a record of %d bytes", caplen)
		}
		n := 16 + int64(caplen)
		if _, err := br.Peek(int(n)); err != nil {
			return 0, nil
		}
		if !s.nanos {
			frac *= 1000
		}
		s.packet(time.Unix(int64(sec), int64(frac)))
		_, err = br.Discard(int(n))
		return n, err
	}
	h, err := br.Peek(12)
	if err != nil {
		return 0, nil
	}
	typ := binary.LittleEndian.Uint32(h)
	if typ == 0x0a0d0d0a { // a section header: its byte order for what follows
		switch binary.LittleEndian.Uint32(h[8:]) {
		case 0x1a2b3c4d:
			s.order = binary.LittleEndian
		case 0x4d3c2b1a:
			s.order = binary.BigEndian
		default:
			return 0, errors.New("captures: a pcapng section header of no byte order")
		}
		s.tsres, s.drops = nil, nil
	}
	if s.order == nil {
		return 0, errors.New("captures: a pcapng file that does not begin with a section header")
	}
	typ = s.order.Uint32(h)
	n := int64(s.order.Uint32(h[4:]))
	if n < 12 || n%4 != 0 {
		return 0, fmt.Errorf("captures: a pcapng block of length %d", n)
	}
	if n > maxBlock {
		// Too long to read whole: skipped once it is all there (the next
		// Scan reads it again from its start if it is not).
		if got, _ := io.CopyN(io.Discard, br, n); got < n {
			return 0, nil
		}
		return n, nil
	}
	b, err := br.Peek(int(n))
	if err != nil {
		return 0, nil
	}
	if s.order.Uint32(b[n-4:]) != uint32(n) {
		return 0, errors.New("captures: a pcapng block whose two lengths differ")
	}
	body := b[8 : n-4]
	switch typ {
	case 1: // interface description
		res := time.Microsecond
		if len(body) >= 8 {
			if v, ok := s.option(body[8:], 9); ok && len(v) >= 1 {
				res = tsUnit(v[0])
			}
		}
		s.tsres = append(s.tsres, res)
		s.drops = append(s.drops, 0)
	case 6: // enhanced packet
		if len(body) >= 12 {
			s.packet(s.stamp(s.order.Uint32(body), s.order.Uint32(body[4:]), s.order.Uint32(body[8:])))
		}
	case 3: // simple packet: no time
		s.info.Records++
	case 5: // interface statistics
		if len(body) >= 12 {
			iface := s.order.Uint32(body)
			if v, ok := s.option(body[12:], 5); ok && len(v) >= 8 && int(iface) < len(s.drops) {
				s.drops[iface] = s.order.Uint64(v)
				var sum uint64
				for _, d := range s.drops {
					sum += d
				}
				s.info.Dropped = sum
			}
		}
	}
	_, err = br.Discard(int(n))
	return n, err
}

// packet counts a record stamped ts.
func (s *Scanner) packet(ts time.Time) {
	if s.info.Records == 0 {
		s.info.First = ts
	}
	s.info.Last = ts
	s.info.Records++
}

// stamp is an enhanced packet block's time.
func (s *Scanner) stamp(iface, hi, lo uint32) time.Time {
	unit := time.Microsecond
	if int(iface) < len(s.tsres) {
		unit = s.tsres[iface]
	}
	ticks := int64(hi)<<32 | int64(lo)
	if unit <= 0 { // finer than a nanosecond: rounded down
		return time.Unix(0, ticks)
	}
	return time.Unix(0, 0).Add(time.Duration(ticks) * unit)
}

// tsUnit is an if_tsresol's unit: 10^-v seconds, or 2^-v with the top bit.
func tsUnit(v byte) time.Duration {
	if v&0x80 != 0 {
		shift := v & 0x7f
		if shift >= 30 {
			return 1
		}
		return time.Second >> shift
	}
	if v > 9 {
		return 0
	}
	d := time.Second
	for range v {
		d /= 10
	}
	return d
}

// option returns the value of the first option code in a pcapng block's
// options.
func (s *Scanner) option(opts []byte, code uint16) ([]byte, bool) {
	for len(opts) >= 4 {
		c, l := s.order.Uint16(opts), int(s.order.Uint16(opts[2:]))
		if c == 0 {
			return nil, false
		}
		if 4+l > len(opts) {
			return nil, false
		}
		if c == code {
			return opts[4 : 4+l], true
		}
		opts = opts[4+(l+3)&^3:]
	}
	return nil, false
}
