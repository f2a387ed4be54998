package icons

import (
	"fmt"
	"strings"
)

// A glyph draws one pictogram inside the box (0,0)-(100,100): ink is its
// colour, bg the colour of the surface under it, used to cut details out of
// solid shapes (a screen inside a monitor, the slots of a server). Glyphs
// are our own drawings, made of straight arrows, arcs and rounded shapes
// so they stay legible at 30 px.
type glyph func(ink, bg string) string

// glyphs by name. Affinity icons draw one each; classic icons put some of
// them on the top face of a device.
var glyphs = map[string]glyph{
	"router":            routerGlyph,
	"switch":            switchGlyph,
	"switch_multilayer": multilayerGlyph,
	"hub":               hubGlyph,
	"atm":               atmGlyph,
	"bolt":              boltGlyph,
	"cloud":             cloudGlyph,
	"nat":               natGlyph,
	"bricks":            bricksGlyph,
	"flame":             flameGlyph,
	"monitor":           monitorGlyph,
	"monitor_vm":        monitorVMGlyph,
	"laptop":            laptopGlyph,
	"server":            serverGlyph,
	"containers":        containersGlyph,
	"cube":              cubeGlyph,
	"layers":            layersGlyph,
	"windows":           windowsGlyph,
	"wifi":              wifiGlyph,
	"phone":             phoneGlyph,
	"printer":           printerGlyph,
}

// routerGlyph: packets come in from both sides and leave up and down
// (forwarded between networks).
func routerGlyph(ink, _ string) string {
	const s, h, hw = 11, 17, 29
	return fill(strings.Join([]string{
		arrow(pt{4, 50}, pt{41, 50}, s, h, hw),
		arrow(pt{96, 50}, pt{59, 50}, s, h, hw),
		arrow(pt{50, 41}, pt{50, 4}, s, h, hw),
		arrow(pt{50, 59}, pt{50, 96}, s, h, hw),
	}, " "), ink)
}

// switchGlyph: frames cross in both directions.
func switchGlyph(ink, _ string) string {
	const s, h, hw = 11, 18, 30
	return fill(strings.Join([]string{
		arrow(pt{6, 32}, pt{94, 32}, s, h, hw),
		arrow(pt{94, 68}, pt{6, 68}, s, h, hw),
	}, " "), ink)
}

// multilayerGlyph: the switch's crossing arrows, plus routing up and down.
func multilayerGlyph(ink, _ string) string {
	const s, h, hw = 10, 16, 26
	return fill(strings.Join([]string{
		arrow(pt{4, 36}, pt{62, 36}, s, h, hw),
		arrow(pt{62, 64}, pt{4, 64}, s, h, hw),
		arrow(pt{82, 50}, pt{82, 4}, s, h, hw),
		arrow(pt{82, 50}, pt{82, 96}, s, h, hw),
	}, " "), ink)
}

// hubGlyph: one centre repeating to every port.
func hubGlyph(ink, _ string) string {
	c := pt{50, 50}
	var spokes, dots []string
	for a := 0.0; a < 360; a += 60 {
		spokes = append(spokes, "M"+polar(c, 12, a+30).String()+" L"+polar(c, 34, a+30).String())
		p := polar(c, 39, a+30)
		dots = append(dots, circlePath(p.x, p.y, 10))
	}
	return stroke(strings.Join(spokes, " "), ink, 8) + "\n" +
		fill(circlePath(50, 50, 15)+" "+strings.Join(dots, " "), ink)
}

// atmGlyph: cells switched out to every corner.
func atmGlyph(ink, _ string) string {
	const s, h, hw = 10, 18, 28
	var d []string
	for _, q := range []pt{{1, 1}, {-1, 1}, {1, -1}, {-1, -1}} {
		d = append(d, arrow(pt{50 + 11*q.x, 50 + 11*q.y}, pt{50 + 44*q.x, 50 + 44*q.y}, s, h, hw))
	}
	d = append(d, poly(pt{50, 38}, pt{62, 50}, pt{50, 62}, pt{38, 50}))
	return fill(strings.Join(d, " "), ink)
}

// boltGlyph: the lightning bolt of a WAN (frame relay, ISDN) link.
func boltGlyph(ink, _ string) string {
	return fill(poly(pt{60, 2}, pt{18, 58}, pt{46, 58}, pt{36, 98}, pt{84, 38}, pt{55, 38}, pt{70, 2}), ink)
}

// cloudD is the outline of a cloud: a flat base under three bulges.
// The bulges are circles (23,68) r16, (47,52) r24 and (73,64) r20, which
// meet at (23,52) and (69.72,44.27); the base joins their lowest points.
const cloudD = "M23 84 A16 16 0 0 1 23 52 A24 24 0 0 1 69.72 44.27 A20 20 0 1 1 73 84 Z"

// cloudGlyph is the cloud, enlarged 1.1 times about its centre (50, 56)
// and moved to the centre of the box.
func cloudGlyph(ink, _ string) string {
	return group(matrix(1.1, 0, 0, 1.1, -5, -11.6), fill(cloudD, ink))
}

// natGlyph: addresses swapped on the way through, two arrows chasing each
// other round a circle.
func natGlyph(ink, _ string) string {
	c := pt{50, 50}
	const r = 33
	var arcs, heads []string
	for _, start := range []float64{200, 20} {
		end := start + 125
		a, b := polar(c, r, start), polar(c, r, end)
		arcs = append(arcs, fmt.Sprintf("M%s A%d %d 0 0 1 %s", a, r, r, b))
		// The head continues the arc: tangent at the end, clockwise.
		tan := polar(pt{}, 1, end+90)
		heads = append(heads, arrowHead(b.add(tan.mul(14)), tan, 24, 30))
	}
	return stroke(strings.Join(arcs, " "), ink, 11) + "\n" +
		fill(strings.Join(heads, " ")+" "+circlePath(50, 50, 9), ink)
}

// bricksGlyph: a wall, bricks laid in stretcher bond.
func bricksGlyph(ink, _ string) string {
	var d []string
	const x0, w, gap, bh = 6.0, 88.0, 4.0, 17.0
	for row := range 4 {
		y := 12 + float64(row)*(bh+gap)
		var edges []float64
		if row%2 == 0 {
			brick := (w - 2*gap) / 3
			edges = []float64{x0, x0 + brick, x0 + brick + gap, x0 + 2*brick + gap, x0 + 2*brick + 2*gap, x0 + w}
		} else {
			brick := (w - 2*gap) / 3
			half := (w - brick - 2*gap) / 2
			edges = []float64{x0, x0 + half, x0 + half + gap, x0 + half + gap + brick, x0 + half + 2*gap + brick, x0 + w}
		}
		for i := 0; i < len(edges); i += 2 {
			d = append(d, roundRect(edges[i], y, edges[i+1]-edges[i], bh, 2))
		}
	}
	return fill(strings.Join(d, " "), ink)
}

// flameGlyph: a flame, with its heart cut out.
func flameGlyph(ink, bg string) string {
	outer := "M50 3 C56 22 80 34 82 60 C83 82 68 97 50 97 C32 97 17 83 18 62 C19 47 27 38 33 27 " +
		"C36 38 40 44 46 47 C49 33 44 18 50 3 Z"
	inner := "M51 52 C54 64 66 69 65 81 C64 89 58 93 50 93 C42 93 36 88 36 80 C36 72 42 68 44 60 " +
		"C46 66 48 69 50 70 C52 64 50 58 51 52 Z"
	return fill(outer, ink) + "\n" + fill(inner, bg)
}

// monitorGlyph: a screen on a stand.
func monitorGlyph(ink, bg string) string {
	return fill(roundRect(6, 12, 88, 62, 7)+" "+poly(pt{42, 74}, pt{58, 74}, pt{61, 84}, pt{39, 84})+" "+roundRect(26, 82, 48, 8, 4), ink) + "\n" +
		fill(roundRect(14, 20, 72, 46, 2), bg)
}

// monitorVMGlyph: a screen showing a virtual machine (a cube).
func monitorVMGlyph(ink, bg string) string {
	return monitorGlyph(ink, bg) + "\n" + group(box(32, 24, 36, 38), cubeGlyph(ink, bg))
}

// laptopGlyph: an open laptop.
func laptopGlyph(ink, bg string) string {
	return fill(roundRect(17, 16, 66, 50, 5)+" "+poly(pt{4, 72}, pt{96, 72}, pt{90, 84}, pt{10, 84}), ink) + "\n" +
		fill(roundRect(24, 23, 52, 37, 1.5)+" "+roundRect(42, 74, 16, 4, 2), bg)
}

// serverGlyph: three rack units, each with a drive slot and a light.
func serverGlyph(ink, bg string) string {
	var units, cuts []string
	for i := range 3 {
		y := 8 + float64(i)*29
		units = append(units, roundRect(14, y, 72, 25, 5))
		cuts = append(cuts, roundRect(24, y+10, 34, 5, 2.5), circlePath(72, y+12.5, 4.5))
	}
	return fill(strings.Join(units, " "), ink) + "\n" + fill(strings.Join(cuts, " "), bg)
}

// containersGlyph: shipping containers, stacked.
func containersGlyph(ink, bg string) string {
	boxes := [][2]float64{{6, 54}, {52, 54}, {29, 14}}
	var shells, ribs []string
	for _, b := range boxes {
		x, y := b[0], b[1]
		shells = append(shells, roundRect(x, y, 42, 34, 3))
		for i := 1; i <= 4; i++ {
			rx := x + float64(i)*42/5
			ribs = append(ribs, fmt.Sprintf("M%s %s V%s", num(rx), num(y+7), num(y+27)))
		}
	}
	return fill(strings.Join(shells, " "), ink) + "\n" + stroke(strings.Join(ribs, " "), bg, 3)
}

// cubeGlyph: a solid cube, three faces in three tones of ink.
func cubeGlyph(ink, _ string) string {
	top, right, bottom, left := pt{50, 6}, pt{90, 27}, pt{50, 96}, pt{10, 27}
	centre := pt{50, 48}
	return fill(poly(top, right, centre, left), ink) + "\n" +
		fillOp(poly(left, centre, bottom, pt{10, 73}), ink, 0.78) + "\n" +
		fillOp(poly(centre, right, pt{90, 73}, bottom), ink, 0.58)
}

// layersGlyph: a hypervisor's stacked layers.
func layersGlyph(ink, bg string) string {
	var out []string
	for i, y := range []float64{72, 50, 28} {
		d := poly(pt{50, y - 22}, pt{94, y}, pt{50, y + 22}, pt{6, y})
		if i == 0 {
			out = append(out, fill(d, ink))
		} else {
			out = append(out, fillStroke(d, ink, bg, 6))
		}
	}
	return strings.Join(out, "\n")
}

// windowsGlyph: one machine behind another, the usual "virtual machine".
func windowsGlyph(ink, bg string) string {
	back := roundRect(30, 8, 62, 52, 6)
	front := roundRect(8, 38, 62, 52, 6)
	return stroke(back, ink, 8) + "\n" + stroke(front, bg, 12) + "\n" + fill(front, ink) + "\n" +
		fill(roundRect(16, 52, 46, 30, 2), bg)
}

// wifiGlyph: radio waves from an access point.
func wifiGlyph(ink, _ string) string {
	c := pt{50, 80}
	var arcs []string
	for _, r := range []float64{24, 44, 64} {
		a, b := polar(c, r, 225), polar(c, r, 315)
		arcs = append(arcs, fmt.Sprintf("M%s A%s %s 0 0 1 %s", a, num(r), num(r), b))
	}
	return stroke(strings.Join(arcs, " "), ink, 10) + "\n" + fill(circlePath(50, 80, 9), ink)
}

// phoneGlyph: a desk phone: handset over a keypad.
func phoneGlyph(ink, bg string) string {
	handset := "M10 36 C10 10 90 10 90 36 L90 40 C90 44 87 46 83 46 L70 46 C66 46 64 43 64 40 L64 33 " +
		"C58 29 42 29 36 33 L36 40 C36 43 34 46 30 46 L17 46 C13 46 10 44 10 40 Z"
	body := "M24 50 L76 50 C80 50 82 52 83 56 L92 86 C93 91 90 94 85 94 L15 94 C10 94 7 91 8 86 L17 56 C18 52 20 50 24 50 Z"
	var keys []string
	for row := range 3 {
		for col := range 3 {
			keys = append(keys, circlePath(36+float64(col)*14, 62+float64(row)*10, 3.6))
		}
	}
	return fill(handset+" "+body, ink) + "\n" + fill(strings.Join(keys, " "), bg)
}

// printerGlyph: a printer with a sheet coming out.
func printerGlyph(ink, bg string) string {
	return fill(roundRect(24, 6, 52, 26, 3)+" "+roundRect(6, 28, 88, 44, 8), ink) + "\n" +
		fill(roundRect(20, 58, 60, 7, 3)+" "+circlePath(80, 42, 5), bg) + "\n" +
		fillStroke(poly(pt{26, 62}, pt{74, 62}, pt{74, 94}, pt{26, 94}), bg, ink, 5) + "\n" +
		stroke("M36 74 H64 M36 84 H56", ink, 5)
}
