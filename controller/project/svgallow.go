package project

// The allowlist of sanitizeSVG: SVG's drawing vocabulary (shapes, text,
// paint servers, filters, markers, masks, animation), by lower-case local
// name. What is not here is dropped; <style>, <a>, <image>, <use> and the
// animations are here, and their values are checked one by one.

var svgElements = setOf(
	"svg", "g", "defs", "desc", "title", "metadata", "symbol", "use", "switch", "image", "a", "view",
	"path", "rect", "circle", "ellipse", "line", "polyline", "polygon",
	"text", "tspan", "textpath", "tref",
	"marker", "pattern", "clippath", "mask", "lineargradient", "radialgradient", "stop", "style",
	"filter", "feblend", "fecolormatrix", "fecomponenttransfer", "fecomposite", "feconvolvematrix",
	"fediffuselighting", "fedisplacementmap", "fedistantlight", "fedropshadow", "feflood",
	"fefunca", "fefuncb", "fefuncg", "fefuncr", "fegaussianblur", "feimage", "femerge", "femergenode",
	"femorphology", "feoffset", "fepointlight", "fespecularlighting", "fespotlight", "fetile",
	"feturbulence",
	"animate", "animatecolor", "animatemotion", "animatetransform", "set", "mpath",
)

var svgAttributes = setOf(
	// Core and structure.
	"id", "class", "style", "lang", "tabindex", "transform", "viewbox", "preserveaspectratio",
	"version", "baseprofile", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r",
	"rx", "ry", "fx", "fy", "fr", "d", "points", "pathlength", "href", "src", "type", "media", "title",
	"target", "zoomandpan", "requiredfeatures", "requiredextensions", "systemlanguage",
	// Text.
	"dx", "dy", "rotate", "textlength", "lengthadjust", "startoffset", "method", "spacing", "side",
	// Markers, patterns, masks, gradients.
	"refx", "refy", "markerwidth", "markerheight", "markerunits", "orient", "patternunits",
	"patterncontentunits", "patterntransform", "clippathunits", "maskunits", "maskcontentunits",
	"gradientunits", "gradienttransform", "spreadmethod", "offset",
	// Filters.
	"filterunits", "primitiveunits", "in", "in2", "result", "stddeviation", "edgemode", "mode",
	"operator", "k1", "k2", "k3", "k4", "values", "tablevalues", "slope", "intercept", "amplitude",
	"exponent", "order", "kernelmatrix", "divisor", "bias", "targetx", "targety", "kernelunitlength",
	"preservealpha", "surfacescale", "diffuseconstant", "specularconstant", "specularexponent",
	"limitingconeangle", "pointsatx", "pointsaty", "pointsatz", "azimuth", "elevation", "z", "scale",
	"xchannelselector", "ychannelselector", "radius", "basefrequency", "numoctaves", "seed",
	"stitchtiles",
	// Animation (animatesUnsafe checks what they set).
	"attributename", "attributetype", "begin", "dur", "end", "min", "max", "restart", "repeatcount",
	"repeatdur", "calcmode", "keytimes", "keysplines", "from", "to", "by", "additive", "accumulate",
	"path", "keypoints",
	// Presentation.
	"alignment-baseline", "baseline-shift", "clip", "clip-path", "clip-rule", "color",
	"color-interpolation", "color-interpolation-filters", "color-profile", "color-rendering",
	"cursor", "direction", "display", "dominant-baseline", "enable-background", "fill",
	"fill-opacity", "fill-rule", "filter", "flood-color", "flood-opacity", "font", "font-family",
	"font-size", "font-size-adjust", "font-stretch", "font-style", "font-variant", "font-weight",
	"glyph-orientation-horizontal", "glyph-orientation-vertical", "image-rendering", "isolation",
	"kerning", "letter-spacing", "lighting-color", "marker", "marker-end", "marker-mid",
	"marker-start", "mask", "mix-blend-mode", "opacity", "overflow", "paint-order", "pointer-events",
	"shape-rendering", "stop-color", "stop-opacity", "stroke", "stroke-dasharray",
	"stroke-dashoffset", "stroke-linecap", "stroke-linejoin", "stroke-miterlimit", "stroke-opacity",
	"stroke-width", "text-anchor", "text-decoration", "text-rendering", "transform-origin",
	"unicode-bidi", "vector-effect", "visibility", "word-spacing", "writing-mode",
)

func setOf(names ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}
