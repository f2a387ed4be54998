package captures

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/gopacket/layers"
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

// Options configure a [Writer] or a [File]. The zero value writes an
// Ethernet pcap.
type Options struct {
	// Format is FormatPcap (the default when empty) or FormatPcapng.
	Format string
	// LinkType is written in the header; zero means Ethernet.
	LinkType layers.LinkType
	// Snaplen cuts longer frames; zero means DefaultSnaplen.
	Snaplen int
	// Interfaces name the pcapng interfaces of the two directions: the
	// sender of each, e.g. "PC1 Ethernet0". Empty names become "A" and "B".
	Interfaces [2]string
	// Now stamps each record; nil means time.Now. Tests pin it.
	Now func() time.Time

	// For a File only: QueueBytes bounds the records waiting for the disk
	// (zero means DefaultQueueBytes), and FlushInterval is how long a record
	// may wait before it is written out for readers to see (zero means
	// DefaultFlushInterval).
	QueueBytes    int
	FlushInterval time.Duration
}

func (o *Options) defaults() {
	o.LinkType = linkTypeOrDefault(o.LinkType)
	if o.Snaplen <= 0 || o.Snaplen > DefaultSnaplen {
		o.Snaplen = DefaultSnaplen
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
}

// Writer appends frames to a capture stream written to an io.Writer, in
// the calling goroutine: it writes and flushes the file header when it is
// made, and hands each record to the underlying writer in one Write as soon
// as it is written, so a reader following the stream only ever sees whole
// records. (A [File] does the same for a file on disk, off the caller's
// path.)
//
// A Writer is safe for concurrent use, and it never keeps the frames it is
// given. Records are stamped under the same lock that writes them, so
// records from concurrent writers are in non-decreasing time order. The first
// error is sticky: every later call returns it. A nil *Writer discards
// everything.
type Writer struct {
	now func() time.Time

	mu        sync.Mutex // guards everything below
	w         io.Writer
	enc       *encoder
	rec       []byte // the record being written, reused
	last      time.Time
	err       error
	committed int64 // bytes accepted by the underlying writer, all whole records
	frames    uint64
}

// NewWriter writes a capture file header to w and returns a Writer for the
// records that follow. w should not be written to by anyone else.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	opts.defaults()
	enc, err := newEncoder(opts)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(enc.header); err != nil {
		return nil, fmt.Errorf("captures: write file header: %w", err)
	}
	return &Writer{now: opts.Now, w: w, enc: enc, committed: int64(len(enc.header))}, nil
}

// WritePacket appends frame as one record stamped with the current time.
// Frames longer than the snapshot length are cut; the record keeps the
// original length. dir selects the pcapng interface; classic pcap records
// carry no direction.
func (w *Writer) WritePacket(dir Direction, frame []byte) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	ts := w.now()
	if ts.Before(w.last) {
		ts = w.last // the wall clock stepped back: keep the file in order
	}
	w.last = ts
	rec := w.enc.appendRecord(w.rec[:0], dir, ts, frame)
	w.rec = rec
	if _, err := w.w.Write(rec); err != nil {
		w.err = fmt.Errorf("captures: write packet: %w", err)
		return w.err
	}
	w.committed += int64(len(rec))
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
