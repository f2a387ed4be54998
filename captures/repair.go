package captures

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Repair makes a capture file that a crash interrupted valid again: it
// walks the file's records (classic pcap or pcapng) and cuts off whatever
// follows the last whole one, returning how many bytes it cut. A file that
// is whole is left as it is. Like Create, it works through dir only: no
// name can reach outside it.
func Repair(dir *os.Root, name string) (cut int64, err error) {
	f, err := dir.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("captures: repair %s: %w", name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("captures: repair %s: %w", name, err)
	}
	whole, err := wholeLength(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return 0, fmt.Errorf("captures: repair %s: %w", name, err)
	}
	if whole >= info.Size() {
		return 0, nil
	}
	if err := f.Truncate(whole); err != nil {
		return 0, fmt.Errorf("captures: repair %s: %w", name, err)
	}
	return info.Size() - whole, f.Sync()
}

// wholeLength returns the length of the longest prefix of a capture made of
// its header and whole records.
//
// A File writes up to maxInflight runs of blocks at once, and they may
// reach the disk in any order: a writer killed at the wrong moment leaves a
// block never written, a hole that reads as zeros, with records after it. So a
// record must also look sound (a pcap record header is never all zeros and
// never claims more bytes than the snapshot length or the frame; a pcapng
// block ends with its own length), and where the walk finds one that does
// not, a hole may have begun at the start of that block, or at the start of
// the next one if the record runs into it: the file is cut back to the last
// record that ends before the hole may begin, so that a record whose end
// fell into the hole does not stay with zeros for its tail.
func wholeLength(r *bufio.Reader) (int64, error) {
	head, err := r.Peek(24)
	if err != nil {
		return 0, errors.New("no complete file header")
	}
	le := binary.LittleEndian
	switch le.Uint32(head) {
	case 0xa1b2c3d4, 0xa1b23c4d: // classic pcap, written little-endian
		snaplen := le.Uint32(head[16:])
		return walk(r, 24, 16, func(rec []byte) (int64, bool) {
			caplen, origlen := le.Uint32(rec[8:]), le.Uint32(rec[12:])
			sound := caplen <= snaplen && caplen <= origlen && !allZero(rec[:16])
			return 16 + int64(caplen), sound
		}, false, nil)
	case 0x0a0d0d0a: // pcapng section header block
		order := binary.ByteOrder(le)
		if le.Uint32(head[8:]) != 0x1a2b3c4d {
			order = binary.BigEndian
		}
		// The section header and interface blocks were made durable when
		// the file was (Create returns once they are): a hole after them
		// cuts back to them, never into them.
		head := true
		n, err := walk(r, 0, 8, func(rec []byte) (int64, bool) {
			n := int64(order.Uint32(rec[4:]))
			if int64(len(rec)) < n || n < 12 {
				return n, n >= 12 // too long to check its end here: taken as it is
			}
			return n, order.Uint32(rec[n-4:]) == uint32(n)
		}, true, func(rec []byte) bool {
			t := order.Uint32(rec)
			head = head && (t == 0x0a0d0d0a || t == 1) // a section header, an interface description
			return head
		})
		if err == nil && n == 0 {
			return 0, errors.New("no complete section header block") // not a capture: not cut to nothing
		}
		return n, err
	}
	return 0, errors.New("not a pcap or pcapng file")
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// walk skips a header of skip bytes, then takes records while they are
// whole and sound. record tells a record's length and whether it is sound
// from its first peek bytes, or from the whole record when whole is set
// and the record fits in r's buffer. header, if not nil, tells a sound
// record that is still part of the file's header: the walk never cuts
// back into the header.
func walk(r *bufio.Reader, skip int, peek int, record func(rec []byte) (n int64, sound bool), whole bool, header func(rec []byte) bool) (int64, error) {
	if _, err := r.Discard(skip); err != nil {
		return 0, err
	}
	off := int64(skip)
	beforeBlock := off // the end of the last record that ends at or before the start of off's block
	for {
		h, err := r.Peek(peek)
		if err != nil {
			return off, nil // end of file, or a header cut short
		}
		n, sound := record(h)
		if whole && n > int64(peek) && n <= int64(r.Size()) {
			rec, err := r.Peek(int(n))
			if err != nil {
				return off, nil // a record cut short
			}
			n, sound = record(rec)
		}
		if !sound || n < int64(peek) {
			// Garbage where a record should start. If the record runs into
			// the next block, that block may be the hole: the record goes.
			// Otherwise the hole may have begun where this block begins.
			if n > 0 && (off+n-1)/blockSize > off/blockSize {
				return off, nil
			}
			return beforeBlock, nil
		}
		inHeader := header != nil && header(h) // h is r's buffer: read before r moves on
		got, err := io.CopyN(io.Discard, r, n)
		if err != nil || got != n {
			return off, nil // a record cut short
		}
		end := off + n
		if inHeader {
			beforeBlock = end
			off = end
			continue
		}
		if start := end / blockSize * blockSize; start > off/blockSize*blockSize {
			beforeBlock = off // this record crosses into a new block...
			if end == start {
				beforeBlock = end // ...or ends exactly where it starts
			}
		}
		off = end
	}
}
