package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/symbols"
)

const (
	rSymbols    = "/v2/symbols"
	rDefaults   = "/v2/default_symbols"
	rRaw        = "/v2/symbols/{symbol_id:.+}/raw"
	rDimensions = "/v2/symbols/{symbol_id:.+}/dimensions"
)

// symbolServer is the API with a symbol library whose folder is
// <data>/symbols; nothing else is wired.
type symbolServer struct {
	t    *testing.T
	app  *fiber.App
	lib  *symbols.Library
	data string
}

func newSymbolServer(t *testing.T) *symbolServer {
	t.Helper()
	data := t.TempDir()
	lib := symbols.New(filepath.Join(data, "symbols"), nil)
	app, _, err := api.New(api.Config{Symbols: lib, Version: "2.2.59", Context: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	return &symbolServer{t: t, app: app, lib: lib, data: data}
}

type symReply struct {
	status int
	header http.Header
	body   []byte
}

func (r symReply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// send makes a request with a raw target, so percent-encoding reaches
// the server exactly as written.
func (s *symbolServer) send(t *testing.T, method, target string, body []byte) symReply {
	t.Helper()
	// app.Test writes RequestURI, which NewRequest keeps verbatim.
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	resp, err := s.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return symReply{status: resp.StatusCode, header: resp.Header, body: data}
}

// expect sends a request and checks its status, X-Route and Content-Type.
func (s *symbolServer) expect(t *testing.T, method, target string, body []byte, status int, route, ctype string) symReply {
	t.Helper()
	r := s.send(t, method, target, body)
	if r.status != status {
		t.Fatalf("%s %s = %d %s, want %d", method, target, r.status, r.body, status)
	}
	if got := r.header.Get("X-Route"); got != route {
		t.Fatalf("%s %s: X-Route %q, want %q", method, target, got, route)
	}
	if got := r.header.Get("Content-Type"); got != ctype {
		t.Fatalf("%s %s: Content-Type %q, want %q", method, target, got, ctype)
	}
	return r
}

func (s *symbolServer) builtin(id string) []byte {
	s.t.Helper()
	f, err := s.lib.Open(id)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		s.t.Fatal(err)
	}
	return data
}

func svgImage(w, h int) []byte {
	return fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d"><circle r="3"/></svg>`, w, h)
}

// gnsEscape percent-encodes an id as the GNS3 GUI does (Python's quote:
// ":" becomes %3A, "/" stays).
func gnsEscape(id string) string {
	return strings.ReplaceAll(id, ":", "%3A")
}

// componentEscape percent-encodes an id as JavaScript's
// encodeURIComponent does, "/" included.
func componentEscape(id string) string {
	return strings.NewReplacer(":", "%3A", "/", "%2F").Replace(id)
}

func TestSymbolListHasGNS3ShapeAndOrder(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	s.expect(t, "POST", "/v2/symbols/mine.svg/raw", svgImage(20, 20), 204, rRaw, "")
	r := s.expect(t, "GET", "/v2/symbols", nil, 200, rSymbols, "application/json")
	var list []map[string]any
	r.json(t, &list)
	var keys []string
	for _, e := range list {
		keys = append(keys, e["theme"].(string)+"\x00"+e["symbol_id"].(string))
		var members []string
		for k := range e {
			members = append(members, k)
		}
		slices.Sort(members)
		// The GUI refuses entries with other members.
		if !slices.Equal(members, []string{"builtin", "filename", "symbol_id", "theme"}) {
			t.Fatalf("entry %v has members %v", e, members)
		}
	}
	if !slices.IsSorted(keys) {
		t.Error("entries are not sorted by theme, then symbol_id")
	}
	find := func(id string) map[string]any {
		for _, e := range list {
			if e["symbol_id"] == id {
				return e
			}
		}
		t.Fatalf("%s is not listed", id)
		return nil
	}
	for id, want := range map[string]map[string]any{
		":/symbols/classic/computer.svg":             {"filename": "computer.svg", "builtin": true, "theme": "Classic"},
		":/symbols/affinity/circle/blue/router.svg":  {"filename": "router.svg", "builtin": true, "theme": "Affinity-circle-blue"},
		":/symbols/affinity/square/green/switch.svg": {"filename": "switch.svg", "builtin": true, "theme": "Affinity-square-green"},
		"mine.svg": {"filename": "mine.svg", "builtin": false, "theme": "Custom symbols"},
	} {
		e := find(id)
		for k, v := range want {
			if e[k] != v {
				t.Errorf("%s: %s = %v, want %v", id, k, e[k], v)
			}
		}
	}
}

// Every id default_symbols names downloads as a well-formed SVG with a
// positive size, however the client encodes it.
func TestEveryDefaultSymbolDownloads(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	r := s.expect(t, "GET", "/v2/default_symbols", nil, 200, rDefaults, "application/json")
	var themes map[string]map[string]string
	r.json(t, &themes)
	if len(themes) != 7 {
		t.Fatalf("%d themes: %s", len(themes), r.body)
	}
	ids := make(map[string]bool)
	for theme, roles := range themes {
		if len(roles) < 15 {
			t.Errorf("%s has %d roles", theme, len(roles))
		}
		for _, id := range roles {
			ids[id] = true
		}
	}
	for id := range ids {
		want := s.builtin(id)
		for _, target := range []string{
			"/v2/symbols/" + gnsEscape(id) + "/raw",      // the GUI
			"/v2/symbols/" + url.PathEscape(id) + "/raw", // encodeURIComponent: "/" as %2F
		} {
			r := s.expect(t, "GET", target, nil, 200, rRaw, "image/svg+xml")
			if !bytes.Equal(r.body, want) {
				t.Fatalf("%s: body differs from %s", target, id)
			}
			if r.header.Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Fatalf("%s: Content-Length %q for %d bytes", target, r.header.Get("Content-Length"), len(want))
			}
		}
		if !bytes.HasPrefix(want, []byte("<?xml")) || !bytes.Contains(want, []byte("<svg ")) {
			t.Fatalf("%s is not an SVG document", id)
		}
		d := s.expect(t, "GET", "/v2/symbols/"+gnsEscape(id)+"/dimensions", nil, 200, rDimensions, "application/json")
		var size map[string]int
		d.json(t, &size)
		if len(size) != 2 || size["width"] <= 0 || size["height"] <= 0 {
			t.Fatalf("%s dimensions %s", id, d.body)
		}
	}
}

func TestSymbolIDsArriveInEveryEncodingClientsUse(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	router := s.builtin(":/symbols/classic/router.svg")
	for name, target := range map[string]string{
		"literal":                  "/v2/symbols/:/symbols/classic/router.svg/raw",
		"colon encoded (GNS3 GUI)": "/v2/symbols/%3A/symbols/classic/router.svg/raw",
		"everything encoded":       "/v2/symbols/%3A%2Fsymbols%2Fclassic%2Frouter.svg/raw",
		"lower-case escapes":       "/v2/symbols/%3a%2fsymbols%2fclassic%2frouter.svg/raw",
		"double encoded":           "/v2/symbols/%253A%252Fsymbols%252Fclassic%252Frouter.svg/raw",
		"GNS3 short id":            "/v2/symbols/%3A/symbols/router.svg/raw",
		"query string ignored":     "/v2/symbols/%3A/symbols/classic/router.svg/raw?x=1",
	} {
		t.Run(name, func(t *testing.T) {
			r := s.expect(t, "GET", target, nil, 200, rRaw, "image/svg+xml")
			if !bytes.Equal(r.body, router) {
				t.Errorf("%s did not serve the classic router", target)
			}
		})
	}
	t.Run("percent sign in a custom name", func(t *testing.T) {
		// "100%" is sent as 100%25; the second decoding leaves "%.s" alone.
		s.expect(t, "POST", "/v2/symbols/100%25.svg/raw", svgImage(9, 9), 204, rRaw, "")
		if _, err := os.Stat(filepath.Join(s.data, "symbols", "100%.svg")); err != nil {
			t.Fatal(err)
		}
		r := s.expect(t, "GET", "/v2/symbols/100%25.svg/raw", nil, 200, rRaw, "image/svg+xml")
		if !bytes.Equal(r.body, svgImage(9, 9)) {
			t.Errorf("got %q", r.body)
		}
	})
}

// GNS3 answers an unknown id with a picture, not 404, and clients rely on
// it: the classic file of the same base name, else the computer.
func TestUnknownSymbolsFallBackLikeGNS3(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	computer := s.builtin(":/symbols/classic/computer.svg")
	r := s.expect(t, "GET", "/v2/symbols/404.png/raw", nil, 200, rRaw, "image/svg+xml")
	if !bytes.Equal(r.body, computer) {
		t.Error("an unknown id did not serve the computer")
	}
	var size map[string]int
	s.expect(t, "GET", "/v2/symbols/404.png/dimensions", nil, 200, rDimensions, "application/json").json(t, &size)
	if size["width"] != 65 || size["height"] != 59 {
		t.Errorf("unknown id measures %v, want the computer's 65×59", size)
	}
	s.expect(t, "GET", "/v2/symbols/%3A/symbols/computer.svg/dimensions", nil, 200, rDimensions, "application/json").json(t, &size)
	if size["width"] != 65 || size["height"] != 59 {
		t.Errorf("the node default measures %v, want 65×59", size)
	}
}

// An unknown id still gets a picture (GNS3 clients draw every node from
// its symbol and draw nothing for a symbol that fails), but the answer
// says it is a stand-in: X-Symbol-Served names the symbol sent, so a
// missing icon shows in any HTTP trace rather than passing for the real
// one. A symbol served as asked carries no such header.
func TestUnknownSymbolGetsThePictureGNS3ClientsNeedAndAHeaderNamingTheStandIn(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	r := s.expect(t, "GET", "/v2/symbols/no/such/icon.svg/raw", nil, 200, rRaw, "image/svg+xml")
	if got := r.header.Get("X-Symbol-Served"); got != ":/symbols/classic/computer.svg" {
		t.Errorf("unknown id: X-Symbol-Served %q, want the computer", got)
	}
	r = s.expect(t, "GET", "/v2/symbols/"+gnsEscape(":/symbols/computer.svg")+"/raw", nil, 200, rRaw, "image/svg+xml")
	if got := r.header.Get("X-Symbol-Served"); got != ":/symbols/classic/computer.svg" {
		t.Errorf("GNS3 short id: X-Symbol-Served %q, want the classic file it resolves to", got)
	}
	r = s.expect(t, "GET", "/v2/symbols/"+gnsEscape(":/symbols/classic/asa.svg")+"/raw", nil, 200, rRaw, "image/svg+xml")
	if got, ok := r.header["X-Symbol-Served"]; ok {
		t.Errorf("a built-in served as asked carries X-Symbol-Served %q", got)
	}
}

func TestUploadThenListThenDownload(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, image.NewRGBA(image.Rect(0, 0, 12, 8))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, ctype string
		body            []byte
		w, h            int
	}{
		{"svg", "my%20router.svg", "image/svg+xml", svgImage(70, 50), 70, 50},
		{"png", "photo.png", "image/png", pngData.Bytes(), 12, 8},
		{"replacing a file refreshes its size", "my%20router.svg", "image/svg+xml", svgImage(30, 40), 30, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.expect(t, "POST", "/v2/symbols/"+tt.id+"/raw", tt.body, 204, rRaw, "")
			var list []map[string]any
			s.expect(t, "GET", "/v2/symbols", nil, 200, rSymbols, "application/json").json(t, &list)
			name, _ := url.PathUnescape(tt.id)
			if !slices.ContainsFunc(list, func(e map[string]any) bool {
				return e["symbol_id"] == name && e["filename"] == name && e["builtin"] == false && e["theme"] == "Custom symbols"
			}) {
				t.Fatalf("%s is not listed as a custom symbol", name)
			}
			r := s.expect(t, "GET", "/v2/symbols/"+tt.id+"/raw", nil, 200, rRaw, tt.ctype)
			if !bytes.Equal(r.body, tt.body) {
				t.Error("downloaded bytes differ from the upload")
			}
			if r.header.Get("Last-Modified") == "" {
				t.Error("no Last-Modified")
			}
			var size map[string]int
			s.expect(t, "GET", "/v2/symbols/"+tt.id+"/dimensions", nil, 200, rDimensions, "application/json").json(t, &size)
			if size["width"] != tt.w || size["height"] != tt.h {
				t.Errorf("dimensions %v, want %d×%d", size, tt.w, tt.h)
			}
		})
	}
}

// symbolTree lists every path under dir, relative and sorted.
func symbolTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// No encoding of a path out of the symbols folder reads or writes there.
func TestSymbolIDsCannotLeaveTheSymbolsFolder(t *testing.T) {
	t.Parallel()
	secret := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><!-- secret --></svg>`)
	tests := []struct {
		name string
		// escape is an id naming "<data>/escape.svg", next to the
		// symbols folder, in some encoding; {abs} is the data dir's
		// absolute path, {rel} the same without its leading "/".
		escape string
	}{
		{"dot dot slash", "../escape.svg"},
		{"encoded dot dot slash", "%2e%2e%2fescape.svg"},
		{"dot dot encoded slash", "..%2fescape.svg"},
		{"two levels", "%2e%2e/%2e%2e/x/../escape.svg"},
		{"absolute path", "{abs}/escape.svg"},
		{"encoded absolute path", "%2F{rel}%2Fescape.svg"},
		{"backslash", "..%5cescape.svg"},
		{"literal backslash", `..\escape.svg`},
		{"double encoded", "%252e%252e%252fescape.svg"},
		{"double encoded backslash", "%252e%252e%255cescape.svg"},
		{"built-in prefix", "%3A/symbols/../../escape.svg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSymbolServer(t)
			abs := filepath.ToSlash(s.data)
			id := strings.NewReplacer("{abs}", abs, "{rel}", strings.TrimPrefix(abs, "/")).Replace(tt.escape)
			if err := os.WriteFile(filepath.Join(s.data, "escape.svg"), secret, 0o644); err != nil {
				t.Fatal(err)
			}
			// With the folder there, "symbols/../escape.svg" would resolve.
			if err := os.Mkdir(filepath.Join(s.data, "symbols"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, suffix := range []string{"/raw", "/dimensions"} {
				r := s.send(t, "GET", "/v2/symbols/"+id+suffix, nil)
				if r.status != 200 || !strings.HasPrefix(r.header.Get("X-Route"), "/v2/symbols/{symbol_id:.+}/") {
					t.Fatalf("GET %s = %d %s, want the fallback", id+suffix, r.status, r.body)
				}
				if bytes.Contains(r.body, []byte("secret")) || bytes.Contains(r.body, []byte(`"width":1,`)) {
					t.Fatalf("GET %s served the file outside the folder: %d %s", id+suffix, r.status, r.body)
				}
			}
			r := s.send(t, "POST", "/v2/symbols/"+id+"/raw", svgImage(5, 5))
			if r.status != 204 {
				t.Fatalf("POST %s = %d %s", id, r.status, r.body)
			}
			// Flattened into the folder, as GNS3 does; the file outside is untouched.
			if got, want := symbolTree(t, s.data), []string{"escape.svg", "symbols", "symbols/escape.svg"}; !slices.Equal(got, want) {
				t.Errorf("data dir holds %v, want %v", got, want)
			}
			if got, _ := os.ReadFile(filepath.Join(s.data, "escape.svg")); !bytes.Equal(got, secret) {
				t.Error("the file outside the folder was overwritten")
			}
		})
	}
}

func TestUploadsThatAreNotImagesAreRefused(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	for name, body := range map[string]string{
		"html":  "<html><script>alert(1)</script></html>",
		"text":  "hello",
		"empty": "",
	} {
		t.Run(name, func(t *testing.T) {
			r := s.expect(t, "POST", "/v2/symbols/page.svg/raw", []byte(body), 400, rRaw, "application/json")
			var e map[string]any
			r.json(t, &e)
			if e["status"] != 400.0 || e["message"] == "" || e["path"] != rRaw || e["method"] != "POST" {
				t.Errorf("error body %s", r.body)
			}
		})
	}
	for _, id := range []string{"..", "a/..", "%2e%2e", ".hidden.svg"} {
		t.Run("name "+id, func(t *testing.T) {
			s.expect(t, "POST", "/v2/symbols/"+id+"/raw", svgImage(5, 5), 400, rRaw, "application/json")
		})
	}
	if got := symbolTree(t, s.data); len(got) > 1 || (len(got) == 1 && got[0] != "symbols") {
		t.Errorf("refused uploads left %v", got)
	}
}

func TestDimensionsOfABrokenImageIsAJSONNotFound(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	dir := filepath.Join(s.data, "symbols")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Put there by hand: uploads refuse it.
	if err := os.WriteFile(filepath.Join(dir, "broken.png"), []byte("\x89PNG\r\n\x1a\nshort"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.expect(t, "GET", "/v2/symbols/broken.png/dimensions", nil, 404, rDimensions, "application/json")
	var e map[string]any
	r.json(t, &e)
	if len(e) != 2 || e["status"] != 404.0 || !strings.Contains(e["message"].(string), "broken.png") {
		t.Errorf("error body %s", r.body)
	}
	// The file itself is still served as it is.
	s.expect(t, "GET", "/v2/symbols/broken.png/raw", nil, 200, rRaw, "image/png")
}

// listen serves the API on a loopback socket: body limits and broken
// uploads are the server's business before any handler runs, which
// app.Test cannot show.
func (s *symbolServer) listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.app.Listener(ln) }()
	t.Cleanup(func() {
		if err := s.app.Shutdown(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// rawRequest writes head and body on a new connection, closes its write
// side, and reads the reply, if any, until the server closes the
// connection. The body is sent whole: a server that closes a connection
// with unread data resets it, which may lose the reply.
func rawRequest(t *testing.T, addr, head string, body []byte) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// The server may answer (a 413) and close before the whole body is
	// sent: the write or the half-close then fails, and the answer is
	// still there to read.
	if _, err := conn.Write(body); err != nil {
		t.Logf("writing the body: %v", err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Logf("half-closing: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil // closed without a reply
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	io.Copy(io.Discard, conn) // until the server is done with the connection
	return resp
}

func TestOversizeUploadIs413AndWritesNothing(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	addr := s.listen(t)
	tests := []struct {
		name string
		head string
		body []byte
	}{
		// The body's first bytes are sent: bodies are streamed, and the
		// server (fasthttp) reads up to 8 KiB of one before any handler
		// sees it; a client that announced a length and sent nothing gets
		// a 400 for the body it cut short instead.
		{"announced length", fmt.Sprintf("POST /v2/symbols/big.svg/raw HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", symbols.MaxSize+1), bytes.Repeat([]byte("a"), 16<<10)},
		// Request bodies are streamed (so that project imports never sit in
		// memory): a chunked body is refused once more than the limit came.
		{"chunked", "POST /v2/symbols/big.svg/raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
			fmt.Appendf(nil, "%x\r\n%s\r\n0\r\n\r\n", symbols.MaxSize+1, bytes.Repeat([]byte("a"), symbols.MaxSize+1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := rawRequest(t, addr, tt.head, tt.body)
			if resp == nil {
				t.Fatal("no reply")
			}
			body, _ := io.ReadAll(resp.Body)
			var e map[string]any
			if resp.StatusCode != 413 || json.Unmarshal(body, &e) != nil || e["status"] != 413.0 || e["message"] == "" {
				t.Errorf("reply %d %s, want 413 with a JSON error", resp.StatusCode, body)
			}
			if got := symbolTree(t, s.data); len(got) != 0 {
				t.Errorf("an oversize upload left %v", got)
			}
		})
	}
}

func TestInterruptedUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	s := newSymbolServer(t)
	addr := s.listen(t)
	full := svgImage(20, 20)
	head := fmt.Sprintf("POST /v2/symbols/cut.svg/raw HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(full))
	// The client goes away half way through the body.
	resp := rawRequest(t, addr, head, full[:len(full)/2])
	if resp != nil && resp.StatusCode == 204 {
		t.Error("a half upload was accepted")
	}
	if resp != nil {
		t.Logf("a half upload is answered %d", resp.StatusCode)
	}
	if got := symbolTree(t, s.data); len(got) != 0 {
		t.Errorf("an interrupted upload left %v", got)
	}
	// The server is fine afterwards, and a whole upload works.
	if resp = rawRequest(t, addr, head, full); resp == nil || resp.StatusCode != 204 {
		t.Fatalf("whole upload = %v", resp)
	}
	if got := symbolTree(t, s.data); !slices.Equal(got, []string{"symbols", "symbols/cut.svg"}) {
		t.Errorf("data dir holds %v", got)
	}
}
