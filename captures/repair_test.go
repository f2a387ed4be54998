package captures

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
)

// writeCapture makes a capture of n frames and returns its bytes.
func writeCapture(t testing.TB, format string, n int) []byte {
	t.Helper()
	root, dir := openRoot(t)
	c, err := Create(root, "x.pcap", Options{Format: format, Interfaces: [2]string{"A", "B"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c.WritePacket(Direction(i%2), bytes.Repeat([]byte{byte(i)}, 60+i))
	}
	c.Close()
	data, err := os.ReadFile(filepath.Join(dir, "x.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRepairCutsAFileBackToItsLastWholeRecord(t *testing.T) {
	for _, format := range []string{"pcap", "pcapng"} {
		t.Run(format, func(t *testing.T) {
			whole := writeCapture(t, format, 20)
			for _, cut := range []int{1, 7, 15, 40} { // within a record, within a header
				root, dir := openRoot(t)
				torn := whole[:len(whole)-cut]
				os.WriteFile(filepath.Join(dir, "c.pcap"), torn, 0o644)
				n, err := Repair(root, "c.pcap")
				if err != nil {
					t.Fatal(err)
				}
				data, _ := os.ReadFile(filepath.Join(dir, "c.pcap"))
				if int64(len(torn))-n != int64(len(data)) || n == 0 {
					t.Fatalf("cut %d: Repair cut %d, file %d bytes", cut, n, len(data))
				}
				// Every whole record stays. Each cut is within the last block:
				// the last frame's record in a pcap file, the last statistics
				// block in a pcapng one (its frames all stay).
				want := 19
				if format == "pcapng" {
					want = 20
				}
				if got := countRecords(t, format, data); got != want {
					t.Fatalf("cut %d: %d records after repair", cut, got)
				}
			}
			// A whole file is left alone.
			root, dir := openRoot(t)
			os.WriteFile(filepath.Join(dir, "w.pcap"), whole, 0o644)
			if n, err := Repair(root, "w.pcap"); err != nil || n != 0 {
				t.Fatalf("whole file: cut %d, %v", n, err)
			}
		})
	}
}

func countRecords(t testing.TB, format string, data []byte) int {
	t.Helper()
	read := readerOf(t, format, data)
	for n := 0; ; n++ {
		if _, _, err := read(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after %d records: %v", n, err)
			}
			return n
		}
	}
}

// readerOf returns the record reader of a capture in format (pcapgo's);
// ngOpts, if given, configure a pcapng one.
func readerOf(t testing.TB, format string, data []byte, ngOpts ...pcapgo.NgReaderOptions) func() ([]byte, gopacket.CaptureInfo, error) {
	t.Helper()
	if format == capspec.FormatPcapng {
		opts := pcapgo.DefaultNgReaderOptions
		if len(ngOpts) > 0 {
			opts = ngOpts[0]
		}
		r, err := pcapgo.NewNgReader(bytes.NewReader(data), opts)
		if err != nil {
			t.Fatal(err)
		}
		return r.ReadPacketData
	}
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r.ReadPacketData
}

func TestRepairCutsAFileBackBeforeABlockThatNeverReachedTheDisk(t *testing.T) {
	// Block writes may complete in any order; a writer killed between two
	// of them leaves a hole of zeros with records after it.
	for _, format := range []string{capspec.FormatPcap, capspec.FormatPcapng} {
		t.Run(format, func(t *testing.T) {
			root, dir := openRoot(t)
			c, err := Create(root, "x", Options{Format: format})
			if err != nil {
				t.Fatal(err)
			}
			lab(c, 5, 6000, false) // about 3 blocks
			c.Close()
			path := filepath.Join(dir, "x")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) < 2*blockSize+1 {
				t.Fatalf("only %d bytes written", len(data))
			}
			clear(data[blockSize : 2*blockSize]) // block 1 never written
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Repair(root, "x"); err != nil {
				t.Fatal(err)
			}
			repaired, _ := os.ReadFile(path)
			if len(repaired) > blockSize || len(repaired) < blockSize-10000 {
				t.Fatalf("repaired to %d bytes, want the records that end before byte %d", len(repaired), blockSize)
			}
			n := countRecords(t, format, repaired)
			checkSequence(t, repaired, format, n)
		})
	}
}
