package captures

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/internal/testenv"
)

// syncBuffer is a bytes.Buffer a follower writes while the test reads.
// With a gate, every write after the first waits until the gate is
// closed: a reader that falls behind.
type syncBuffer struct {
	gate chan struct{}
	mu   sync.Mutex
	b    bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	first := s.b.Len() == 0
	s.mu.Unlock()
	if s.gate != nil && !first {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// numbered returns frame i of a steady flow: size bytes starting with i.
func numbered(i, size int) []byte {
	f := make([]byte, size)
	binary.BigEndian.PutUint32(f, uint32(i))
	return f
}

// sequenceOf reads a capture and returns the numbers its frames start with.
func sequenceOf(t *testing.T, format string, data []byte) []int {
	t.Helper()
	read := readerOf(t, format, data)
	var seq []int
	for {
		frame, _, err := read()
		if errors.Is(err, io.EOF) {
			return seq
		}
		if err != nil {
			t.Fatalf("record %d: %v", len(seq), err)
		}
		seq = append(seq, int(binary.BigEndian.Uint32(frame)))
	}
}

// capinfosOK checks a file with Wireshark's capinfos, when it is there.
func capinfosOK(t *testing.T, path string) {
	t.Helper()
	if !testenv.HaveTool(t, "capinfos") {
		return // checked with pcapgo only; TestRingFilesAreValidForCapinfos requires it
	}
	if out, err := exec.Command("capinfos", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("capinfos %s: %v\n%s", filepath.Base(path), err, out)
	}
}

func TestRingRotatesUnderASteadyFlowAndTheStreamIsTheRecordsInOrder(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			root, dir := openRoot(t)
			const maxBytes, keep, frames, size = 128 << 10, 3, 3000, 700 // about 16 files
			name := "ring" + capspec.Ext(format)
			r, err := CreateRing(root, name, Options{Format: format}, Limits{MaxBytes: maxBytes, Files: keep}, RingHooks{})
			if err != nil {
				t.Fatal(err)
			}
			// The stream's reader falls behind: it takes nothing past the
			// header until every frame is written and the oldest files are
			// gone. It still gets every record.
			stream := syncBuffer{gate: make(chan struct{})}
			followed := make(chan error, 1)
			go func() { followed <- r.Follow(t.Context(), &stream, nil) }()
			// (The header is the first write: it passes the gate.)
			for deadline := time.Now().Add(time.Minute); len(stream.Bytes()) == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the stream never began")
				}
			}
			for i := 0; i < frames; i += 10 {
				batch := make([][]byte, 10)
				for j := range batch {
					batch[j] = numbered(i+j, size)
				}
				r.WritePackets(Direction(i/10%2), batch)
				time.Sleep(200 * time.Microsecond) // a steady flow, not one burst
			}
			waitRemoved := time.Now().Add(time.Minute)
			for _, err := os.Stat(filepath.Join(dir, capspec.RingName(name, 1))); err == nil; _, err = os.Stat(filepath.Join(dir, capspec.RingName(name, 1))) {
				if time.Now().After(waitRemoved) {
					t.Fatal("the oldest file was never removed")
				}
				time.Sleep(time.Millisecond)
			}
			close(stream.gate)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-followed; err != nil {
				t.Fatal(err)
			}
			written, _, dropped, files := r.Stats()
			if files < keep+2 || written+dropped != frames {
				t.Fatalf("%d files, %d frames written and %d dropped, want more than %d files and %d frames", files, written, dropped, keep+1, frames)
			}

			// The newest files are kept, each valid on its own and within
			// the limit (pcapng's closing statistics aside).
			entries, _ := os.ReadDir(dir)
			var kept []string
			for _, e := range entries {
				kept = append(kept, e.Name())
			}
			var want []string
			for n := files - keep + 1; n <= files; n++ {
				want = append(want, capspec.RingName(name, n))
			}
			if !slices.Equal(kept, want) {
				t.Fatalf("files %v, want %v", kept, want)
			}
			var records []int
			var tail []byte // the records of the kept files, end to end
			for _, f := range kept {
				data, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				capinfosOK(t, filepath.Join(dir, f))
				seq := sequenceOf(t, format, data)
				if len(seq) == 0 {
					t.Fatalf("%s holds no record", f)
				}
				records = append(records, seq...)
				body := data[r.cur.Load().f.HeaderLen():]
				if format == capspec.FormatPcap && len(data) > maxBytes {
					t.Fatalf("%s holds %d bytes, over the %d limit", f, len(data), maxBytes)
				}
				tail = append(tail, body...)
			}

			// The stream is one capture: the frames in order, and its end
			// is the kept files' records, byte for byte.
			got := stream.Bytes()
			seq := sequenceOf(t, format, got)
			if len(seq) != int(written) || !slices.IsSorted(seq) || len(slices.Compact(slices.Clone(seq))) != len(seq) {
				t.Fatalf("the stream holds %d frames, want the %d written, in order", len(seq), written)
			}
			t.Logf("%d files, %d frames written, %d dropped (the next file was not ready)", files, written, dropped)
			if !bytes.HasSuffix(got, tail) {
				t.Fatal("the stream does not end with the kept files' records")
			}
			if !slices.Equal(seq[len(seq)-len(records):], records) {
				t.Fatal("the kept files do not hold the stream's last frames")
			}
		})
	}
}

func TestRingWithoutFilesStopsAtItsLimit(t *testing.T) {
	root, dir := openRoot(t)
	r, err := CreateRing(root, "one.pcap", Options{}, Limits{MaxBytes: 128 << 10}, RingHooks{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 { // 400 kB: past the limit
		r.WritePackets(AtoB, [][]byte{numbered(i, 1000)})
	}
	select {
	case <-r.Done():
	case <-time.After(time.Minute):
		t.Fatal("the capture did not end at its limit")
	}
	if !strings.Contains(r.Limit(), "capture_max_bytes") || r.Err() != nil {
		t.Fatalf("Limit %q, Err %v", r.Limit(), r.Err())
	}
	data, err := os.ReadFile(filepath.Join(dir, "one.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	seq := sequenceOf(t, capspec.FormatPcap, data)
	if len(data) > 128<<10 || len(data)+1016 <= 128<<10 || len(seq) == 0 || seq[len(seq)-1] != len(seq)-1 {
		t.Fatalf("%d bytes, %d frames: want the frames from the first that fill 128 KiB", len(data), len(seq))
	}
	capinfosOK(t, filepath.Join(dir, "one.pcap"))
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files %v, want one", entries)
	}
}

func TestRingBeginsTheNextFileAtItsTimeLimit(t *testing.T) {
	root, dir := openRoot(t)
	var mu sync.Mutex
	var began []string
	r, err := CreateRing(root, "t.pcap", Options{}, Limits{MaxDuration: 20 * time.Millisecond, Files: 100}, RingHooks{
		Began: func(name string) { mu.Lock(); began = append(began, name); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		r.WritePackets(AtoB, [][]byte{numbered(i, 100)})
		if _, _, _, files := r.Stats(); files >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fourth file")
		}
		time.Sleep(time.Millisecond)
	}
	r.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(began) < 3 || began[0] != "t-00002.pcap" {
		t.Fatalf("began %v", began)
	}
	for _, name := range began {
		capinfosOK(t, filepath.Join(dir, name))
	}
}

func TestRingFilesAreValidForCapinfos(t *testing.T) {
	testenv.RequireTools(t, "capinfos")
	root, dir := openRoot(t)
	r, err := CreateRing(root, "c.pcapng", Options{Format: capspec.FormatPcapng}, Limits{MaxBytes: 128 << 10, Files: 2}, RingHooks{})
	if err != nil {
		t.Fatal(err)
	}
	// Frames until a third file began: a burst may fill a file before the
	// next one is made (those frames are dropped), and a file begins with
	// a record.
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		r.WritePackets(Direction(i%2), [][]byte{numbered(i, 1000)})
		if _, _, _, files := r.Stats(); files >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no third file")
		}
	}
	r.Close()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("files %v", entries)
	}
	for _, e := range entries {
		out, err := exec.Command("capinfos", "-c", "-M", filepath.Join(dir, e.Name())).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Number of packets") {
			t.Fatalf("capinfos %s: %v\n%s", e.Name(), err, out)
		}
	}
}

func TestASnapshotIsTheFileBeingWrittenUpToItsLastWholeRecord(t *testing.T) {
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			root, dir := openRoot(t)
			name := "snap" + capspec.Ext(format)
			r, err := CreateRing(root, name, Options{Format: format}, Limits{MaxBytes: 128 << 10, Files: 2}, RingHooks{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			// Frames keep coming while snapshots are taken; each snapshot
			// reads whole records, in order, from a file that may be removed
			// (two files kept) before it is read.
			stop := make(chan struct{})
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					r.WritePackets(Direction(i%2), [][]byte{numbered(i, 900)})
					time.Sleep(50 * time.Microsecond)
				}
			}()
			for n := range 20 {
				s, err := r.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				if !capspec.IsRingName(s.Name, name) {
					t.Fatalf("snapshot of %s", s.Name)
				}
				time.Sleep(2 * time.Millisecond) // the ring moves on meanwhile
				data, err := io.ReadAll(s)
				s.Close()
				if err != nil || int64(len(data)) != s.Size {
					t.Fatalf("snapshot %d: %d bytes of %d, %v", n, len(data), s.Size, err)
				}
				seq := sequenceOf(t, format, data) // fails on a torn record
				for i := 1; i < len(seq); i++ {
					if seq[i] != seq[i-1]+1 {
						t.Fatalf("snapshot %d: frame %d after %d", n, seq[i], seq[i-1])
					}
				}
				if n == 19 {
					path := filepath.Join(t.TempDir(), s.Name)
					os.WriteFile(path, data, 0o644)
					capinfosOK(t, path)
				}
			}
			close(stop)
			<-wrote
			r.Close()
			// Once ended, the snapshot is the whole last file.
			s, err := r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			info, _ := os.Stat(filepath.Join(dir, s.Name))
			if info == nil || info.Size() != s.Size {
				t.Fatalf("snapshot of the ended ring: %d bytes, the file %v", s.Size, info)
			}
		})
	}
}

// A file that fills while the next one is still being created (a slow
// disk, a loaded machine): its frames are dropped, counted, and the ring
// goes on, the next file beginning with the next record. It once began the
// next file as soon as it was made, with no record for it, and without
// waking the ring's goroutine: the filled file was never closed, no spare
// made, and every later frame dropped.
func TestARingGoesOnWhenAFileFillsBeforeTheNextOneIsMade(t *testing.T) {
	root, dir := openRoot(t)
	const name = "slow.pcap"
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	r, err := CreateRing(root, name, Options{}, Limits{MaxBytes: 128 << 10, Files: 2}, RingHooks{
		Creating: func(n string) {
			if n == capspec.RingName(name, 2) {
				<-release // file 2 is slow to make
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	i := 0
	write := func() { r.WritePackets(AtoB, [][]byte{numbered(i, 1000)}); i++ }
	// Fill file 1, and drop frames past it: file 2 is not there.
	deadline := time.Now().Add(time.Minute)
	for {
		write()
		if _, _, dropped, _ := r.Stats(); dropped > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no frame dropped while file 2 was being made")
		}
	}
	free()
	// The ring goes on: file 2 begins with the next record, later files
	// follow, and file 1 is removed.
	for {
		write()
		_, _, _, files := r.Stats()
		_, err := os.Stat(filepath.Join(dir, capspec.RingName(name, 1)))
		if files >= 5 && err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files begun, file 1 removed: %v; the ring stalled", files, err != nil)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	written, _, dropped, files := r.Stats()
	if written+dropped != uint64(i) {
		t.Fatalf("%d written and %d dropped of %d frames", written, dropped, i)
	}
	// Every file kept holds records: a file begins for a record.
	for n := files - 1; n <= files; n++ {
		data, err := os.ReadFile(filepath.Join(dir, capspec.RingName(name, n)))
		if err != nil {
			t.Fatal(err)
		}
		if len(sequenceOf(t, capspec.FormatPcap, data)) == 0 {
			t.Fatalf("%s holds no record", capspec.RingName(name, n))
		}
	}
}

// TestRingFilesEndAtCaptureMaxPackets: without a ring the capture ends at
// once with its N-th record (not with a later frame); with one, each file
// holds N records and the next takes over.
func TestRingFilesEndAtCaptureMaxPackets(t *testing.T) {
	root, dir := openRoot(t)
	one, err := CreateRing(root, "one.pcap", Options{}, Limits{MaxPackets: 10}, RingHooks{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		one.WritePackets(AtoB, [][]byte{numbered(i, 100)})
	}
	select {
	case <-one.Done():
	case <-time.After(time.Minute):
		t.Fatal("the capture did not end at its 10th packet")
	}
	if !strings.Contains(one.Limit(), "capture_max_packets (10 packets)") {
		t.Fatalf("Limit %q", one.Limit())
	}
	data, err := os.ReadFile(filepath.Join(dir, "one.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if seq := sequenceOf(t, capspec.FormatPcap, data); len(seq) != 10 {
		t.Fatalf("%d records, want 10", len(seq))
	}

	ring, err := CreateRing(root, "ring.pcap", Options{}, Limits{MaxPackets: 10, Files: 100}, RingHooks{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 35 {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			ring.mu.Lock()
			ready := ring.spare != nil // the next file is made ahead: no frame waits for it
			ring.mu.Unlock()
			if ready {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no spare file within a minute")
			}
		}
		ring.WritePackets(AtoB, [][]byte{numbered(i, 100)})
	}
	if err := ring.Close(); err != nil {
		t.Fatal(err)
	}
	var all []int
	for n := 1; n <= 4; n++ {
		data, err := os.ReadFile(filepath.Join(dir, capspec.RingName("ring.pcap", n)))
		if err != nil {
			t.Fatal(err)
		}
		seq := sequenceOf(t, capspec.FormatPcap, data)
		if want := min(10, 35-10*(n-1)); len(seq) != want {
			t.Fatalf("file %d holds %d records, want %d", n, len(seq), want)
		}
		all = append(all, seq...)
	}
	for i, v := range all {
		if v != i {
			t.Fatalf("record %d is frame %d: files out of order", i, v)
		}
	}
}
