package icons

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

var (
	svgOpen  = regexp.MustCompile(`<svg [^>]*width="([0-9.]+)" height="([0-9.]+)"[^>]*>`)
	xmlDecl  = regexp.MustCompile(`<\?xml[^>]*\?>\s*`)
	gradient = regexp.MustCompile(`(id="|url\(#)(g[0-9]+)`)
)

// Sheet lays the given icons out on one SVG page, a cell each with its
// name under it, so they can be rasterised and looked at together. Cells
// are cell×cell pixels; icons are drawn at scale.
func Sheet(files map[string][]byte, names []string, cols int, cell, scale float64) []byte {
	rows := (len(names) + cols - 1) / cols
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s">`+"\n", num(float64(cols)*cell), num(float64(rows)*cell))
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	for i, name := range names {
		x, y := float64(i%cols)*cell, float64(i/cols)*cell
		doc := xmlDecl.ReplaceAllString(string(files[name]), "")
		// Each icon numbers its gradients from g1: make them unique on the page.
		doc = gradient.ReplaceAllString(doc, fmt.Sprintf("${1}i%d${2}", i))
		m := svgOpen.FindStringSubmatch(doc)
		if m == nil {
			continue
		}
		var w, h float64
		fmt.Sscan(m[1], &w)
		fmt.Sscan(m[2], &h)
		open := fmt.Sprintf(`<svg x="%s" y="%s" width="%s" height="%s" viewBox="0 0 %s %s">`,
			num(x+(cell-w*scale)/2), num(y+(cell-16-h*scale)/2), num(w*scale), num(h*scale), m[1], m[2])
		b.WriteString(strings.Replace(doc, m[0], open, 1))
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-family="sans-serif" font-size="10" text-anchor="middle" fill="#333">%s</text>`+"\n",
			num(x+cell/2), num(y+cell-5), strings.TrimSuffix(name[strings.LastIndexByte(name, '/')+1:], ".svg"))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
