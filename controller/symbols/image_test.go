package symbols

import (
	"bytes"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func TestDecodeSize(t *testing.T) {
	encode := func(f func(*bytes.Buffer) error) string {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	img := image.NewRGBA(image.Rect(0, 0, 31, 17))
	tests := []struct {
		name    string
		content string
		format  string
		w, h    int
		invalid bool
	}{
		{"svg in pixels", `<svg width="66" height="45"/>`, "svg", 66, 45, false},
		{"svg with px unit", `<svg width="66px" height="45px"/>`, "svg", 66, 45, false},
		{"svg in points rounds half to even", `<svg width="10pt" height="2pt"/>`, "svg", 12, 2, false},
		{"svg in inches", `<svg width="1in" height="0.5in"/>`, "svg", 90, 45, false},
		{"svg in mm", `<svg width="10mm" height="10cm"/>`, "svg", 35, 354, false},
		{"svg in picas", `<svg width="2pc" height="1pc"/>`, "svg", 30, 15, false},
		{"svg fractional", `<svg width="65.5" height="58.5"/>`, "svg", 66, 58, false},
		{"svg percent of viewBox", `<svg width="50%" height="100%" viewBox="0 0 80 60"/>`, "svg", 40, 60, false},
		{"svg viewBox only", `<svg viewBox="0,0,70,50"/>`, "svg", 70, 50, false},
		{"svg after declaration and comment", "<?xml version=\"1.0\"?>\n<!-- made by hand -->\n<svg width=\"3\" height=\"4\"/>", "svg", 3, 4, false},
		{"svg with leading blank line", "\n  <svg width=\"3\" height=\"4\"></svg>", "svg", 3, 4, false},
		{"svg percent without viewBox", `<svg width="50%" height="10"/>`, "svg", 0, 0, true},
		{"svg without any size", `<svg/>`, "svg", 0, 0, true},
		{"svg with an unknown unit", `<svg width="3em" height="4"/>`, "svg", 0, 0, true},
		{"svg with a negative size", `<svg width="-3" height="4"/>`, "svg", 0, 0, true},
		{"svg with a bad viewBox", `<svg viewBox="0 0 10"/>`, "svg", 0, 0, true},
		{"png", encode(func(b *bytes.Buffer) error { return png.Encode(b, img) }), "png", 31, 17, false},
		{"jpeg", encode(func(b *bytes.Buffer) error { return jpeg.Encode(b, img, nil) }), "jpeg", 31, 17, false},
		{"gif", encode(func(b *bytes.Buffer) error { return gif.Encode(b, img, nil) }), "gif", 31, 17, false},
		{"truncated png", "\x89PNG\r\n\x1a\n\x00\x00", "png", 0, 0, true},
		{"truncated jpeg", "\xff\xd8\xff\xe0", "jpeg", 0, 0, true},
		{"html", "<html><body>hi</body></html>", "", 0, 0, false},
		{"text", "just words", "", 0, 0, false},
		{"empty", "", "", 0, 0, false},
		{"bmp", "BM\x36\x00\x00\x00", "", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			format, w, h, err := decodeSize(strings.NewReader(tt.content))
			if format != tt.format || w != tt.w || h != tt.h || errors.Is(err, ErrInvalidImage) != tt.invalid {
				t.Errorf("decodeSize = %q %d×%d %v, want %q %d×%d invalid=%v", format, w, h, err, tt.format, tt.w, tt.h, tt.invalid)
			}
			if err != nil && !tt.invalid {
				t.Errorf("unexpected error %v", err)
			}
		})
	}
}

func TestContentTypeComesFromTheExtension(t *testing.T) {
	for name, want := range map[string]string{
		"a.svg": "image/svg+xml", "A.SVG": "image/svg+xml", "a.png": "image/png", "a.jpg": "image/jpeg",
		"a.jpeg": "image/jpeg", "a.gif": "image/gif", "a.html": "application/octet-stream",
		"a": "application/octet-stream", "a.svg.gz": "application/octet-stream",
	} {
		if got := ContentType(name); got != want {
			t.Errorf("ContentType(%q) = %s, want %s", name, got, want)
		}
	}
}
