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
