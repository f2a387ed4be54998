package captures

import (
	"os"
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

// Options configure a [File]. The zero value writes an
// Ethernet pcap.
type Options struct {
	// Format is capspec.FormatPcap (the default when empty) or
	// capspec.FormatPcapng.
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
	// (zero means DefaultQueueBytes), and FlushInterval is how often the
	// records queued are written out for readers to see: a record waits
	// twice that at most, plus the time the disk takes (zero means
	// DefaultFlushInterval).
	QueueBytes    int
	FlushInterval time.Duration
	// MaxBytes bounds the file's size: the file takes no record that would
	// end past it (WritePackets returns how many frames it took). Zero
	// means no bound. A Ring uses it to begin the next file.
	MaxBytes int64
	// MaxRecords bounds the records the file takes, as MaxBytes its size.
	// Zero means no bound.
	MaxRecords uint64
	// BufferedIO writes everything through the page cache, as if the file
	// system had no direct I/O: for comparison, and for a file system whose
	// direct I/O misbehaves.
	BufferedIO bool
	// Pool lends a File the memory of its queue; nil means DefaultPool(),
	// the process's.
	Pool *Pool
	// Sync makes a new file durable in Create: it is called with the file,
	// once its header is written, and with its directory, and Create
	// answers only once both calls returned nil. Nil means
	// (*os.File).Sync; tests inject a failing or slow disk with it.
	Sync func(f *os.File) error
	// Dir is the directory Create makes the file in, opened, for its sync;
	// nil: Create opens it each time. It is not closed.
	Dir *os.File

	hooks hooks // tests open race windows with them
	// gate, when set, holds the writer back from the file until it is
	// opened: the records queue meanwhile (RingHooks.Created).
	gate *gate
	// openDirect opens the file's direct handle (nil: none); the writer
	// calls it when it starts, so Create does not wait for it.
	openDirect func() fileHandle
}

// gate is a one-way door: closed until open is called, once or more.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

// open opens g; a nil gate is open.
func (g *gate) open() {
	if g != nil {
		g.once.Do(func() { close(g.ch) })
	}
}

// hooks are called by a File's writer at points where tests need to act.
type hooks struct {
	due  func() // after the writes a due time starts, before it checks for more
	tick func() // once per due time, as it begins (the flush timer fired), before any write
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
	if o.Pool == nil {
		o.Pool = DefaultPool()
	}
}
