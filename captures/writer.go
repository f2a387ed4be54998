package captures

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// DefaultSnaplen is the snapshot length written in capture headers: frames
// longer than this are cut (GNS3's uBridge uses the same value).
const DefaultSnaplen = 65535

// Direction tells which end of a link sent a frame.
type Direction int

// The two directions of a link.
const (
	AtoB Direction = 0 // sent by the link's first endpoint
	BtoA Direction = 1 // sent by the link's second endpoint
)

// Options configure a [Writer]. The zero value writes an Ethernet pcap.
type Options struct {
	// LinkType is written in the header; zero means Ethernet.
	LinkType layers.LinkType
	// Snaplen cuts longer frames; zero means DefaultSnaplen.
	Snaplen int
	// Now stamps each record; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// Writer appends frames to a classic pcap stream (version 2.4, microsecond
// timestamps). It writes and flushes the file header when it is made, and
// hands each record to the underlying writer in one Write as soon as it is
// written, so a reader following the stream only ever sees whole records.
//
// A Writer is safe for concurrent use, and it never keeps the frames it is
// given. Records are stamped under the same lock that writes them, so
// records from concurrent writers are in non-decreasing time order. The first
// error is sticky: every later call returns it. A nil *Writer discards
// everything.
type Writer struct {
	now     func() time.Time
	snaplen int

	mu        sync.Mutex // guards everything below
	bw        *bufio.Writer
	pw        *pcapgo.Writer
	err       error
	committed int64 // bytes accepted by the underlying writer, all whole records
	frames    uint64
}

// bufferSize holds the largest record (16-byte header + 65535 bytes) so a
// record reaches the underlying writer in a single Write.
const bufferSize = 16 + DefaultSnaplen + 1

// NewWriter writes a pcap file header to w, flushes it, and returns a Writer
// for the records that follow. w should not be written to by anyone else.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	if opts.LinkType == 0 {
		opts.LinkType = layers.LinkTypeEthernet
	}
	if opts.Snaplen <= 0 || opts.Snaplen > DefaultSnaplen {
		opts.Snaplen = DefaultSnaplen
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	bw := bufio.NewWriterSize(w, bufferSize)
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(uint32(opts.Snaplen), opts.LinkType); err != nil {
		return nil, fmt.Errorf("captures: write file header: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("captures: write file header: %w", err)
	}
	return &Writer{now: opts.Now, snaplen: opts.Snaplen, bw: bw, pw: pw, committed: 24}, nil
}

// WritePacket appends frame as one record stamped with the current time.
// Frames longer than the snapshot length are cut; the record keeps the
// original length. dir is accepted for symmetry with pcapng and ignored:
// classic pcap records carry no direction.
func (w *Writer) WritePacket(dir Direction, frame []byte) error {
	if w == nil {
		return nil
	}
	data := frame[:min(len(frame), w.snaplen)]
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	ci := gopacket.CaptureInfo{Timestamp: w.now(), CaptureLength: len(data), Length: len(frame)}
	if err := w.pw.WritePacket(ci, data); err != nil {
		w.err = fmt.Errorf("captures: write packet: %w", err)
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("captures: write packet: %w", err)
		return w.err
	}
	w.committed += int64(16 + len(data))
	w.frames++
	return nil
}

// Stats returns the number of records written and the size of the stream
// in bytes, header included. Both count whole records only.
func (w *Writer) Stats() (frames uint64, size int64) {
	if w == nil {
		return 0, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frames, w.committed
}

// Err returns the error that stopped the Writer, nil if none did.
func (w *Writer) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ErrClosed is returned by a Writer's methods once it is closed.
var ErrClosed = errors.New("captures: writer closed")

// Close stops the Writer: later writes fail with ErrClosed. It does not close
// the underlying writer, which already holds every record.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = ErrClosed
	}
	return nil
}
