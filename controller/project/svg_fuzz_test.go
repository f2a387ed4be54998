package project

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// The allowlist drops what it does not know, with what it holds, and an
// editor's namespaced attributes; drawing vocabulary stays.
func TestSVGAllowlistDropsWhatItDoesNotKnow(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`<svg><marquee><rect width="1"/></marquee><rect width="2"/></svg>`, `<svg><rect width="2"></rect></svg>`},
		{`<svg><portal src="#a"/></svg>`, `<svg></svg>`},
		{`<svg xmlns:inkscape="urn:x"><rect inkscape:label="a" width="2" formaction="x"/></svg>`,
			`<svg xmlns:inkscape="urn:x"><rect width="2"></rect></svg>`},
		{`<svg><h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script></svg>`, `<svg></svg>`},
	} {
		out, err := sanitizeSVG(tc.in)
		if err != nil || out != tc.want {
			t.Errorf("%q: got %q %v, want %q", tc.in, out, err, tc.want)
		}
	}
}

// FuzzSanitizeSVG holds what the sanitizer promises for any input: a
// document it accepts comes out well-formed, holds only allowlisted
// names, no handler, script or foreign reference by an independent
// search, and is a fixed point (cleaning it again changes nothing).
func FuzzSanitizeSVG(f *testing.F) {
	for _, s := range []string{
		`<?xml version="1.0"?><svg height="100" width="200"><rect fill="#ffffff" height="100" width="200"/></svg>`,
		`<svg><style>@imp<!---->ort "http://e/x.css";</style></svg>`,
		`<svg><a href="#x"><set attributeName="href" to="https://e/p"/><text>go</text></a></svg>`,
		`<svg onload="alert(1)"><script>alert(2)</script><foreignObject><p/></foreignObject></svg>`,
		`<svg><image href="data:image/png;base64,AA=="/><use xlink:href="http://e/#a" xmlns:xlink="http://www.w3.org/1999/xlink"/></svg>`,
		`<svg><rect style="fill:u\72l(http://e/x)"/><![CDATA[x]]></svg>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := sanitizeSVG(in)
		if err != nil {
			return
		}
		again, err := sanitizeSVG(out)
		if err != nil || again != out {
			t.Fatalf("not a fixed point: %q -> %q -> %q %v", in, out, again, err)
		}
		if strings.Contains(out, "<![CDATA[") {
			t.Fatalf("CDATA kept: %q", out)
		}
		d := xml.NewDecoder(strings.NewReader(out))
		d.Strict = true
		for {
			tok, err := d.RawToken()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("output not well-formed: %q: %v", out, err)
			}
			e, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			local := strings.ToLower(e.Name.Local)
			if _, ok := svgElements[local]; !ok || local == "script" || local == "foreignobject" {
				t.Fatalf("element <%s> kept: %q", e.Name.Local, out)
			}
			for _, a := range e.Attr {
				n := strings.ToLower(a.Name.Local)
				v := strings.ToLower(strings.Join(strings.Fields(a.Value), ""))
				if strings.HasPrefix(n, "on") && a.Name.Space != "xmlns" {
					t.Fatalf("handler %s kept: %q", a.Name.Local, out)
				}
				if (n == "href" || n == "src") && a.Name.Space != "xmlns" && !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:image/") {
					t.Fatalf("reference %s=%q kept: %q", n, a.Value, out)
				}
				if strings.Contains(v, "javascript:") {
					t.Fatalf("script URL kept: %q", out)
				}
			}
		}
	})
}
