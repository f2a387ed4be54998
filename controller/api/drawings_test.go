package api_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	rDrawings = "/v2/projects/{project_id}/drawings"
	rDrawing  = "/v2/projects/{project_id}/drawings/{drawing_id}"
	// The SVG of GNS3's observed create reply.
	rectSVG = `<svg height="100" width="200"><rect height="100" width="200" fill="#ffffff" /></svg>`
)

// Drawings as GNS3 2.2 answers them, with
// the notifications the GUI and web UI rely on, persisted in the file.
func TestDrawingsAnswerAsGNS3AndAreAnnounced(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "draw"}, 201)["project_id"].(string)
	ls := l.listenHTTP("/v2/projects/" + pid + "/notifications")
	base := "/v2/projects/" + pid + "/drawings"

	// The observed create: 201, keys sorted, defaults as GNS3's.
	d := l.call("POST", base, map[string]any{"svg": rectSVG, "x": 10, "y": 20, "z": 1}, 201)
	if got := keys(d); !slices.Equal(got, []string{"drawing_id", "locked", "project_id", "rotation", "svg", "x", "y", "z"}) {
		t.Fatalf("drawing keys %v", got)
	}
	if d["project_id"] != pid || d["svg"] != rectSVG || d["x"] != 10.0 || d["z"] != 1.0 || d["locked"] != false || d["rotation"] != 0.0 {
		t.Fatalf("created %v", d)
	}
	id := d["drawing_id"].(string)
	if e := ls.expect(t, "drawing.created")[0]; e.Event["drawing_id"] != id || e.Event["svg"] != rectSVG {
		t.Fatalf("drawing.created %v", e.Event)
	}
	// Defaults: z 2, "<svg></svg>".
	def := l.call("POST", base, map[string]any{}, 201)
	if def["z"] != 2.0 || def["svg"] != "<svg></svg>" || def["x"] != 0.0 {
		t.Fatalf("defaults %v", def)
	}
	ls.expect(t, "drawing.created")
	// An existing id: 201 with that drawing unchanged, no event.
	if again := l.call("POST", base, map[string]any{"drawing_id": id, "x": 999}, 201); again["x"] != 10.0 {
		t.Fatalf("re-create changed the drawing: %v", again)
	}
	// PUT: 201 with the svg; the event without it unless it changed.
	if u := l.call("PUT", base+"/"+id, map[string]any{"x": 11}, 201); u["x"] != 11.0 || u["svg"] != rectSVG {
		t.Fatalf("update reply %v", u)
	}
	e := ls.expect(t, "drawing.updated")[0]
	if _, has := e.Event["svg"]; has || e.Event["x"] != 11.0 || e.Event["y"] != 20.0 || e.Event["project_id"] != pid {
		t.Fatalf("drawing.updated without an svg change: %v", e.Event)
	}
	// A no-op PUT (the GUI sends one per mouse release) announces nothing:
	// the next event is the one of the following real change.
	l.call("PUT", base+"/"+id, map[string]any{"x": 11, "y": 20}, 201)
	l.call("PUT", base+"/"+id, map[string]any{"svg": `<svg height="5" width="5"><ellipse rx="2" ry="2" /></svg>`, "rotation": 90}, 201)
	if e := ls.expect(t, "drawing.updated")[0]; e.Event["rotation"] != 90.0 || !strings.Contains(e.Event["svg"].(string), "ellipse") {
		t.Fatalf("drawing.updated with an svg change: %v", e.Event)
	}
	if got := l.call("GET", base+"/"+id, nil, 200); got["rotation"] != 90.0 {
		t.Fatalf("get %v", got)
	}
	// Locked: 409 with GNS3's message; unlocked: 204 and drawing.deleted.
	l.call("PUT", base+"/"+id, map[string]any{"locked": true}, 201)
	ls.expect(t, "drawing.updated")
	if r := l.call("DELETE", base+"/"+id, nil, 409); r["message"] != "Drawing ID "+id+" cannot be deleted because it is locked" {
		t.Fatalf("locked delete %v", r)
	}
	l.call("DELETE", base+"/"+def["drawing_id"].(string), nil, 204)
	if e := ls.expect(t, "drawing.deleted")[0]; e.Event["drawing_id"] != def["drawing_id"] || e.Event["svg"] != "<svg></svg>" {
		t.Fatalf("drawing.deleted %v", e.Event)
	}
	ghost := "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
	if r := l.call("GET", base+"/"+ghost, nil, 404); r["message"] != "Drawing ID "+ghost+" doesn't exist" {
		t.Fatalf("unknown drawing %v", r)
	}
	l.call("PUT", base+"/"+ghost, map[string]any{"x": 1}, 404)
	if st := l.call("GET", "/v2/projects/"+pid+"/stats", nil, 200); st["drawings"] != 1.0 {
		t.Fatalf("stats %v", st)
	}

	// Closed: the list is the file's entries; changes are 403.
	l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
	l.call("POST", base, map[string]any{}, 403)
	l.call("GET", base+"/"+id, nil, 403)
	req := l.list(base)
	if len(req) != 1 || req[0]["drawing_id"] != id || req[0]["locked"] != true || req[0]["project_id"] != nil {
		t.Fatalf("closed project's drawings %v", req)
	}
	// Reopened, the drawing is back as it was.
	l.call("POST", "/v2/projects/"+pid+"/open", nil, 201)
	if got := l.call("GET", base+"/"+id, nil, 200); got["rotation"] != 90.0 || got["locked"] != true || got["x"] != 11.0 {
		t.Fatalf("reopened %v", got)
	}
}

// The GUI re-creates a drawing with drawing_id null (GNS3 refuses it);
// project_id is accepted only when it is the path's.
func TestDrawingRequestsGNS3Refuses(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "draw"}, 201)["project_id"].(string)
	base := "/v2/projects/" + pid + "/drawings"
	d := l.call("POST", base, map[string]any{"drawing_id": nil, "project_id": pid, "svg": rectSVG}, 201)
	if len(d["drawing_id"].(string)) != 36 {
		t.Fatalf("null id: %v", d)
	}
	l.call("POST", base, map[string]any{"project_id": "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"}, 400)
	l.call("POST", base, map[string]any{"rotation": 361}, 400)
	l.call("POST", base, map[string]any{"color": "red"}, 400)
	if n := len(l.list(base)); n != 1 {
		t.Fatalf("refused requests made drawings: %d", n)
	}
}

// SVG is bounded, must be one well-formed <svg> document, and loses what
// could run or fetch something in a client; a refused one changes nothing
// and the project file stays readable.
func TestDrawingSVGIsCheckedAndCleaned(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "draw"}, 201)["project_id"].(string)
	base := "/v2/projects/" + pid + "/drawings"
	for _, bad := range []string{
		"<svg><rect></svg>", "not xml", "<html></html>", "<svg></svg><svg></svg>",
		`<svg><text>&ent;</text></svg>`, strings.Repeat("x", 600) + "<svg>",
	} {
		if r := l.call("POST", base, map[string]any{"svg": bad}, 400); !strings.HasPrefix(r["message"].(string), "Invalid SVG") {
			t.Errorf("%.40q: %v", bad, r)
		}
	}
	big := "<svg><text>" + strings.Repeat("a", 4<<20) + "</text></svg>"
	l.call("POST", base, map[string]any{"svg": big}, 413)
	if n := len(l.list(base)); n != 0 {
		t.Fatalf("refused SVGs made %d drawings", n)
	}
	hostile := `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="alert(1)">` +
		`<script>alert(2)</script><foreignObject><div>x</div></foreignObject>` +
		`<a xlink:href="javascript:alert(3)"><text onclick="alert(4)" x="1">hi &amp; bye</text></a>` +
		`<image href="https://evil.example/x.png" width="1" height="1"/>` +
		`<rect style="fill: url(http://evil.example/p)" width="1" height="1"/>` +
		`<style>@import url(http://evil.example/s.css);</style>` +
		`<rect fill="url(#grad)" width="2" height="2"/></svg>`
	d := l.call("POST", base, map[string]any{"svg": hostile}, 201)
	svg := d["svg"].(string)
	for _, gone := range []string{"script", "alert", "onload", "onclick", "foreignObject", "evil.example", "javascript"} {
		if strings.Contains(svg, gone) {
			t.Errorf("%q survived: %s", gone, svg)
		}
	}
	for _, kept := range []string{`fill="url(#grad)"`, "hi &amp; bye", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "<text x=\"1\">"} {
		if !strings.Contains(svg, kept) {
			t.Errorf("%q lost: %s", kept, svg)
		}
	}
	// A picture as GNS3's "Insert picture" makes it: the picture goes to
	// project-files/images/<md5>.png and reads give GNS3's wrapper of it
	// (as GNS3 stores pictures), so the file stays small.
	pixel := onePixelPNG(t)
	b64 := base64.StdEncoding.EncodeToString(pixel)
	pic := `<svg height="1" width="1"><image height="1" width="1" xlink:href="data:image/png;base64,` + b64 + `" />` +
		strings.Repeat(" ", 1100) + `</svg>`
	wrapped := "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" height=\"1\" width=\"1\">\n" +
		"<image height=\"1\" width=\"1\" xlink:href=\"data:image/png;base64," + b64 + "\" />\n</svg>"
	p := l.call("POST", base, map[string]any{"svg": pic}, 201)
	if p["svg"] != wrapped {
		t.Fatalf("picture reads back as %.300v", p["svg"])
	}
	proj := l.call("GET", "/v2/projects/"+pid, nil, 200)
	sum := md5.Sum(pixel)
	if got, err := os.ReadFile(filepath.Join(proj["path"].(string), "project-files", "images", hex.EncodeToString(sum[:])+".png")); err != nil || !bytes.Equal(got, pixel) {
		t.Fatalf("the picture file: %v", err)
	}
	// Sent again as read (the GUI's PUT after a move): nothing changes.
	l.call("PUT", base+"/"+p["drawing_id"].(string), map[string]any{"svg": wrapped}, 201)
	l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
	l.call("POST", "/v2/projects/"+pid+"/open", nil, 201)
	if got := l.call("GET", base+"/"+p["drawing_id"].(string), nil, 200); got["svg"] != wrapped {
		t.Fatalf("picture after reopening: %.200v", got["svg"])
	}
	data, err := os.ReadFile(filepath.Join(proj["path"].(string), proj["filename"].(string)))
	if err != nil || len(data) > 8000 || strings.Contains(string(data), "base64") || !strings.Contains(string(data), hex.EncodeToString(sum[:])+".png") {
		t.Fatalf("project file (%d bytes, %v) does not name the picture's file", len(data), err)
	}
	// Not a picture GNS3 splits (two children, an undecodable payload): a
	// long SVG is kept whole in a .svg file.
	for _, other := range []string{
		`<svg height="1" width="1"><image height="1" width="1" xlink:href="data:image/png;base64,` + b64 + `" /><rect width="1" height="1"/>` + strings.Repeat(" ", 1100) + `</svg>`,
		`<svg height="1" width="1"><image height="1" width="1" xlink:href="data:image/png;base64,` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 900)) + `" /></svg>`,
	} {
		if got := l.call("POST", base, map[string]any{"svg": other}, 201); got["svg"] != other {
			t.Errorf("changed: %.200v", got["svg"])
		}
	}
}

func onePixelPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// list GETs a JSON array.
func (l *live) list(path string) []map[string]any {
	l.t.Helper()
	resp, err := http.Get(l.url + path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		l.t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	return out
}
