package icons

import "strings"

// classicIcon is one classic symbol: its drawing, and the width and
// height it is served at. Those are GNS3's own for the same file (rounded
// to whole pixels, as GNS3 measures them): the GUI lays out a node's label
// and links by its symbol's size, so a topology made with GNS3 keeps its
// look. A drawing of another shape is scaled to fit, centred.
type classicIcon struct {
	draw func() *canvas
	w, h float64
}

// classicFiles maps each classic file name (without .svg) to its icon:
// every classic id GNS3 has, and labtap's laptop. The sizes of nat and
// qemu_guest are those of labtap's drawings: GNS3's could not be checked.
var classicFiles = map[string]classicIcon{
	"PBX":                      {pbx, 51, 48},
	"PIX_firewall":             {pixFirewall, 66, 45},
	"access_point":             {accessPoint, 72, 32},
	"access_server":            {accessServer, 51, 48},
	"asa":                      {asa, 52, 60},
	"atm_bridge":               {atmBridge, 72, 32},
	"atm_switch":               {atmSwitch, 51, 48},
	"call_manager":             {callManager, 75, 47},
	"cloud":                    {cloud, 170, 76},
	"computer":                 {computer, 65, 59},
	"docker_guest":             {dockerGuest, 65, 59},
	"dslam":                    {dslam, 50, 53},
	"edge_label_switch_router": {edgeLabelSwitchRouter, 66, 45},
	"ethernet_switch":          {ethernetSwitch, 72, 32},
	"firewall":                 {firewall, 66, 45},
	"frame_relay_switch":       {frameRelaySwitch, 51, 48},
	"gateway":                  {gateway, 66, 56},
	"hub":                      {hub, 72, 32},
	"ids":                      {ids, 51, 48},
	"iosv_l2_virl":             {iosvL2, 51, 48},
	"iosv_virl":                {iosv, 66, 56},
	"ip_phone":                 {ipPhone, 40, 25},
	"label_switch_router":      {labelSwitchRouter, 66, 56},
	"laptop":                   {laptop, 72, 52},
	"lightweight_ap":           {lightweightAP, 72, 32},
	"multilayer_switch":        {multilayerSwitch, 51, 48},
	"nat":                      {nat, 66, 46},
	"optical_router":           {opticalRouter, 66, 56},
	"printer":                  {printer, 68, 67},
	"qemu_guest":               {qemuGuest, 65, 59},
	"route_switch_processor":   {routeSwitchProcessor, 51, 66},
	"router":                   {router, 66, 45},
	"router.awp":               {routerAWP, 70, 50},
	"router_firewall":          {routerFirewall, 66, 45},
	"router_netflow":           {routerNetflow, 66, 45},
	"server":                   {server, 49, 70},
	"sip_server":               {sipServer, 40, 60},
	"traceng":                  {traceng, 65, 59},
	"vbox_guest":               {vboxGuest, 65, 59},
	"vmware_guest":             {vmwareGuest, 65, 59},
	"voice_access_server":      {voiceAccessServer, 51, 48},
	"voice_router":             {voiceRouter, 66, 45},
	"vpcs_guest":               {vpcsGuest, 65, 59},
	"wlan_controller":          {wlanController, 72, 32},
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
	red    = tones{"#f5b5ad", "#e5604b", "#c9402e", "#8c2418", "#7a1f15", "#5e160f"}
	navy   = tones{"#9fb6d9", "#4d6fa8", "#33558f", "#182f5e", "#14284f", "#0d1c3a"}
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

func router() *canvas { return flatRouter(blue, routerGlyph, nil) }

// flatRouter is the 66×45 router puck: g on its top, and badge, if any,
// on the middle of its side.
func flatRouter(k tones, g, badge glyph) *canvas {
	c := newCanvas(66, 45)
	puck(c, 1, 1, 64, 12.5, 18, k, g)
	if badge != nil {
		// The side shows between y 26 and 44 at the middle.
		c.add(group(box(25, 27, 16, 16), badge(white, k.front2)))
	}
	return c
}

// tallRouter is the 66×56 puck, a deeper side for the routers GNS3 draws
// taller, with badge on its side.
func tallRouter(k tones, g, badge glyph) *canvas {
	c := newCanvas(66, 56)
	puck(c, 1, 1, 64, 14, 26, k, g)
	if badge != nil {
		// The side shows between y 29 and 55 at the middle.
		c.add(group(box(22, 31, 22, 22), badge(white, k.front2)))
	}
	return c
}

func voiceRouter() *canvas           { return flatRouter(teal, routerGlyph, phoneGlyph) }
func routerFirewall() *canvas        { return flatRouter(red, routerGlyph, flameGlyph) }
func pixFirewall() *canvas           { return flatRouter(red, flameGlyph, bricksGlyph) }
func edgeLabelSwitchRouter() *canvas { return flatRouter(green, routerGlyph, switchGlyph) }
func gateway() *canvas               { return tallRouter(violet, routerGlyph, natGlyph) }
func labelSwitchRouter() *canvas     { return tallRouter(green, switchGlyph, routerGlyph) }
func iosv() *canvas                  { return tallRouter(blue, routerGlyph, cubeGlyph) }
func opticalRouter() *canvas         { return tallRouter(teal, routerGlyph, boltGlyph) }

// routerNetflow is the router with flows streaming along its side.
func routerNetflow() *canvas {
	c := flatRouter(blue, routerGlyph, nil)
	var d []string
	for _, y := range []float64{29, 33, 37} {
		d = append(d, "M10 "+num(y)+" c5 -3 11 3 16 0 s11 3 16 0 s11 3 16 0")
	}
	c.add(stroke(strings.Join(d, " "), "#bfe6ff", 1.6))
	return c
}

func routerAWP() *canvas {
	c := newCanvas(70, 50)
	puck(c, 1, 1, 68, 14, 20, navy, routerGlyph)
	return c
}

func nat() *canvas {
	c := newCanvas(66, 46)
	puck(c, 1, 1, 64, 13, 18, green, natGlyph)
	return c
}

func ethernetSwitch() *canvas { return switchBox(blue, switchGlyph, 8, "#0e2a4d") }
func atmBridge() *canvas      { return switchBox(violet, switchGlyph, 4, "#22154a") }
func accessPoint() *canvas    { return switchBox(green, wifiGlyph, 4, "#0f3a1d") }
func lightweightAP() *canvas  { return switchBox(teal, wifiGlyph, 2, "#0a3530") }
func wlanController() *canvas { return switchBox(blue, wifiGlyph, 8, "#0e2a4d") }
func hub() *canvas            { return switchBox(teal, hubGlyph, 6, "#0a3530") }

// switchBox draws the flat box the switch family shares: its tones and
// glyph on top, n ports in portInk along its front.
func switchBox(k tones, g glyph, n int, portInk string) *canvas {
	c := newCanvas(72, 32)
	f := slab(c, 1, 1, 55, 14, 15, 16, k, g)
	ports(c, f.x+5, f.y+7, 45, n, portInk)
	return c
}

// tower is the 51×48 box of the classic appliances: top glyph on its top
// face, front glyph (if any) on its front in ink.
func tower(k tones, top, front glyph, ink string) *canvas {
	c := newCanvas(51, 48)
	f := slab(c, 1, 1, 35, 32, 14, 14, k, top)
	if front != nil {
		c.add(group(box(f.x+6.5, f.y+5, 22, 22), front(ink, k.front2)))
	}
	return c
}

// The front of the multilayer switch repeats the router's arrows: layer 3
// in a switch.
func multilayerSwitch() *canvas  { return tower(blue, multilayerGlyph, routerGlyph, "#cfe3f8") }
func accessServer() *canvas      { return tower(violet, routerGlyph, hubGlyph, white) }
func ids() *canvas               { return tower(red, flameGlyph, inspectGlyph, white) }
func pbx() *canvas               { return tower(violet, switchGlyph, phoneGlyph, white) }
func voiceAccessServer() *canvas { return tower(teal, routerGlyph, phoneGlyph, white) }
func iosvL2() *canvas            { return tower(blue, switchGlyph, cubeGlyph, white) }
func atmSwitch() *canvas         { return tower(violet, atmGlyph, switchGlyph, white) }
func frameRelaySwitch() *canvas  { return tower(green, boltGlyph, switchGlyph, white) }

// inspectGlyph: a magnifying glass, for the devices that watch traffic.
func inspectGlyph(ink, _ string) string {
	return stroke(circlePath(42, 42, 25), ink, 11) + stroke("M61 61 L88 88", ink, 15)
}

func asa() *canvas {
	c := newCanvas(52, 60)
	f := slab(c, 1, 1, 36, 45, 14, 13, red, flameGlyph)
	c.add(group(box(f.x, f.y, 36, 45), bricksGlyph("#8c2418", "")))
	return c
}

func callManager() *canvas {
	c := newCanvas(75, 47)
	f := slab(c, 1, 1, 58, 32, 15, 13, green, switchGlyph)
	c.add(group(box(f.x+17, f.y+3, 24, 24), phoneGlyph(white, green.front2)))
	return c
}

func sipServer() *canvas {
	c := newCanvas(40, 60)
	f := slab(c, 1, 1, 25, 44, 13, 14, steel, nil)
	c.add(group(box(f.x+2.5, f.y+4, 20, 20), phoneGlyph("#3d434e", steel.front1)))
	var bays []string
	for i := range 3 {
		bays = append(bays, roundRect(f.x+4, f.y+28+float64(i)*5, 17, 3, 1))
	}
	c.add(fillStroke(strings.Join(bays, " "), "#5e6674", "#3d434e", 0.6))
	return c
}

func routeSwitchProcessor() *canvas {
	c := newCanvas(51, 66)
	f := slab(c, 1, 1, 35, 50, 14, 14, violet, routerGlyph)
	c.add(group(box(f.x+6.5, f.y+5, 22, 22), switchGlyph(white, "")))
	for i := range 3 {
		ports(c, f.x+4, f.y+32+float64(i)*5, 27, 4, "#22154a")
	}
	return c
}

func dslam() *canvas {
	c := newCanvas(50, 53)
	f := slab(c, 1, 1, 34, 38, 14, 13, teal, hubGlyph)
	for i := range 5 {
		ports(c, f.x+3, f.y+5+float64(i)*6.5, 28, 5, "#0a3530")
	}
	return c
}

func firewall() *canvas {
	c := newCanvas(66, 45)
	const x, y, w, h, dx, t = 1.0, 1.0, 50.0, 31.0, 14.0, 12.0
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
	return c
}

func cloud() *canvas {
	c := newCanvas(170, 76)
	// The glyph's cloud spans x 7-93 and y 28-84 of its box: stretch it
	// over the wide, low box GNS3's cloud has.
	const sx, sy = 164.0 / 86, 70.0 / 56
	paint := c.linear(0, 28, 0, 84, stop{0, "#ffffff"}, stop{1, "#bcd9f3"})
	c.add(group(matrix(sx, 0, 0, sy, 3-7*sx, 3-28*sy),
		fillStroke(cloudD, paint, "#3d78b8", 1.6)))
	return c
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

func computer() *canvas {
	c := newCanvas(65, 59)
	x, y, w, h := monitor(c, "#6fb1ee", "#1d5aa3")
	gloss(c, x, y, w, h)
	return c
}

func vpcsGuest() *canvas {
	c := newCanvas(65, 59)
	x, y, _, _ := monitor(c, "#26313f", "#0d1219")
	prompt := "#63e391"
	c.add(stroke("M"+num(x+7)+" "+num(y+9)+" l6 5 l-6 5", prompt, 2.6),
		stroke("M"+num(x+17)+" "+num(y+20)+" h9", prompt, 2.6))
	return c
}

// guest draws the computer with a glyph on its screen.
func guest(screen1, screen2 string, g glyph) *canvas {
	c := newCanvas(65, 59)
	x, y, w, h := monitor(c, screen1, screen2)
	const s = 27
	c.add(group(box(x+(w-s)/2, y+(h-s)/2, s, s), g(white, screen2)))
	gloss(c, x, y, w, h)
	return c
}

func qemuGuest() *canvas   { return guest("#f0a04b", "#c0561c", windowsGlyph) }
func traceng() *canvas     { return guest("#8fd3a0", "#237a45", routerGlyph) }
func vboxGuest() *canvas   { return guest("#6fb1ee", "#1d5aa3", cubeGlyph) }
func vmwareGuest() *canvas { return guest("#8a95a8", "#3e4757", layersGlyph) }

func dockerGuest() *canvas {
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
	return c
}

func server() *canvas {
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
	return c
}

func laptop() *canvas {
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
	return c
}

func ipPhone() *canvas {
	c := newCanvas(40, 25)
	ink := c.linear(0, 0, 0, 100, stop{0, "#5b6576"}, stop{1, "#252b35"})
	// GNS3's phone is a wide desk set: the handset glyph, widened.
	c.add(group(box(2, 0.5, 36, 24), phoneGlyph(ink, "#dfe6ee")))
	return c
}

func printer() *canvas {
	c := newCanvas(64, 60)
	ink := c.linear(0, 0, 0, 100, stop{0, "#8c95a4"}, stop{1, "#3e4552"})
	c.add(group(box(3, 1, 58, 58), printerGlyph(ink, "#ffffff")))
	return c
}
