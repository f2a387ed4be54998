package captures

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/labtap/labtap/capspec"
)

// FuzzRepair repairs hostile capture files: Repair never panics, only
// ever cuts (what stays is a prefix of what was there), and a repaired
// file needs no second repair.
func FuzzRepair(f *testing.F) {
	f.Add(writeCapture(f, capspec.FormatPcap, 5))
	f.Add(writeCapture(f, capspec.FormatPcapng, 5))
	f.Add([]byte{0xd4, 0xc3, 0xb2, 0xa1})
	f.Add(append(writeCapture(f, capspec.FormatPcap, 2), make([]byte, 40)...))
	root, dir := openRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.pcap")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Repair(root, "f.pcap"); err != nil {
			return
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("repair changed bytes it kept: %x -> %x", data, got)
		}
		if cut, err := Repair(root, "f.pcap"); err != nil || cut != 0 {
			t.Fatalf("a repaired file repaired again: cut %d, %v", cut, err)
		}
	})
}

// FuzzRepairCut cuts a well-made capture anywhere, as a crash does:
// after Repair, a reader reads every record left to the end, and none
// was lost that was whole before the cut.
func FuzzRepairCut(f *testing.F) {
	f.Add(false, uint8(10), uint16(200))
	f.Add(true, uint8(10), uint16(333))
	f.Add(true, uint8(1), uint16(30))
	whole := map[bool][]byte{
		false: writeCapture(f, capspec.FormatPcap, 40),
		true:  writeCapture(f, capspec.FormatPcapng, 40),
	}
	root, dir := openRoot(f)
	f.Fuzz(func(t *testing.T, ng bool, _ uint8, cut uint16) {
		format := capspec.FormatPcap
		if ng {
			format = capspec.FormatPcapng
		}
		data := whole[ng]
		c := min(int(cut), len(data))
		path := filepath.Join(dir, "c.pcap")
		if err := os.WriteFile(path, data[:c], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Repair(root, "c.pcap"); err != nil {
			return // no whole header: nothing to keep
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := wholeBefore(format, data, c)
		if want == 0 {
			return // a header alone: gopacket's pcapng reader wants an interface block
		}
		// Every record wholly before the cut is kept, and read to the end.
		if n := countRecords(t, format, got); n != want {
			t.Fatalf("%s cut at %d: %d records after repair, %d were whole", format, c, n, want)
		}
	})
}

// wholeBefore counts the records of data (made by writeCapture, so
// little-endian) that end at or before offset c, walking the format's
// framing directly.
func wholeBefore(format string, data []byte, c int) int {
	le := binary.LittleEndian
	n := 0
	if format == capspec.FormatPcap {
		for off := 24; off+16 <= len(data); {
			end := off + 16 + int(le.Uint32(data[off+8:]))
			if end <= c {
				n++
			}
			off = end
		}
		return n
	}
	for off := 0; off+8 <= len(data); {
		end := off + int(le.Uint32(data[off+4:]))
		if le.Uint32(data[off:]) == 6 && end <= c { // an enhanced packet block
			n++
		}
		off = end
	}
	return n
}

// A pcapng file whose first block after its header never reached the disk
// (zeros) keeps its section header and interface blocks: it was cut back
// to nothing, a file no reader opens, when the hole began in the first
// block. Found by FuzzRepair.
func TestRepairKeepsAPcapngHeaderBeforeAHole(t *testing.T) {
	data := writeCapture(t, capspec.FormatPcapng, 3)
	head := wholeHeader(data)
	root, dir := openRoot(t)
	path := filepath.Join(dir, "h.pcapng")
	torn := append(append([]byte{}, data[:head]...), make([]byte, 200)...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(root, "h.pcapng"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data[:head]) {
		t.Fatalf("repaired to %d bytes, want the %d of the header blocks", len(got), head)
	}
	if n := countRecords(t, capspec.FormatPcapng, got); n != 0 {
		t.Fatalf("%d records", n)
	}
	// Garbage that is no capture at all is refused, not cut to nothing.
	if err := os.WriteFile(path, []byte("\n\r\r\n000000000000000000000000"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(root, "h.pcapng"); err == nil {
		t.Fatal("a file with no whole section header was repaired")
	}
	if got, _ := os.ReadFile(path); len(got) == 0 {
		t.Fatal("a file that is no capture was cut to nothing")
	}
}

// wholeHeader is the length of a little-endian pcapng file's leading
// section header and interface blocks.
func wholeHeader(data []byte) int {
	off := 0
	for off+8 <= len(data) {
		if t := binary.LittleEndian.Uint32(data[off:]); t != 0x0a0d0d0a && t != 1 {
			break
		}
		off += int(binary.LittleEndian.Uint32(data[off+4:]))
	}
	return off
}
