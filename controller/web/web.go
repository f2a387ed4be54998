// Package web is the controller's view of captures in a browser: an
// embedded page (plain HTML, CSS and JavaScript, no build step, nothing
// fetched from elsewhere) that lists projects and their links and shows a
// capture as a live packet list, and the feed behind it, which decodes a
// capture stream into rows: with tshark where the controller has it
// (every protocol Wireshark knows, and Wireshark's display filters), else
// with gopacket's layers.
//
// The page gets everything from the /v2 API; the feed is Server-Sent
// Events: "info" (the capture's format), then "rows" events, each a JSON
// array of Row, and "end" when the capture stops. Transport (routes,
// authentication) is package api's; this package writes bytes.
package web

import (
	"bufio"
	"cmp"
	"context"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"os/exec"
	"path"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

//go:embed static
var static embed.FS

// View serves the page and the packet feeds. It is safe for concurrent use.
type View struct {
	log        *slog.Logger
	deadline   time.Duration
	cache      filterCache
	tshark     *tshark // nil: gopacket decodes alone
	maxRecords int
}

// Config configures a View.
type Config struct {
	// FilterDeadline bounds the compile of a display filter, as
	// pcapfilter.CompileAll's deadline (0: pcapfilter.DefaultDeadline).
	FilterDeadline time.Duration
	// Tshark is the tshark program that decodes the feeds' frames and
	// takes Wireshark's display filters (LookTshark finds it in PATH);
	// "" leaves both to gopacket and tcpdump expressions.
	Tshark string
	// TsharkTimeout bounds one tshark process, a feed's or a filter
	// check's (0: DefaultTsharkTimeout).
	TsharkTimeout time.Duration
	// TsharkMemory is tshark's address-space limit in bytes (0:
	// DefaultTsharkMemory).
	TsharkMemory int64
	// MaxRecords is how many records of a capture one feed reads at most;
	// past it the feed ends, saying so (0: DefaultMaxRecords).
	MaxRecords int
	// Logger; nil discards.
	Logger *slog.Logger
}

// New returns a View.
func New(cfg Config) *View {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := &View{log: cfg.Logger, deadline: cfg.FilterDeadline, maxRecords: cmp.Or(cfg.MaxRecords, DefaultMaxRecords)}
	if cfg.Tshark != "" {
		v.tshark = &tshark{path: cfg.Tshark, timeout: cmp.Or(cfg.TsharkTimeout, DefaultTsharkTimeout), memory: cmp.Or(cfg.TsharkMemory, DefaultTsharkMemory),
			checks: make(chan struct{}, maxChecks)}
		if p, err := exec.LookPath("prlimit"); err == nil {
			v.tshark.prlimit = p
		}
	}
	return v
}

// Decoder names what decodes the feeds' frames: "tshark" or "gopacket".
func (v *View) Decoder() string {
	if v.tshark != nil {
		return "tshark"
	}
	return "gopacket"
}

// Page is the HTML page: the same for "/" and for a link's view, which the
// script reads from the address.
func (v *View) Page() []byte {
	b, _ := static.ReadFile("static/index.html")
	return b
}

// Asset returns one of the page's files (app.js, style.css) and its media
// type.
func (v *View) Asset(name string) ([]byte, string, bool) {
	if name != path.Base(name) {
		return nil, "", false
	}
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		return nil, "", false
	}
	return b, mime.TypeByExtension(path.Ext(name)), true
}

// CheckFilter reports whether expr is a display filter the feed accepts:
// empty, a Wireshark display filter tshark takes (where the View has
// tshark), a protocol name, or a tcpdump expression libpcap compiles (for
// Ethernet; the feed compiles it again for the capture's link type) within
// link filters' budget. The error is meant for the user: tshark's message
// where the View has tshark, else libpcap's, or "too complex" (matching
// pcapfilter.ErrTooComplex).
func (v *View) CheckFilter(ctx context.Context, expr string) error {
	_, err := v.compileFilter(ctx, expr, layers.LinkTypeEthernet)
	return err
}

// Feed timing: rows go out in batches, at most every batchEvery or when
// batchRows have gathered; a silent feed sends a comment every keepAlive,
// which is also when a client that left is noticed.
const (
	batchRows  = 256
	batchEvery = 100 * time.Millisecond
	keepAlive  = 5 * time.Second
)

// Feed decodes the capture stream pcap (pcap or pcapng, from its first
// byte) and writes its rows that pass the filter expr to w as Server-Sent
// Events, calling flush after each event, until the stream ends (the
// capture stopped: an "end" event), ctx is done or a write or flush fails
// (the client left). It closes pcap.
func (v *View) Feed(ctx context.Context, pcap io.ReadCloser, expr string, out io.Writer, flush func() error) error {
	defer pcap.Close()
	w := &eventWriter{w: out, flush: flush}
	br := bufio.NewReaderSize(pcap, 64<<10)
	src, err := openCapture(br)
	if err != nil {
		writeEvent(w, "end", map[string]string{"reason": err.Error()})
		return err
	}
	f, err := v.compileFilter(ctx, expr, src.linkType)
	if err != nil {
		writeEvent(w, "end", map[string]string{"reason": err.Error()})
		return err
	}
	info := map[string]any{"format": src.format, "link_type": src.linkType.String(), "filter": expr, "decoder": v.Decoder()}
	if err := writeEvent(w, "info", info); err != nil {
		return err
	}
	rows := make(chan Row, batchRows)
	quit := make(chan struct{})
	decodeErr := make(chan error, 1)
	go func() {
		defer close(rows)
		if v.tshark != nil {
			decodeErr <- v.decodeTshark(ctx, src, f, rows, quit, br)
			return
		}
		decodeErr <- src.decode(f, rows, quit, v.maxRecords)
	}()
	defer func() {
		close(quit)
		pcap.Close() // unblocks a read
		for range rows {
		}
	}()
	ticker := time.NewTicker(batchEvery)
	defer ticker.Stop()
	var batch []Row
	lastSent := time.Now()
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := writeEvent(w, "rows", batch)
		batch, lastSent = batch[:0], time.Now()
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r, ok := <-rows:
			if !ok {
				if err := send(); err != nil {
					return err
				}
				reason := "the capture stopped"
				if err := <-decodeErr; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					reason = err.Error()
				}
				return writeEvent(w, "end", map[string]string{"reason": reason})
			}
			batch = append(batch, r)
			if len(batch) >= batchRows {
				if err := send(); err != nil {
					return err
				}
			}
		case <-ticker.C:
			if err := send(); err != nil {
				return err
			}
			if time.Since(lastSent) >= keepAlive {
				if err := w.comment("keep-alive"); err != nil {
					return err
				}
				lastSent = time.Now()
			}
		}
	}
}

// eventWriter writes Server-Sent Events, each flushed at once.
type eventWriter struct {
	w     io.Writer
	flush func() error
}

// writeEvent writes one event whose data is v in JSON.
func writeEvent(w *eventWriter, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return w.flush()
}

// comment writes a comment line, which clients ignore.
func (w *eventWriter) comment(text string) error {
	if _, err := fmt.Fprintf(w.w, ": %s\n\n", text); err != nil {
		return err
	}
	return w.flush()
}

// capture reads records from a pcap or pcapng stream.
type capture struct {
	format   string
	linkType layers.LinkType
	read     func() ([]byte, gopacket.CaptureInfo, error)
	iface    func(i int) string // pcapng interface names; nil for pcap
}

func openCapture(r *bufio.Reader) (*capture, error) {
	magic, err := r.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("read the capture header: %w", err)
	}
	if binary.LittleEndian.Uint32(magic) == 0x0A0D0D0A {
		ng, err := pcapgo.NewNgReader(r, pcapgo.NgReaderOptions{})
		if err != nil {
			return nil, fmt.Errorf("read the pcapng header: %w", err)
		}
		return &capture{
			format: "pcapng", linkType: ng.LinkType(), read: ng.ReadPacketData,
			iface: func(i int) string {
				if in, err := ng.Interface(i); err == nil {
					return in.Name
				}
				return ""
			},
		}, nil
	}
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("read the pcap header: %w", err)
	}
	return &capture{format: "pcap", linkType: pr.LinkType(), read: pr.ReadPacketData}, nil
}

// decode reads records until the stream ends or quit is closed, and sends
// the rows that pass f, at most maxRecords records.
func (c *capture) decode(f *filter, rows chan<- Row, quit <-chan struct{}, maxRecords int) error {
	var first time.Time
	for no := 1; ; no++ {
		if no > maxRecords {
			return recordLimit(maxRecords)
		}
		data, ci, err := c.read()
		if err != nil {
			return err
		}
		if no == 1 {
			first = ci.Timestamp
		}
		if !f.matchRaw(data) {
			continue
		}
		r := decodeRow(no, first, ci, data, c.linkType)
		if !f.matchRow(r) {
			continue
		}
		if c.iface != nil {
			r.Iface = c.iface(ci.InterfaceIndex)
		}
		select {
		case rows <- r:
		case <-quit:
			return nil
		}
	}
}
