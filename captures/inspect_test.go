package captures

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/labtap/labtap/capspec"
)

// TestScannerTellsRecordsTimesAndDropsOfAFileAsItGrows writes real capture
// files with File, in both formats, and checks what a Scanner reads of
// them: once while the file is being written (its records so far) and
// again once closed, going on from where it stopped.
func TestScannerTellsRecordsTimesAndDropsOfAFileAsItGrows(t *testing.T) {
	for _, format := range capspec.Formats() {
		t.Run(format, func(t *testing.T) {
			root, err := os.OpenRoot(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
			name := "x" + capspec.Ext(format)
			c, err := Create(root, name, Options{Format: format, Now: fixedClock(t0)})
			if err != nil {
				t.Fatal(err)
			}
			// The clock ticked once for the file's start: records from t0+2µs.
			frame := make([]byte, 100)
			for range 10 {
				c.WritePacket(AtoB, frame)
			}
			waitFor(t, func() bool { n, _, _ := c.Stats(); return n == 10 })
			f, err := root.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var s Scanner
			_, size, _ := c.Stats()
			info, err := s.Scan(f, size)
			if err != nil {
				t.Fatal(err)
			}
			if info.Records != 10 || info.Format != format || info.Whole != size {
				t.Fatalf("while written: %+v (size %d), want 10 %s records", info, size, format)
			}
			if want := t0.Add(2 * time.Microsecond); !info.First.Equal(want) {
				t.Errorf("first record at %v, want %v", info.First, want)
			}
			for range 5 {
				c.WritePacket(BtoA, frame)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			info, err = s.Scan(f, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			if info.Records != 15 || info.Whole != st.Size() {
				t.Fatalf("closed: %+v, want 15 records and %d bytes", info, st.Size())
			}
			if want := t0.Add(16 * time.Microsecond); !info.Last.Equal(want) {
				t.Errorf("last record at %v, want %v", info.Last, want)
			}
		})
	}
}

// TestScannerReadsThePcapngDropCount: a pcapng file says in its interface
// statistics how many frames it could not hold; the list shows it.
func TestScannerReadsThePcapngDropCount(t *testing.T) {
	var b []byte
	e, err := newEncoder(Options{Format: capspec.FormatPcapng, Snaplen: DefaultSnaplen})
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, e.header...)
	b = e.appendRecord(b, AtoB, time.Unix(100, 5), []byte{1, 2, 3})
	b, err = e.appendStats(b, time.Unix(99, 0), time.Unix(101, 0), [2]uint64{1, 0}, [2]uint64{7, 3})
	if err != nil {
		t.Fatal(err)
	}
	var s Scanner
	info, err := s.Scan(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Records != 1 || info.Dropped != 10 || !info.First.Equal(time.Unix(100, 5)) {
		t.Fatalf("got %+v, want 1 record at 100.000000005 and 10 dropped", info)
	}
}

// TestScannerRefusesWhatIsNoCapture: a file that is no capture is an
// error, and one cut inside its header is nothing yet.
func TestScannerRefusesWhatIsNoCapture(t *testing.T) {
	var s Scanner
	if _, err := s.Scan(bytes.NewReader([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), 27); err == nil {
		t.Error("an HTTP request read as a capture")
	}
	var s2 Scanner
	info, err := s2.Scan(bytes.NewReader([]byte{0xd4, 0xc3, 0xb2, 0xa1}), 4)
	if err != nil || info.Records != 0 || info.Whole != 0 {
		t.Errorf("a header cut short: %+v, %v; want nothing and no error", info, err)
	}
}
