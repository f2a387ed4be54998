package icons

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// canvas builds one SVG document. Every icon is a self-contained file, so
// gradient ids only need to be unique inside one canvas.
//
// Only features every client renders are used: paths, basic shapes,
// linear and radial gradients, transforms and opacity. The GNS3 GUI draws
// symbols with Qt's SVG renderer (SVG Tiny 1.2), which ignores filters,
// masks and most of CSS, so none of those appear.
type canvas struct {
	w, h  float64
	defs  strings.Builder
	body  strings.Builder
	nextG int
}

func newCanvas(w, h float64) *canvas { return &canvas{w: w, h: h} }

// add appends elements to the body.
func (c *canvas) add(elems ...string) {
	for _, e := range elems {
		c.body.WriteString(e)
		c.body.WriteByte('\n')
	}
}

// stop is one gradient stop: offset in [0, 1] and a colour.
type stop struct {
	off   float64
	color string
}

// linear defines a linear gradient in the user space of the canvas and
// returns the paint reference for it.
func (c *canvas) linear(x1, y1, x2, y2 float64, stops ...stop) string {
	c.nextG++
	id := fmt.Sprintf("g%d", c.nextG)
	fmt.Fprintf(&c.defs, `<linearGradient id="%s" gradientUnits="userSpaceOnUse" x1="%s" y1="%s" x2="%s" y2="%s">`,
		id, num(x1), num(y1), num(x2), num(y2))
	writeStops(&c.defs, stops)
	c.defs.WriteString("</linearGradient>\n")
	return "url(#" + id + ")"
}

// radial defines a radial gradient centred on (cx, cy) and returns the
// paint reference for it.
func (c *canvas) radial(cx, cy, r float64, stops ...stop) string {
	c.nextG++
	id := fmt.Sprintf("g%d", c.nextG)
	fmt.Fprintf(&c.defs, `<radialGradient id="%s" gradientUnits="userSpaceOnUse" cx="%s" cy="%s" r="%s">`,
		id, num(cx), num(cy), num(r))
	writeStops(&c.defs, stops)
	c.defs.WriteString("</radialGradient>\n")
	return "url(#" + id + ")"
}

func writeStops(b *strings.Builder, stops []stop) {
	for _, s := range stops {
		fmt.Fprintf(b, `<stop offset="%s" stop-color="%s"/>`, num(s.off), s.color)
	}
}

// bytes renders the document at the canvas's own size.
func (c *canvas) bytes() []byte { return c.bytesAt(c.w, c.h) }

// bytesAt renders the document w×h: the drawing is scaled by the same
// factor in both directions to fit, and centred. The scaling is a
// transform in the document, not left to the viewBox, so every renderer
// (Qt's older ones stretch a viewBox to the size) draws the same thing.
func (c *canvas) bytesAt(w, h float64) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s">`+"\n",
		num(w), num(h), num(w), num(h))
	if c.defs.Len() > 0 {
		b.WriteString("<defs>\n")
		b.WriteString(c.defs.String())
		b.WriteString("</defs>\n")
	}
	if w == c.w && h == c.h {
		b.WriteString(c.body.String())
	} else {
		s := min(w/c.w, h/c.h)
		fmt.Fprintf(&b, `<g transform="%s">`+"\n", matrix(s, 0, 0, s, (w-c.w*s)/2, (h-c.h*s)/2))
		b.WriteString(c.body.String())
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// num formats a coordinate with at most two decimals, so the output is
// compact and stable.
func num(x float64) string {
	x = math.Round(x*100) / 100
	if x == 0 {
		x = 0 // no "-0"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// pt is a point.
type pt struct{ x, y float64 }

func (p pt) add(q pt) pt      { return pt{p.x + q.x, p.y + q.y} }
func (p pt) sub(q pt) pt      { return pt{p.x - q.x, p.y - q.y} }
func (p pt) mul(k float64) pt { return pt{p.x * k, p.y * k} }
func (p pt) len() float64     { return math.Hypot(p.x, p.y) }
func (p pt) unit() pt         { return p.mul(1 / p.len()) }
func (p pt) normal() pt       { return pt{-p.y, p.x} }
func (p pt) String() string   { return num(p.x) + " " + num(p.y) }
func polar(c pt, r, deg float64) pt {
	return c.add(pt{r * math.Cos(deg*math.Pi/180), r * math.Sin(deg*math.Pi/180)})
}

// poly is a closed path through points.
func poly(points ...pt) string {
	var b strings.Builder
	for i, p := range points {
		if i == 0 {
			b.WriteString("M")
		} else {
			b.WriteString(" L")
		}
		b.WriteString(p.String())
	}
	b.WriteString(" Z")
	return b.String()
}

// arrow is the outline of a straight arrow from tail to tip: a shaft of
// width shaft, and a head head long and headW wide.
func arrow(tail, tip pt, shaft, head, headW float64) string {
	u := tip.sub(tail).unit()
	n := u.normal()
	base := tip.sub(u.mul(head))
	return poly(
		tail.add(n.mul(shaft/2)), base.add(n.mul(shaft/2)), base.add(n.mul(headW/2)), tip,
		base.sub(n.mul(headW/2)), base.sub(n.mul(shaft/2)), tail.sub(n.mul(shaft/2)),
	)
}

// arrowHead is a triangle whose tip is at tip, pointing along dir.
func arrowHead(tip, dir pt, head, headW float64) string {
	u := dir.unit()
	n := u.normal()
	base := tip.sub(u.mul(head))
	return poly(base.add(n.mul(headW/2)), tip, base.sub(n.mul(headW/2)))
}

// roundRect is a rounded rectangle as a path, so it can be combined with
// others in one fill.
func roundRect(x, y, w, h, r float64) string {
	return fmt.Sprintf("M%s %s H%s A%s %s 0 0 1 %s %s V%s A%s %s 0 0 1 %s %s H%s A%s %s 0 0 1 %s %s V%s A%s %s 0 0 1 %s %s Z",
		num(x+r), num(y), num(x+w-r), num(r), num(r), num(x+w), num(y+r), num(y+h-r), num(r), num(r), num(x+w-r), num(y+h),
		num(x+r), num(r), num(r), num(x), num(y+h-r), num(y+r), num(r), num(r), num(x+r), num(y))
}

// circlePath is a circle as a path.
func circlePath(cx, cy, r float64) string {
	return fmt.Sprintf("M%s %s A%s %s 0 1 0 %s %s A%s %s 0 1 0 %s %s Z",
		num(cx-r), num(cy), num(r), num(r), num(cx+r), num(cy), num(r), num(r), num(cx-r), num(cy))
}

// fill is a path element filled with paint.
func fill(d, paint string) string {
	return fmt.Sprintf(`<path d="%s" fill="%s"/>`, d, paint)
}

// fillOp is fill with an opacity.
func fillOp(d, paint string, op float64) string {
	return fmt.Sprintf(`<path d="%s" fill="%s" fill-opacity="%s"/>`, d, paint, num(op))
}

// stroke is a path element outlined with paint, round caps and joins.
func stroke(d, paint string, width float64) string {
	return fmt.Sprintf(`<path d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linecap="round" stroke-linejoin="round"/>`,
		d, paint, num(width))
}

// fillStroke is a path filled with one paint and outlined with another.
func fillStroke(d, paint, line string, width float64) string {
	return fmt.Sprintf(`<path d="%s" fill="%s" stroke="%s" stroke-width="%s" stroke-linejoin="round"/>`,
		d, paint, line, num(width))
}

// group wraps elements in a transformed group.
func group(transform string, elems ...string) string {
	return fmt.Sprintf(`<g transform="%s">`, transform) + "\n" + strings.Join(elems, "\n") + "\n</g>"
}

// matrix is an SVG affine transform: x' = a*x + c*y + e, y' = b*x + d*y + f.
func matrix(a, b, c, d, e, f float64) string {
	return fmt.Sprintf("matrix(%s %s %s %s %s %s)", num(a), num(b), num(c), num(d), num(e), num(f))
}

// box maps the 100×100 glyph box onto the rectangle (x, y, w, h).
func box(x, y, w, h float64) string {
	return matrix(w/100, 0, 0, h/100, x, y)
}

// face maps the 100×100 glyph box onto the parallelogram whose corners
// are o (the glyph's top-left), o+u (top-right) and o+v (bottom-left): the
// top face of a box drawn in oblique projection.
func face(o, u, v pt) string {
	return matrix(u.x/100, u.y/100, v.x/100, v.y/100, o.x, o.y)
}
