package icons

import "strings"

// classicFiles maps each classic file name (without .svg) to its drawing.
// Besides the ids GNS3 clients ask for (default_symbols, the built-in
// templates' symbols), it has the devices users reach for most.
var classicFiles = map[string]func() []byte{
	"router":             router,
	"ethernet_switch":    ethernetSwitch,
	"multilayer_switch":  multilayerSwitch,
	"hub":                hub,
	"atm_switch":         atmSwitch,
	"frame_relay_switch": frameRelaySwitch,
	"firewall":           firewall,
	"nat":                nat,
	"cloud":              cloud,
	"computer":           computer,
	"vpcs_guest":         vpcsGuest,
	"qemu_guest":         qemuGuest,
	"vbox_guest":         vboxGuest,
	"vmware_guest":       vmwareGuest,
	"docker_guest":       dockerGuest,
	"server":             server,
	"laptop":             laptop,
	"access_point":       accessPoint,
	"ip_phone":           ipPhone,
	"printer":            printer,
}

// tones colours one device: its lit top, its front (light to dark), its
// shaded side, and the line around it.
type tones struct {
	top1, top2, front1, front2, side, line string
}

var (
	blue   = tones{"#a9d0f5", "#6aa6e0", "#4a8ad2", "#21599b", "#1b4a82", "#123766"}
	teal   = tones{"#a3e3dc", "#5fc3b8", "#3aa89c", "#1c7268", "#175f56", "#0f4740"}
	violet = tones{"#d2c3f3", "#a18be0", "#8064cc", "#4f3596", "#442c80", "#33205f"}
	green  = tones{"#b4e8c4", "#6fcb8c", "#45ad68", "#23773f", "#1d6535", "#144a26"}
	steel  = tones{"#f4f6f8", "#d5dae1", "#c7ccd4", "#8e96a3", "#7b8390", "#4f5663"}
)

const white = "#ffffff"

// slab draws a flat box in oblique projection — a front face w×h, a top
// face t deep shifted right by dx, and the right side — and puts g on the
// top face. It returns the front face's corner, for details.
func slab(c *canvas, x, y, w, h, dx, t float64, k tones, g glyph) pt {
	front := pt{x, y + t}
	topPaint := c.linear(0, y, 0, y+t, stop{0, k.top1}, stop{1, k.top2})
	frontPaint := c.linear(0, y+t, 0, y+t+h, stop{0, k.front1}, stop{1, k.front2})
	c.add(
		fillStroke(poly(front, pt{x + w, y + t}, pt{x + w + dx, y}, pt{x + dx, y}), topPaint, k.line, 1),
		fillStroke(poly(pt{x + w, y + t}, pt{x + w + dx, y}, pt{x + w + dx, y + h}, pt{x + w, y + t + h}), k.side, k.line, 1),
		fillStroke(poly(front, pt{x + w, y + t}, pt{x + w, y + t + h}, pt{x, y + t + h}), frontPaint, k.line, 1),
	)
	if g != nil {
		// Keep the glyph off the edges of the face.
		const m = 0.08
		o := pt{x + dx, y}.add(pt{w, 0}.mul(m)).add(pt{-dx, t}.mul(m))
		c.add(group(face(o, pt{w * (1 - 2*m), 0}, pt{-dx * (1 - 2*m), t * (1 - 2*m)}), g(white, k.top2)))
	}
	return front
}

// ports draws a row of n port lights on a front face.
func ports(c *canvas, x, y, w float64, n int, color string) {
	var d []string
	step := w / float64(n)
	for i := range n {
		d = append(d, roundRect(x+float64(i)*step+step*0.2, y, step*0.6, 3, 0.8))
	}
	c.add(fill(strings.Join(d, " "), color))
}

// puck draws a flat cylinder (the classic router) w wide, with a top
// ellipse ry high and a side depth tall, and puts g on the top.
func puck(c *canvas, x, y, w, ry, depth float64, k tones, g glyph) {
	rx := w / 2
	cx, cy := x+rx, y+ry
	side := c.linear(x, 0, x+w, 0, stop{0, k.front2}, stop{0.35, k.front1}, stop{1, k.side})
	c.add(fillStroke(
		"M"+num(x)+" "+num(cy)+" V"+num(cy+depth)+" A"+num(rx)+" "+num(ry)+" 0 0 0 "+num(x+w)+" "+num(cy+depth)+
			" V"+num(cy)+" Z", side, k.line, 1))
	top := c.linear(0, y, 0, y+2*ry, stop{0, k.top1}, stop{1, k.top2})
	c.add(fillStroke("M"+num(x)+" "+num(cy)+" A"+num(rx)+" "+num(ry)+" 0 1 1 "+num(x+w)+" "+num(cy)+
		" A"+num(rx)+" "+num(ry)+" 0 1 1 "+num(x)+" "+num(cy)+" Z", top, k.line, 1))
	const m = 0.74 // share of the ellipse the glyph spans
	c.add(group(box(cx-rx*m, cy-ry*m, 2*rx*m, 2*ry*m), g(white, k.top2)))
}

func router() []byte {
	c := newCanvas(66, 46)
	puck(c, 1, 1, 64, 13, 18, blue, routerGlyph)
	return c.bytes()
}

func nat() []byte {
	c := newCanvas(66, 46)
	puck(c, 1, 1, 64, 13, 18, green, natGlyph)
	return c.bytes()
}

func ethernetSwitch() []byte   { return switchBox(blue, switchGlyph, 8, "#0e2a4d") }
func hub() []byte              { return switchBox(teal, hubGlyph, 6, "#0a3530") }
func atmSwitch() []byte        { return switchBox(violet, atmGlyph, 4, "#22154a") }
func frameRelaySwitch() []byte { return switchBox(green, boltGlyph, 4, "#0f3a1d") }

// switchBox draws the flat box the switch family shares: its tones and
// glyph on top, n ports in portInk along its front.
func switchBox(k tones, g glyph, n int, portInk string) []byte {
	c := newCanvas(74, 42)
	f := slab(c, 1, 1, 56, 19, 16, 21, k, g)
	ports(c, f.x+5, f.y+12, 46, n, portInk)
	return c.bytes()
}

func multilayerSwitch() []byte {
	c := newCanvas(64, 56)
	f := slab(c, 1, 1, 46, 32, 16, 21, blue, multilayerGlyph)
	// The front repeats the router's arrows: layer 3 in a switch.
	c.add(group(box(f.x+12, f.y+5, 22, 22), routerGlyph("#cfe3f8", "")))
	return c.bytes()
}

func firewall() []byte {
	c := newCanvas(66, 48)
	const x, y, w, h, dx, t = 1.0, 1.0, 50.0, 34.0, 14.0, 12.0
	mortar := "#efe2cf"
	brick := c.linear(0, 0, 0, 100, stop{0, "#e5604b"}, stop{1, "#a8281b"})
	line := "#6e1d14"
	c.add(
		fillStroke(poly(pt{x, y + t}, pt{x + w, y + t}, pt{x + w + dx, y}, pt{x + dx, y}), "#f7efe3", line, 1),
		fillStroke(poly(pt{x + w, y + t}, pt{x + w + dx, y}, pt{x + w + dx, y + h}, pt{x + w, y + t + h}), "#cdbb9f", line, 1),
		group(face(pt{x + w, y + t}, pt{dx, -t}, pt{0, h}), bricksGlyph("#8c2418", "")),
		fillStroke(poly(pt{x, y + t}, pt{x + w, y + t}, pt{x + w, y + t + h}, pt{x, y + t + h}), mortar, line, 1),
		group(box(x, y+t, w, h), bricksGlyph(brick, "")),
	)
	return c.bytes()
}

func cloud() []byte {
	c := newCanvas(76, 52)
	// The glyph's cloud spans x 7-93 and y 28-84 of its box.
	const s = 0.84
	paint := c.linear(0, 28, 0, 84, stop{0, "#ffffff"}, stop{1, "#bcd9f3"})
	c.add(group(matrix(s, 0, 0, s, 38-50*s, 26-56*s),
		fillStroke(cloudD, paint, "#3d78b8", 2.4)))
	return c.bytes()
}

// monitor draws the classic desktop computer, 65×59, and returns the
// screen's rectangle for the guests to draw on.
func monitor(c *canvas, screen1, screen2 string) (x, y, w, h float64) {
	bezel := c.linear(0, 1, 0, 44, stop{0, "#f3f5f8"}, stop{1, "#b8bec8"})
	stand := c.linear(0, 44, 0, 58, stop{0, "#c9ced6"}, stop{1, "#8a919d"})
	line := "#5b6372"
	c.add(
		fillStroke(poly(pt{27, 43}, pt{38, 43}, pt{40.5, 51}, pt{24.5, 51}), stand, line, 1),
		fillStroke(roundRect(14, 50.5, 37, 7, 3.5), stand, line, 1),
		fillStroke(roundRect(1.5, 1.5, 62, 42.5, 4), bezel, line, 1),
	)
	x, y, w, h = 6, 6, 53, 33
	c.add(fillStroke(roundRect(x, y, w, h, 1.5), c.linear(0, y, 0, y+h, stop{0, screen1}, stop{1, screen2}), "#3a4150", 0.8))
	return x, y, w, h
}

// gloss is the reflection across a screen.
func gloss(c *canvas, x, y, w, h float64) {
	c.add(fillOp(poly(pt{x + 1, y + 1}, pt{x + w*0.62, y + 1}, pt{x + w*0.34, y + h - 1}, pt{x + 1, y + h - 1}), white, 0.16))
}

func computer() []byte {
	c := newCanvas(65, 59)
	x, y, w, h := monitor(c, "#6fb1ee", "#1d5aa3")
	gloss(c, x, y, w, h)
	return c.bytes()
}

func vpcsGuest() []byte {
	c := newCanvas(65, 59)
	x, y, _, _ := monitor(c, "#26313f", "#0d1219")
	prompt := "#63e391"
	c.add(stroke("M"+num(x+7)+" "+num(y+9)+" l6 5 l-6 5", prompt, 2.6),
		stroke("M"+num(x+17)+" "+num(y+20)+" h9", prompt, 2.6))
	return c.bytes()
}

// guest draws the computer with a glyph on its screen.
func guest(screen1, screen2 string, g glyph) []byte {
	c := newCanvas(65, 59)
	x, y, w, h := monitor(c, screen1, screen2)
	const s = 27
	c.add(group(box(x+(w-s)/2, y+(h-s)/2, s, s), g(white, screen2)))
	gloss(c, x, y, w, h)
	return c.bytes()
}

func qemuGuest() []byte   { return guest("#f0a04b", "#c0561c", windowsGlyph) }
func vboxGuest() []byte   { return guest("#6fb1ee", "#1d5aa3", cubeGlyph) }
func vmwareGuest() []byte { return guest("#8a95a8", "#3e4757", layersGlyph) }

func dockerGuest() []byte {
	c := newCanvas(66, 52)
	// Three containers, stacked: two below, one on top, each its colour.
	boxes := []struct {
		x, y      float64
		light, dk string
	}{
		{2, 27, "#4fa3e8", "#1f68b0"},
		{34, 27, "#f2a24a", "#c4641a"},
		{18, 3, "#5ccf93", "#23894f"},
	}
	for _, b := range boxes {
		paint := c.linear(0, b.y, 0, b.y+22, stop{0, b.light}, stop{1, b.dk})
		c.add(fillStroke(roundRect(b.x, b.y, 30, 22, 2), paint, "#233042", 1))
		var ribs []string
		for i := 1; i <= 5; i++ {
			ribs = append(ribs, "M"+num(b.x+float64(i)*5)+" "+num(b.y+4)+" V"+num(b.y+18))
		}
		c.add(stroke(strings.Join(ribs, " "), "#ffffff", 1.4))
	}
	return c.bytes()
}

func server() []byte {
	c := newCanvas(52, 68)
	const x, y, w, h, dx, t = 1.0, 1.0, 36.0, 56.0, 14.0, 10.0
	k := steel
	slab(c, x, y, w, h, dx, t, k, nil)
	// Drive bays and lights on the front.
	var bays, leds []string
	for i := range 3 {
		by := y + t + 6 + float64(i)*10
		bays = append(bays, roundRect(x+5, by, 20, 5, 1.2))
		leds = append(leds, circlePath(x+30, by+2.5, 1.8))
	}
	c.add(fillStroke(strings.Join(bays, " "), "#5e6674", "#3d434e", 0.6),
		fill(strings.Join(leds, " "), "#3ad06b"))
	var vents []string
	for i := range 4 {
		vents = append(vents, "M"+num(x+6)+" "+num(y+t+42+float64(i)*3.2)+" h24")
	}
	c.add(stroke(strings.Join(vents, " "), "#8e96a3", 1.2))
	return c.bytes()
}

func laptop() []byte {
	c := newCanvas(72, 52)
	line := "#4f5663"
	lid := c.linear(0, 1, 0, 38, stop{0, "#e9ecf0"}, stop{1, "#aeb5c0"})
	deck := c.linear(0, 38, 0, 50, stop{0, "#dde1e7"}, stop{1, "#8e96a3"})
	c.add(
		fillStroke(roundRect(11, 1.5, 50, 37, 3), lid, line, 1),
		fillStroke(roundRect(14.5, 5, 43, 30, 1), c.linear(0, 5, 0, 35, stop{0, "#6fb1ee"}, stop{1, "#1d5aa3"}), "#3a4150", 0.8),
		fillStroke(poly(pt{8, 39}, pt{64, 39}, pt{71, 49}, pt{1, 49}), deck, line, 1),
		fill(roundRect(29, 45, 14, 2.6, 1.3), "#7d8594"),
	)
	gloss(c, 14.5, 5, 43, 30)
	return c.bytes()
}

func accessPoint() []byte {
	c := newCanvas(64, 54)
	line := "#4f5663"
	body := c.linear(0, 34, 0, 52, stop{0, "#f6f7f9"}, stop{1, "#bfc5ce"})
	c.add(
		group(box(14, 0, 36, 36), wifiGlyph("#2f7bd0", "")),
		fillStroke(roundRect(2, 36, 60, 16, 6), body, line, 1),
	)
	ports(c, 14, 42.5, 36, 4, "#3ad06b")
	return c.bytes()
}

func ipPhone() []byte {
	c := newCanvas(60, 56)
	ink := c.linear(0, 0, 0, 100, stop{0, "#5b6576"}, stop{1, "#252b35"})
	c.add(group(box(3, 2, 54, 54), phoneGlyph(ink, "#dfe6ee")))
	return c.bytes()
}

func printer() []byte {
	c := newCanvas(64, 60)
	ink := c.linear(0, 0, 0, 100, stop{0, "#8c95a4"}, stop{1, "#3e4552"})
	c.add(group(box(3, 1, 58, 58), printerGlyph(ink, "#ffffff")))
	return c.bytes()
}
