package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchemas compiles the request schemas. It runs once, in New.
func compileSchemas() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	for name, src := range allSchemas() {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		if err := c.AddResource(name+".json", doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(schemaSources))
	for name := range allSchemas() {
		s, err := c.Compile(name + ".json")
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// badRequest is a 400 with GNS3's five-member body: it carries the request
// as parsed (or the raw text of a body that is not JSON).
type badRequest struct {
	msg     string
	request any
}

func (e *badRequest) Error() string { return e.msg }

// decoder reads JSON requests against the routes' schemas.
type decoder struct {
	schemas map[string]*jsonschema.Schema
	maxBody int // Config.MaxJSONBody
}

// decode reads a JSON request as GNS3 does: an empty body
// is {}, query parameters are merged into the object as strings
// (overriding body members), the result is validated against the route's
// schema, then decoded into dst. Every failure is a 400 and changes
// nothing.
func (d *decoder) decode(c *fiber.Ctx, schema string, dst any) error {
	// The raw body: c.Body() would inflate a gzip or deflate body with no
	// bound before the size check below (a few KB could become GBs).
	raw := c.Request().Body()
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return fiber.NewError(fiber.StatusUnsupportedMediaType, "Compressed request bodies are not accepted (Content-Encoding: "+enc+")")
	}
	if len(raw) > d.maxBody {
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, fmt.Sprintf("Request body over %d bytes", d.maxBody))
	}
	var doc any = map[string]any{}
	if !utf8.Valid(raw) {
		// GNS3 crashes (500) on these.
		return &badRequest{msg: "Invalid JSON: the body is not UTF-8", request: map[string]string{"malformed_json": strings.ToValidUTF8(string(raw), "\ufffd")}}
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		var err error
		doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return &badRequest{
				msg:     "Invalid JSON " + err.Error(),
				request: map[string]string{"malformed_json": string(raw)},
			}
		}
	}
	if obj, ok := doc.(map[string]any); ok {
		for k, v := range c.Queries() {
			obj[k] = v
		}
	}
	c.Locals(requestKey, doc)
	if err := d.schemas[schema].Validate(doc); err != nil {
		text, _ := json.Marshal(doc)
		return &badRequest{
			msg: fmt.Sprintf("JSON schema error with API request '%s' and JSON data '%s': %s",
				c.OriginalURL(), text, schemaMessage(err)),
			request: doc,
		}
	}
	merged, _ := json.Marshal(doc)
	if err := json.Unmarshal(merged, dst); err != nil {
		// The schema's "integer" lets 1.0 through; Go's int does not, as
		// draft-04 would not.
		return &badRequest{msg: fmt.Sprintf("JSON schema error with API request '%s': %v", c.OriginalURL(), err), request: doc}
	}
	return nil
}

// schemaMessage turns a validation error into one line: each failure as
// "at '<pointer>': <reason>".
func schemaMessage(err error) string {
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return err.Error()
	}
	lines := strings.Split(ve.Error(), "\n")
	var parts []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")); l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return ve.Error()
	}
	return strings.Join(parts, "; ")
}
