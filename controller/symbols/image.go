package symbols

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	_ "image/gif" // registers the formats decodeSize reads
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
)

// Formats decodeSize recognises.
const (
	formatSVG  = "svg"
	formatPNG  = "png"
	formatJPEG = "jpeg"
	formatGIF  = "gif"
)

// maxSVGHead bounds how much of an SVG is read to find its root element:
// a prolog (declaration, comments, doctype) longer than this is refused.
const maxSVGHead = 1 << 20

// ContentType returns the media type of a symbol file, from its extension
// as GNS3 does. Only the four image types are named; the
// rest is application/octet-stream, so no upload is ever served as, say,
// HTML.
func ContentType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	}
	return "application/octet-stream"
}

// decodeSize reads an image's header and returns its format and size in
// pixels. Content of no known format gives format "" and 0×0, as GNS3
// measures it; a PNG, JPEG or GIF header that does not decode, or an SVG
// whose size cannot be worked out, is ErrInvalidImage (format still set).
//
// Unlike GNS3, an SVG is recognised by its root element, so a leading
// comment or blank line does not hide it.
func decodeSize(r io.Reader) (format string, width, height int, err error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(8)
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		format = formatPNG
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		format = formatJPEG
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		format = formatGIF
	default:
		return svgSize(br)
	}
	cfg, _, err := image.DecodeConfig(br)
	if err != nil {
		return format, 0, 0, fmt.Errorf("%s header: %w: %v", format, ErrInvalidImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return format, 0, 0, fmt.Errorf("%s of %d×%d: %w", format, cfg.Width, cfg.Height, ErrInvalidImage)
	}
	return format, cfg.Width, cfg.Height, nil
}

// svgSize finds the root element of an XML document and, if it is <svg>,
// works out its size (see svgLength).
func svgSize(r io.Reader) (format string, width, height int, err error) {
	d := xml.NewDecoder(io.LimitReader(r, maxSVGHead))
	d.Strict = false // HTML-ish entities in a doctype must not hide the root
	for {
		tok, err := d.RawToken()
		if err != nil {
			// Not XML, or no element at all: of no known format.
			return "", 0, 0, nil
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if el.Name.Local != "svg" {
			return "", 0, 0, nil
		}
		attr := func(name string) (string, bool) {
			for _, a := range el.Attr {
				if a.Name.Local == name && a.Name.Space == "" {
					return a.Value, true
				}
			}
			return "", false
		}
		var box []float64
		if v, ok := attr("viewBox"); ok {
			box, err = viewBox(v)
			if err != nil {
				return formatSVG, 0, 0, err
			}
		}
		w, err := svgLength(attr, "width", box, 2)
		if err != nil {
			return formatSVG, 0, 0, err
		}
		h, err := svgLength(attr, "height", box, 3)
		if err != nil {
			return formatSVG, 0, 0, err
		}
		return formatSVG, w, h, nil
	}
}

// units converts SVG length units to pixels, at GNS3's 90 dpi.
var units = map[string]float64{"px": 1, "pt": 1.25, "pc": 15, "mm": 3.543307, "cm": 35.43307, "in": 90}

// svgLength is the root's width or height in whole pixels (halves round
// to even, as GNS3 rounds): a number with an optional unit, or a
// percentage of the viewBox's matching dimension (box[i]). A missing
// attribute is 100%, so a bare viewBox gives the size.
func svgLength(attr func(string) (string, bool), name string, box []float64, i int) (int, error) {
	v, ok := attr(name)
	v = strings.TrimSpace(v)
	if !ok || v == "auto" {
		v = "100%"
	}
	factor := 1.0
	if p, found := strings.CutSuffix(v, "%"); found {
		if box == nil {
			return 0, fmt.Errorf("svg %s %q without a viewBox: %w", name, v, ErrInvalidImage)
		}
		v, factor = p, box[i]/100
	} else if len(v) > 2 {
		if f, ok := units[strings.ToLower(v[len(v)-2:])]; ok {
			v, factor = v[:len(v)-2], f
		}
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return 0, fmt.Errorf("svg %s %q: %w", name, v, ErrInvalidImage)
	}
	px := math.RoundToEven(x * factor)
	if px > math.MaxInt32 {
		return 0, fmt.Errorf("svg %s %q: %w", name, v, ErrInvalidImage)
	}
	return int(px), nil
}

// viewBox parses "min-x min-y width height", numbers separated by spaces
// and/or commas.
func viewBox(v string) ([]float64, error) {
	fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if len(fields) != 4 {
		return nil, fmt.Errorf("svg viewBox %q: %w", v, ErrInvalidImage)
	}
	box := make([]float64, 4)
	for i, f := range fields {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("svg viewBox %q: %w", v, ErrInvalidImage)
		}
		box[i] = x
	}
	if box[2] < 0 || box[3] < 0 {
		return nil, fmt.Errorf("svg viewBox %q: %w", v, ErrInvalidImage)
	}
	return box, nil
}
