package project

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxSVG bounds a drawing's SVG text (GNS3 has no bound: a pasted photo
// became a multi-megabyte string in every drawing.created).
const MaxSVG = 4 << 20

// errNotSVG is the cause of a refused drawing.
var errNotSVG = errors.New("the root element is not <svg>")

// sanitizeSVG checks that text is one well-formed SVG document and keeps
// only what cannot run code or fetch something when a client renders it
// (the web UI puts other users' drawings in its page). It is an
// allowlist: elements (with what they hold) and attributes that are not
// drawing vocabulary are dropped, so <script>, <foreignObject>, event
// handler attributes (on*) and whatever a browser adds next never pass.
// What is kept is checked again for references that leave the document
// (href, xlink:href or src other than "#..." and inline raster pictures;
// url(...) other than url(#...)). Doctypes, processing instructions and
// comments are dropped too. A document with nothing to drop is returned as
// it was, byte for byte, so GNS3's own drawings keep their text.
func sanitizeSVG(text string) (string, error) {
	if len(text) > MaxSVG {
		return "", &Error{Kind: ErrTooLarge, Msg: fmt.Sprintf("The drawing's SVG is over %d bytes", MaxSVG)}
	}
	d := xml.NewDecoder(strings.NewReader(text))
	d.Strict = true
	var out bytes.Buffer
	var stack []xml.Name
	skip := 0 // depth inside a dropped element
	// A CDATA section goes out as escaped text: an HTML parser (a page's
	// innerHTML) reads "<![CDATA[" outside <svg> as a comment that ends at
	// the first ">", and what follows as HTML.
	dropped, root := strings.Contains(text, "<![CDATA["), false
	// A style sheet is checked whole: comments or CDATA could split
	// "@import" across tokens.
	var sheet *bytes.Buffer
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", invalidSVG(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 {
				if root {
					return "", invalidSVG(errors.New("more than one root element"))
				}
				if t.Name.Local != "svg" {
					return "", invalidSVG(errNotSVG)
				}
				root = true
			}
			stack = append(stack, t.Name)
			if skip > 0 || sheet != nil || unsafeElement(t.Name) || animatesUnsafe(t) {
				skip++
				dropped = true
				continue
			}
			out.WriteByte('<')
			writeName(&out, t.Name)
			for _, a := range t.Attr {
				if unsafeAttr(a) {
					dropped = true
					continue
				}
				out.WriteByte(' ')
				writeName(&out, a.Name)
				out.WriteString(`="`)
				xml.EscapeText(&out, []byte(a.Value))
				out.WriteByte('"')
			}
			out.WriteByte('>')
			if strings.EqualFold(t.Name.Local, "style") {
				sheet = new(bytes.Buffer)
			}
		case xml.EndElement:
			if len(stack) == 0 || stack[len(stack)-1] != t.Name {
				return "", invalidSVG(fmt.Errorf("unexpected end element </%s>", t.Name.Local))
			}
			stack = stack[:len(stack)-1]
			if skip > 0 {
				skip--
				continue
			}
			if sheet != nil {
				if unsafeCSS(sheet.String()) {
					dropped = true // a style sheet that fetches or runs something
				} else {
					xml.EscapeText(&out, sheet.Bytes())
				}
				sheet = nil
			}
			out.WriteString("</")
			writeName(&out, t.Name)
			out.WriteByte('>')
		case xml.CharData:
			if len(stack) == 0 {
				if len(bytes.TrimSpace(t)) > 0 {
					return "", invalidSVG(errors.New("text outside the root element"))
				}
				continue
			}
			if skip > 0 {
				continue
			}
			if sheet != nil {
				sheet.Write(t)
				continue
			}
			xml.EscapeText(&out, t)
		case xml.ProcInst:
			// The XML declaration is not written out; one with a ">" in it
			// would end early for an HTML parser, which reads the rest as HTML.
			if t.Target != "xml" || bytes.ContainsAny(t.Inst, "<>") {
				dropped = true
			}
		case xml.Directive, xml.Comment:
			dropped = true
		}
	}
	if !root {
		return "", invalidSVG(errNotSVG)
	}
	if len(stack) > 0 {
		return "", invalidSVG(fmt.Errorf("element <%s> is not closed", stack[len(stack)-1].Local))
	}
	if !dropped {
		return text, nil
	}
	return out.String(), nil
}

func invalidSVG(err error) error {
	return &Error{Kind: ErrInvalid, Msg: "Invalid SVG: " + err.Error(), Err: err}
}

func writeName(b *bytes.Buffer, n xml.Name) {
	if n.Space != "" {
		b.WriteString(n.Space)
		b.WriteByte(':')
	}
	b.WriteString(n.Local)
}

// unsafeElement reports an element that is not on the allowlist: one in
// another namespace than SVG's (an editor's metadata, XHTML), or one SVG
// does not draw with.
func unsafeElement(n xml.Name) bool {
	if n.Space != "" && n.Space != "svg" {
		return true
	}
	_, ok := svgElements[strings.ToLower(n.Local)]
	return !ok
}

// animatesUnsafe reports an animation that sets a link's target, a source
// or an event handler: it gives a value unsafeAttr would have dropped.
func animatesUnsafe(e xml.StartElement) bool {
	switch strings.ToLower(e.Name.Local) {
	case "set", "animate", "animatecolor", "animatemotion", "animatetransform", "discard":
	default:
		return false
	}
	for _, a := range e.Attr {
		if strings.ToLower(a.Name.Local) != "attributename" {
			continue
		}
		target := strings.ToLower(strings.TrimSpace(a.Value))
		if i := strings.LastIndexByte(target, ':'); i >= 0 {
			target = target[i+1:]
		}
		if target == "href" || target == "src" || strings.HasPrefix(target, "on") {
			return true
		}
	}
	return false
}

func unsafeAttr(a xml.Attr) bool {
	name := strings.ToLower(a.Name.Local)
	value := strings.ToLower(strings.Join(strings.Fields(a.Value), ""))
	switch space := strings.ToLower(a.Name.Space); {
	case space == "xmlns" || space == "" && name == "xmlns":
		return false // a namespace declaration: the document's own names
	case space == "xlink" && name == "href", space == "xml" && (name == "space" || name == "lang"):
	case space != "":
		return true // an editor's own attributes (inkscape:, sodipodi:, ...)
	default:
		if _, ok := svgAttributes[name]; !ok {
			return true
		}
	}
	switch name {
	case "href", "src":
		return !strings.HasPrefix(value, "#") && !inlinePicture(value)
	}
	return unsafeCSS(value)
}

// unsafeCSS reports a value or style sheet that refers to anything but a
// fragment of this document (url(...) in style, fill, filter, ...), or
// runs script.
func unsafeCSS(v string) bool {
	v = strings.ToLower(strings.Join(strings.Fields(cssUnescape(v)), ""))
	for rest := v; ; {
		i := strings.Index(rest, "url(")
		if i < 0 {
			break
		}
		rest = strings.TrimLeft(rest[i+4:], `'"`)
		if !strings.HasPrefix(rest, "#") {
			return true
		}
	}
	return strings.Contains(v, "javascript:") || strings.Contains(v, "@import") || strings.Contains(v, "expression(") ||
		strings.Contains(v, "image-set(") // fetches its quoted URLs, no url( needed
}

// cssUnescape decodes CSS escapes ("\72" or "\r" for "r"), with which
// "u\72l(" is url( to a browser and not to a search for "url(".
func cssUnescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		j := i + 1
		for j < len(v) && j < i+7 && isHex(v[j]) {
			j++
		}
		if j == i+1 { // "\x" is x; "\" and a newline is nothing
			if v[j] != '\n' {
				b.WriteByte(v[j])
			}
			i = j
			continue
		}
		r, _ := strconv.ParseUint(v[i+1:j], 16, 32)
		b.WriteRune(rune(r))
		if j < len(v) && (v[j] == ' ' || v[j] == '\t' || v[j] == '\n') {
			j++ // the space that ends a hex escape
		}
		i = j - 1
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// inlinePicture reports a data: URL of a raster picture (GNS3's "Insert
// picture" embeds one); SVG data could carry scripts of its own.
func inlinePicture(v string) bool {
	for _, t := range []string{"png", "jpeg", "jpg", "gif", "webp", "bmp"} {
		if strings.HasPrefix(v, "data:image/"+t+";") || strings.HasPrefix(v, "data:image/"+t+",") {
			return true
		}
	}
	return false
}
