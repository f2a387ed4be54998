// Package icons draws labtap's built-in symbols: a few glyphs (our own
// SVG paths) composed into the Classic look and into the Affinity
// circle/square badges in four colours. It is used by the generator
// (go generate in package symbols), which writes the files that package
// symbols embeds, and by the test that checks those files are up to date.
package icons

import (
	"maps"
	"slices"
)

// Generate returns every built-in symbol, keyed by its path below the
// symbols root, e.g. "classic/router.svg" or
// "affinity/circle/blue/router.svg". The output is deterministic.
func Generate() map[string][]byte {
	out := make(map[string][]byte)
	for name, icon := range classicFiles {
		out["classic/"+name+".svg"] = icon.draw().bytesAt(icon.w, icon.h)
	}
	for _, shape := range affinityShapes {
		for _, color := range affinityColors {
			for name, g := range affinityFiles {
				out["affinity/"+shape+"/"+color+"/"+name+".svg"] = affinity(shape, color, glyphs[g])
			}
		}
	}
	return out
}

// Names returns the paths Generate produces, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(Generate()))
}
