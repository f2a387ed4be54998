package symbols

import (
	"bytes"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
)

var pngDir = flag.String("pngs", "", "keep the built-in symbols rasterised by TestEveryBuiltinRendersCleanly in this directory, to look at them")

// TestEveryBuiltinRendersCleanly rasterises every built-in symbol with
// librsvg, as a browser or Qt would draw it, and checks the picture: the
// declared size, a drawing that fills a good part of it, and for Affinity
// icons a white glyph on the badge. It cannot judge looks; run it with
// -pngs DIR and look at the PNGs when the icons change.
func TestEveryBuiltinRendersCleanly(t *testing.T) {
	testenv.Long(t, "renders every built-in icon with rsvg-convert, one process each")
	testenv.RequireTools(t, "rsvg-convert")
	lib := New("", nil)
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		data := readSymbol(t, lib, s.ID)
		cmd := exec.Command("rsvg-convert", "--format", "png")
		cmd.Stdin = bytes.NewReader(data)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("%s: rsvg-convert: %v %s", s.ID, err, stderr.String())
			continue
		}
		if *pngDir != "" {
			name := filepath.Join(*pngDir, strings.ReplaceAll(strings.TrimPrefix(s.ID, BuiltinPrefix), "/", "_")+".png")
			if err := os.WriteFile(name, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		img, err := png.Decode(bytes.NewReader(out))
		if err != nil {
			t.Errorf("%s: %v", s.ID, err)
			continue
		}
		w, h, _ := lib.Dimensions(s.ID)
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("%s renders at %v, declares %d×%d", s.ID, b.Size(), w, h)
		}
		drawn, white := coverage(img)
		if drawn < 0.3 {
			t.Errorf("%s: only %.0f%% of the icon is drawn", s.ID, drawn*100)
		}
		if strings.Contains(s.ID, "/affinity/") && (white < 0.02 || white > 0.5) {
			t.Errorf("%s: the white glyph covers %.0f%% of the badge", s.ID, white*100)
		}
	}
}

// coverage returns the share of pixels that are drawn (mostly opaque) and
// of those that are white.
func coverage(img image.Image) (drawn, white float64) {
	b := img.Bounds()
	var n, d, wh int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			n++
			r, g, bl, a := img.At(x, y).RGBA()
			if a < 0x8000 {
				continue
			}
			d++
			if r > 0xe000 && g > 0xe000 && bl > 0xe000 {
				wh++
			}
		}
	}
	return float64(d) / float64(n), float64(wh) / float64(n)
}
