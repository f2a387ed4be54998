package icons

import "fmt"

// Affinity shapes and colours: every affinity icon exists in each
// combination, under affinity/<shape>/<colour>/.
var (
	affinityShapes = []string{"circle", "square"}
	affinityColors = []string{"blue", "gray", "green", "red"}
)

// palette is a theme colour in three tones: the lit top of the badge, its
// body, and its rim.
type palette struct{ light, base, dark string }

var palettes = map[string]palette{
	"blue":  {"#4f93dc", "#2d6cb5", "#1d4c86"},
	"gray":  {"#8d95a3", "#6b7280", "#4a505c"},
	"green": {"#4cbb78", "#2e9a57", "#1e6e3e"},
	"red":   {"#ea6660", "#cf3d36", "#992520"},
}

// affinityFiles maps each affinity file name (without .svg) to its glyph.
// The names are the ids GNS3 clients ask for.
var affinityFiles = map[string]string{
	"atm":               "atm",
	"client":            "monitor",
	"client_vm":         "monitor_vm",
	"cloud":             "cloud",
	"docker":            "containers",
	"firewall":          "flame",
	"firewall3":         "bricks",
	"hub":               "hub",
	"ip_phone":          "phone",
	"isdn":              "bolt",
	"laptop":            "laptop",
	"nat":               "nat",
	"printer":           "printer",
	"router":            "router",
	"server":            "server",
	"switch":            "switch",
	"switch_multilayer": "switch_multilayer",
	"virtualbox":        "cube",
	"vm":                "windows",
	"vmware":            "layers",
	"wifi":              "wifi",
}

// affinitySize is the side of every affinity icon, in pixels.
const affinitySize = 60

// affinity draws a glyph in white on a badge of the theme colour: a disc
// or a rounded square, lit from the top.
func affinity(shape, color string, g glyph) []byte {
	p := palettes[color]
	const s = affinitySize
	c := newCanvas(s, s)
	body := c.linear(0, 0, 0, s, stop{0, p.light}, stop{1, p.base})
	var badge string
	switch shape {
	case "circle":
		badge = circlePath(s/2, s/2, s/2-1.5)
	case "square":
		badge = roundRect(1.5, 1.5, s-3, s-3, 12)
	default:
		panic(fmt.Sprintf("icons: unknown affinity shape %q", shape))
	}
	c.add(fillStroke(badge, body, p.dark, 2))
	const inset = 12 // glyph box: 36 px, centred
	c.add(group(box(inset, inset, s-2*inset, s-2*inset), g("#ffffff", p.base)))
	return c.bytes()
}
