package node

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzConsoleInput types hostile bytes at a VPCS console, split anywhere
// between reads: the telnet filter reads the same whatever the split, no
// '!' (a host command to VPCS) and no telnet command byte gets through,
// and every line VPCS would run, replayed by a model of its line editor,
// is one the guard allows (load and save by a plain name, rlogin never to
// a denied port).
func FuzzConsoleInput(f *testing.F) {
	f.Add([]byte("ip 10.0.0.1/24\r\n"), uint16(3))
	f.Add([]byte("! id\r\nsave ../../x\rload /etc/passwd\r"), uint16(10))
	f.Add([]byte{'s', 'a', 0xff, 0xfb, 0x01, 'v', 'e', ' ', '/', 'x', '\r', 0xff, 0xff}, uint16(4))
	f.Add([]byte("sav\x7f\x7fave a/b\x03save ok\rrlogin 127.0.0.1 3080\r"), uint16(7))
	f.Add([]byte{0xff, 0xfa, 31, 0, 80, 0, 24, 0xff, 0xf0, 'l', 'o', '\r'}, uint16(5))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		var whole telnetFilter
		out := whole.filter(in)
		k := min(int(split), len(in))
		var parts telnetFilter
		split2 := append(parts.filter(in[:k]), parts.filter(in[k:])...)
		if !bytes.Equal(out, split2) {
			t.Fatalf("split at %d reads %q, whole %q", k, split2, out)
		}
		for _, b := range out {
			if b == '!' || b == iac {
				t.Fatalf("%#x passed the telnet filter: %q", b, out)
			}
		}
		g := &lineGuard{dir: dir, denied: []int{3080}}
		passed, _ := g.feed(out)
		// VPCS's line editor: printable bytes append, BS and DEL erase,
		// Ctrl-C drops the line, CR runs it.
		var line []byte
		for _, b := range passed {
			switch {
			case b >= 0x20 && b < 0x7f:
				line = append(line, b)
			case b == 0x08 || b == 0x7f:
				if len(line) > 0 {
					line = line[:len(line)-1]
				}
			case b == 0x03:
				line = line[:0]
			case b == '\r':
				ran(t, string(line))
				line = line[:0]
			default:
				t.Fatalf("byte %#x reached VPCS", b)
			}
		}
	})
}

// ran fails t if VPCS would run line against what the guard promises.
func ran(t *testing.T, line string) {
	w := strings.Fields(line)
	if len(w) == 0 {
		return
	}
	if (is(w[0], "load") || is(w[0], "save")) && len(w) > 1 && !plainFile.MatchString(w[1]) {
		t.Fatalf("VPCS ran %q", line)
	}
	if is(w[0], "rlogin") && w[len(w)-1] == "3080" {
		t.Fatalf("VPCS ran %q", line)
	}
}
