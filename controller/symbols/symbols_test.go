package symbols

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func svgOf(w, h int) []byte {
	return fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d"><rect width="%d" height="%d"/></svg>`, w, h, w, h)
}

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// newLib returns a library whose user directory is <tmp>/data/symbols,
// not created yet, and the data directory around it.
func newLib(t *testing.T) (*Library, string) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return New(filepath.Join(data, "symbols"), nil), data
}

// tree lists every path under dir, relative, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

func TestListIsSortedByThemeThenIDAndNamesThemesAsGNS3(t *testing.T) {
	lib, data := newLib(t)
	dir := filepath.Join(data, "symbols")
	for _, p := range []string{"b.svg", "a.png", "sub/dir/x.svg", ".hidden.svg", ".cache/y.svg"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), svgOf(10, 10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(list, func(a, b Symbol) int {
		return strings.Compare(a.Theme+"\x00"+a.ID, b.Theme+"\x00"+b.ID)
	}) {
		t.Error("list is not sorted by theme, then id")
	}
	var themes []string
	for _, s := range list {
		if len(themes) == 0 || themes[len(themes)-1] != s.Theme {
			themes = append(themes, s.Theme)
		}
		if s.Builtin != strings.HasPrefix(s.ID, BuiltinPrefix) {
			t.Errorf("%s: builtin %v", s.ID, s.Builtin)
		}
		if !strings.HasSuffix(s.ID, "/"+s.Filename) && s.ID != s.Filename {
			t.Errorf("%s: filename %s", s.ID, s.Filename)
		}
	}
	want := []string{"Affinity-circle-blue", "Affinity-circle-gray", "Affinity-circle-green", "Affinity-circle-red",
		"Affinity-square-blue", "Affinity-square-gray", "Affinity-square-green", "Affinity-square-red",
		"Classic", "Custom symbols"}
	if !slices.Equal(themes, want) {
		t.Errorf("themes %v, want %v", themes, want)
	}
	var custom []string
	for _, s := range list {
		if s.Theme == CustomTheme {
			custom = append(custom, s.ID+"|"+s.Filename)
		}
	}
	if want := []string{"a.png|a.png", "b.svg|b.svg", "sub/dir/x.svg|x.svg"}; !slices.Equal(custom, want) {
		t.Errorf("custom symbols %v, want %v (hidden ones skipped)", custom, want)
	}
}

func TestListWithoutAUserDirectoryHasTheBuiltinsOnly(t *testing.T) {
	lib, _ := newLib(t) // symbols/ does not exist yet
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(lib.builtin) {
		t.Errorf("%d symbols, want the %d built-in ones", len(list), len(lib.builtin))
	}
}

func TestOpenFollowsTheFallbackChain(t *testing.T) {
	lib, data := newLib(t)
	if err := lib.Save("mine.svg", bytes.NewReader(svgOf(40, 30))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "router.svg"), svgOf(1, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link inside the folder that leads out of it.
	if err := os.Symlink(filepath.Join(data, "router.svg"), filepath.Join(data, "symbols", "link.svg")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, want string
	}{
		{"built-in id", ":/symbols/affinity/square/red/router.svg", ":/symbols/affinity/square/red/router.svg"},
		{"uploaded id", "mine.svg", "mine.svg"},
		{"GNS3 short id by base name", ":/symbols/router.svg", ":/symbols/classic/router.svg"},
		{"unknown file by base name", "somewhere/else/firewall.svg", ":/symbols/classic/firewall.svg"},
		{"unknown id", "404.png", ":/symbols/classic/computer.svg"},
		{"empty id", "", ":/symbols/classic/computer.svg"},
		{"parent directory", "../router.svg", ":/symbols/classic/router.svg"},
		{"absolute path", filepath.Join(data, "router.svg"), ":/symbols/classic/router.svg"},
		{"backslashes", `..\router.svg`, ":/symbols/classic/router.svg"},
		{"hidden file", ".upload-x", ":/symbols/classic/computer.svg"},
		{"symbolic link out of the folder", "link.svg", ":/symbols/classic/computer.svg"},
		{"built-in root escaping", ":/symbols/../builtin/classic/router.svg", ":/symbols/classic/router.svg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := lib.Open(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.ID != tt.want {
				t.Errorf("Open(%q) served %s, want %s", tt.id, f.ID, tt.want)
			}
			data, _ := io.ReadAll(f)
			if bytes.Equal(data, svgOf(1, 1)) {
				t.Errorf("Open(%q) served a file outside the symbols folder", tt.id)
			}
		})
	}
}

// Whatever the id, an upload lands in the symbols folder under the id's
// base name, as GNS3 stores it.
func TestSaveKeepsOnlyTheBaseNameInsideTheFolder(t *testing.T) {
	tests := []struct{ name, id, stored string }{
		{"plain", "x.svg", "x.svg"},
		{"sub directories", "a/b/x.svg", "x.svg"},
		{"parent directories", "../../x.svg", "x.svg"},
		{"absolute path", "/tmp/x.svg", "x.svg"},
		{"backslashes", `..\..\x.svg`, "x.svg"},
		{"windows path", `C:\Users\me\x.svg`, "x.svg"},
		{"built-in id", ":/symbols/classic/router.svg", "router.svg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib, data := newLib(t)
			if err := lib.Save(tt.id, bytes.NewReader(svgOf(5, 5))); err != nil {
				t.Fatal(err)
			}
			if got, want := tree(t, data), []string{"symbols", "symbols/" + tt.stored}; !slices.Equal(got, want) {
				t.Errorf("data dir holds %v, want %v", got, want)
			}
		})
	}
}

// failingReader gives some bytes, then fails: a client that went away.
type failingReader struct{ r io.Reader }

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func TestRefusedOrFailedUploadsLeaveNothing(t *testing.T) {
	big := append(pngOf(t, 2, 2), make([]byte, MaxSize)...)
	tests := []struct {
		name string
		id   string
		body io.Reader
		want error
	}{
		{"over the size limit", "big.png", bytes.NewReader(big), ErrTooLarge},
		{"interrupted", "cut.svg", &failingReader{bytes.NewReader(svgOf(5, 5))}, io.ErrUnexpectedEOF},
		{"not an image", "page.svg", strings.NewReader("<html><script>alert(1)</script></html>"), ErrNotImage},
		{"empty", "empty.svg", strings.NewReader(""), ErrNotImage},
		{"broken png", "broken.png", bytes.NewReader(pngOf(t, 3, 3)[:12]), ErrNotImage},
		{"dot dot", "..", strings.NewReader(string(svgOf(5, 5))), ErrInvalidName},
		{"dot", "a/.", strings.NewReader(string(svgOf(5, 5))), ErrInvalidName},
		{"empty name", "a/", strings.NewReader(string(svgOf(5, 5))), ErrInvalidName},
		{"hidden name", ".x.svg", strings.NewReader(string(svgOf(5, 5))), ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib, data := newLib(t)
			err := lib.Save(tt.id, tt.body)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Save = %v, want %v", err, tt.want)
			}
			for _, p := range tree(t, data) {
				if p != "symbols" {
					t.Errorf("left %s behind", p)
				}
			}
		})
	}
}

func TestSaveReplacesAFileAndItsCachedSize(t *testing.T) {
	lib, _ := newLib(t)
	// An id unknown until the upload measures as the fallback first.
	if w, h := lib.Size("x.svg"); w != 65 || h != 59 {
		t.Fatalf("unknown symbol measures %d×%d", w, h)
	}
	for _, size := range [][2]int{{20, 30}, {40, 50}} {
		if err := lib.Save("x.svg", bytes.NewReader(svgOf(size[0], size[1]))); err != nil {
			t.Fatal(err)
		}
		w, h, err := lib.Dimensions("x.svg")
		if err != nil || w != size[0] || h != size[1] {
			t.Errorf("after uploading %v: %d×%d, %v", size, w, h, err)
		}
	}
	if err := lib.Save("x.svg", bytes.NewReader(pngOf(t, 7, 9))); err != nil {
		t.Fatal(err)
	}
	if w, h := lib.Size("x.svg"); w != 7 || h != 9 {
		t.Errorf("after uploading a PNG: %d×%d", w, h)
	}
}

func TestSaveWithoutADirectoryIsRefused(t *testing.T) {
	if err := New("", nil).Save("x.svg", bytes.NewReader(svgOf(5, 5))); !errors.Is(err, ErrNoDirectory) {
		t.Errorf("Save = %v, want ErrNoDirectory", err)
	}
}

func TestSizeOfAnUnmeasurableSymbolIsTheDefault(t *testing.T) {
	lib, data := newLib(t)
	if err := lib.Save("nosize.svg", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"/>`)); err != nil {
		t.Fatal(err) // an SVG without a size is still a picture
	}
	if _, _, err := lib.Dimensions("nosize.svg"); !errors.Is(err, ErrInvalidImage) {
		t.Errorf("Dimensions = %v, want ErrInvalidImage", err)
	}
	if w, h := lib.Size("nosize.svg"); w != DefaultWidth || h != DefaultHeight {
		t.Errorf("Size = %d×%d", w, h)
	}
	if err := os.WriteFile(filepath.Join(data, "symbols", "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, h, err := lib.Dimensions("notes.txt"); w != 0 || h != 0 || err != nil {
		t.Errorf("a file of no image format measures %d×%d, %v; GNS3 says 0×0", w, h, err)
	}
	if w, h := lib.Size("notes.txt"); w != DefaultWidth || h != DefaultHeight {
		t.Errorf("Size = %d×%d", w, h)
	}
}

// Run with -race: uploads, reads and listings at once.
func TestLibraryIsSafeForConcurrentUse(t *testing.T) {
	lib, _ := newLib(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 5 {
				if err := lib.Save("same.svg", bytes.NewReader(svgOf(10+i, 10+j))); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			for range 5 {
				w, _, err := lib.Dimensions("same.svg")
				if err != nil || w == 0 {
					t.Errorf("Dimensions: %d, %v", w, err)
				}
				if _, err := lib.List(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// GNS3 answers an id that names no symbol with the classic computer, not
// 404: the GUI draws every node from its symbol and a node whose symbol
// fails to load is drawn as nothing. So the library keeps the fallback,
// but says so: a warning naming the id asked for and the one served,
// while GNS3's own short ids (":/symbols/computer.svg", every node's
// default), which resolve by base name by design, stay quiet.
func TestUnknownIDServesTheComputerForGNS3ClientsAndIsLoggedAsAWarning(t *testing.T) {
	var logged bytes.Buffer
	lib := New("", slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	f, err := lib.Open("no/such/symbol.png")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f.ID != fallbackID {
		t.Errorf("an unknown id served %s, want %s", f.ID, fallbackID)
	}
	if out := logged.String(); !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "no/such/symbol.png") || !strings.Contains(out, fallbackID) {
		t.Errorf("no warning names the unknown id and what was served: %q", out)
	}
	logged.Reset()
	f, err = lib.Open(BuiltinPrefix + "computer.svg")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if logged.Len() != 0 {
		t.Errorf("the node default, a GNS3 short id, was warned about: %q", logged.String())
	}
}
