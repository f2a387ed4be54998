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
// is whole is left as it is. Like Create, it works through dir only.
func Repair(dir *os.Root, name string) (cut int64, err error) {
	if !ValidFileName(name) {
		return 0, fmt.Errorf("captures: invalid file name %q", name)
	}
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
func wholeLength(r *bufio.Reader) (int64, error) {
	head, err := r.Peek(24)
	if err != nil {
		return 0, errors.New("no complete file header")
	}
	switch binary.LittleEndian.Uint32(head) {
	case 0xa1b2c3d4, 0xa1b23c4d: // classic pcap, written little-endian
		return walk(r, 24, 16, func(h []byte) int64 { return 16 + int64(binary.LittleEndian.Uint32(h[8:])) })
	case 0x0a0d0d0a: // pcapng section header block
		order := binary.ByteOrder(binary.LittleEndian)
		if binary.LittleEndian.Uint32(head[8:]) != 0x1a2b3c4d {
			order = binary.BigEndian
		}
		return walk(r, 0, 8, func(h []byte) int64 { return int64(order.Uint32(h[4:])) })
	}
	return 0, errors.New("not a pcap or pcapng file")
}

// walk skips a header of skip bytes, then records whose length the first
// peek bytes tell, until one is not whole.
func walk(r *bufio.Reader, skip int, peek int, length func([]byte) int64) (int64, error) {
	if _, err := r.Discard(skip); err != nil {
		return 0, err
	}
	off := int64(skip)
	for {
		h, err := r.Peek(peek)
		if err != nil {
			return off, nil // end of file, or a header cut short
		}
		n := length(h)
		if n < int64(peek) {
			return off, nil // garbage where a record should start
		}
		got, err := io.CopyN(io.Discard, r, n)
		if err != nil || got != n {
			return off, nil // a record cut short
		}
		off += n
	}
}
