package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/symbols"
)

// symbolJSON is one entry of GET /v2/symbols. The GNS3 GUI refuses entries
// with any other member. Members are in GNS3's (alphabetical) order.
type symbolJSON struct {
	Builtin  bool   `json:"builtin"`
	Filename string `json:"filename"`
	SymbolID string `json:"symbol_id"`
	Theme    string `json:"theme"`
}

// dimensionsJSON is the reply of GET /v2/symbols/{symbol_id:.+}/dimensions.
type dimensionsJSON struct {
	Height int `json:"height"`
	Width  int `json:"width"`
}

// symbolRoutes serves the symbol routes from a library.
type symbolRoutes struct {
	lib *symbols.Library
}

// registerSymbols registers the symbol routes: GET /v2/symbols,
// GET /v2/default_symbols, GET|POST /v2/symbols/{symbol_id:.+}/raw and
// GET /v2/symbols/{symbol_id:.+}/dimensions (issue 5). Without
// Config.Symbols they serve the built-in symbols only and refuse uploads.
func (a *API) registerSymbols(app *fiber.App) {
	lib := a.cfg.Symbols
	if lib == nil {
		lib = symbols.New("", a.log)
	}
	s := &symbolRoutes{lib: lib}
	a.handle(app, "GET", "/v2/symbols", s.list)
	a.handle(app, "GET", "/v2/default_symbols", s.defaults)
	a.handle(app, "GET", "/v2/symbols/{symbol_id:.+}/raw", s.raw)
	a.handle(app, "POST", "/v2/symbols/{symbol_id:.+}/raw", s.upload)
	a.handle(app, "GET", "/v2/symbols/{symbol_id:.+}/dimensions", s.dimensions)
}

func (s *symbolRoutes) list(c *fiber.Ctx) error {
	list, err := s.lib.List()
	if err != nil {
		return err
	}
	out := make([]symbolJSON, 0, len(list))
	for _, sym := range list {
		out = append(out, symbolJSON{Builtin: sym.Builtin, Filename: sym.Filename, SymbolID: sym.ID, Theme: sym.Theme})
	}
	return c.JSON(out)
}

func (s *symbolRoutes) defaults(c *fiber.Ctx) error {
	return c.JSON(symbols.DefaultSymbols())
}

// raw streams a symbol. Like GNS3, an unknown id is answered 200 with the
// picture the fallback chain leads to: clients draw every node from its
// symbol, and draw nothing for one that fails. The library logs it, and
// X-Symbol-Served names the stand-in, so the substitution is visible.
func (s *symbolRoutes) raw(c *fiber.Ctx) error {
	id := symbolID(c)
	f, err := s.lib.Open(id)
	if err != nil {
		return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("Symbol %s not found", id))
	}
	if f.ID != id {
		c.Set("X-Symbol-Served", f.ID)
	}
	c.Set(fiber.HeaderContentType, symbols.ContentType(f.Name))
	if !f.ModTime.IsZero() {
		c.Set(fiber.HeaderLastModified, f.ModTime.UTC().Format(http.TimeFormat))
	}
	// Uploaded SVGs may carry scripts. Browsers never run those in an
	// <img>, but one opened directly would run in the controller's origin
	// (the web UI's): forbid it, and forbid guessing another type.
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	// fasthttp closes f once the body is sent.
	return c.SendStream(f, int(f.Size))
}

// upload stores the raw body as a user symbol (with the
// fixes of 7.18): at most symbols.MaxSize bytes, an SVG, PNG, JPEG or GIF
// image, written whole or not at all. The Fiber app's BodyLimit refuses
// larger bodies before this runs; the library checks again.
func (s *symbolRoutes) upload(c *fiber.Ctx) error {
	id := symbolID(c)
	// The body as received: c.Body() would inflate a Content-Encoding
	// body with no bound on its size.
	err := s.lib.Save(id, bytes.NewReader(c.Request().Body()))
	switch {
	case err == nil:
		return noContent(c)
	case errors.Is(err, symbols.ErrTooLarge):
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, fmt.Sprintf("Symbol %s is over %d bytes", id, symbols.MaxSize))
	case errors.Is(err, symbols.ErrNotImage):
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("Symbol %s is not an SVG, PNG, JPEG or GIF image", id))
	case errors.Is(err, symbols.ErrInvalidName):
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("Symbol id %q names no file", id))
	}
	// GNS3 answers a failed write with 409 and this message.
	return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("Could not write symbol file '%s': %v", id, err))
}

// dimensions answers a symbol's size. Where GNS3 answers an unreadable or
// invalid image with 404 and an empty body, we keep the 404 but send the
// JSON error every other failure has.
func (s *symbolRoutes) dimensions(c *fiber.Ctx) error {
	id := symbolID(c)
	w, h, err := s.lib.Dimensions(id)
	if err != nil {
		msg := fmt.Sprintf("Symbol %s not found", id)
		if errors.Is(err, symbols.ErrInvalidImage) {
			msg = fmt.Sprintf("Symbol %s is not a valid image", id)
		}
		return &fiber.Error{Code: fiber.StatusNotFound, Message: msg}
	}
	return c.JSON(dimensionsJSON{Width: w, Height: h})
}

// symbolID decodes the {symbol_id:.+} placeholder. Fiber
// matches the raw path (the app leaves UnescapePath off), so the
// parameter arrives percent-encoded, "%2F" included: one decoding gives
// the id, slashes and all. GNS3 decodes a second time, and clients that
// encode twice ("%253A") rely on it, so we do too. Decoding cannot lead
// outside the symbols folder: the library never turns an id into a path
// by itself.
func symbolID(c *fiber.Ctx) string {
	return unquote(unquote(c.Params("*")))
}

// unquote decodes %XX escapes and leaves anything else, malformed escapes
// included, as it is (as Python's urllib.parse.unquote, which GNS3 uses,
// does), so an id containing "%" survives the second round.
func unquote(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[:i]...)
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
