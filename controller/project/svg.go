package project

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxSVG bounds a drawing's SVG text (GNS3 has no bound: a pasted photo
// became a multi-megabyte string in every drawing.created).
const MaxSVG = 4 << 20

// errNotSVG is the cause of a refused drawing.
var errNotSVG = errors.New("the root element is not <svg>")

// sanitizeSVG checks that text is one well-formed SVG document and drops
// what could run code or fetch something when a client renders it (the web
// UI puts other users' drawings in its page): <script>, <foreignObject>,
// event handler attributes (on*), and references that leave the document
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
	dropped, root := false, false
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
			if skip > 0 || unsafeElement(t.Name) {
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
		case xml.EndElement:
			if len(stack) == 0 || stack[len(stack)-1] != t.Name {
				return "", invalidSVG(fmt.Errorf("unexpected end element </%s>", t.Name.Local))
			}
			stack = stack[:len(stack)-1]
			if skip > 0 {
				skip--
				continue
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
			if strings.EqualFold(stack[len(stack)-1].Local, "style") && unsafeCSS(string(t)) {
				dropped = true // a style sheet that fetches or runs something
				continue
			}
			xml.EscapeText(&out, t)
		case xml.ProcInst:
			if t.Target != "xml" {
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

func unsafeElement(n xml.Name) bool {
	switch strings.ToLower(n.Local) {
	case "script", "foreignobject", "iframe", "object", "embed", "handler", "listener":
		return true
	}
	return false
}

func unsafeAttr(a xml.Attr) bool {
	name := strings.ToLower(a.Name.Local)
	value := strings.ToLower(strings.Join(strings.Fields(a.Value), ""))
	if strings.HasPrefix(name, "on") {
		return true
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
	v = strings.ToLower(strings.Join(strings.Fields(v), ""))
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
	return strings.Contains(v, "javascript:") || strings.Contains(v, "@import") || strings.Contains(v, "expression(")
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
