package api

import (
	"maps"

	"github.com/gofiber/fiber/v2"
)

// The routes GNS3's GUI and web UI call beyond the core of projects,
// nodes and links (api-v2-gui-complete.md): drawings, template editing,
// settings pages, files, console resets and the listings their dialogs
// open with.

func (a *API) registerGUI(app *fiber.App) {
	const (
		project  = "/v2/projects/{project_id}"
		drawings = project + "/drawings"
		drawing  = drawings + "/{drawing_id}"
	)
	a.handle(app, "GET", drawings, a.listDrawings)
	a.handle(app, "POST", drawings, a.createDrawing)
	a.handle(app, "GET", drawing, a.getDrawing)
	a.handle(app, "PUT", drawing, a.updateDrawing)
	a.handle(app, "DELETE", drawing, a.deleteDrawing)
	a.handle(app, "POST", "/v2/templates", a.createTemplate)
	a.handle(app, "PUT", "/v2/templates/{template_id}", a.updateTemplate)
	a.handle(app, "DELETE", "/v2/templates/{template_id}", a.deleteTemplate)
	a.handle(app, "POST", "/v2/templates/{template_id}/duplicate", a.duplicateTemplate)
}

// guiRouteDocs documents the routes of registerGUI (see routeDocs).
var guiRouteDocs = map[string]routeDoc{
	"POST /v2/templates":                                     {"Create a template from the type's defaults and the members given; template.created on the controller stream", "template", 201, "template", []int{400, 409, 413}},
	"PUT /v2/templates/{template_id}":                        {"Change a user template (merged, then checked whole); built-in templates are read-only", "template_update", 200, "template", []int{400, 404, 409, 413}},
	"DELETE /v2/templates/{template_id}":                     {"Delete a user template", "", 204, "", []int{404, 409}},
	"POST /v2/templates/{template_id}/duplicate":             {"Copy a user template under a new id", "", 201, "template", []int{400, 404, 409}},
	"GET /v2/projects/{project_id}/drawings":                 {"List drawings (a closed project lists its file's entries)", "", 200, "drawings", []int{404}},
	"POST /v2/projects/{project_id}/drawings":                {"Add a drawing (an existing drawing_id returns that drawing); the SVG is checked and cleaned", "drawing", 201, "drawing", bodyErrs},
	"GET /v2/projects/{project_id}/drawings/{drawing_id}":    {"Get a drawing", "", 200, "drawing", projectErrs},
	"PUT /v2/projects/{project_id}/drawings/{drawing_id}":    {"Change a drawing (answers 201, as GNS3)", "drawing", 201, "drawing", bodyErrs},
	"DELETE /v2/projects/{project_id}/drawings/{drawing_id}": {"Delete a drawing that is not locked", "", 204, "", []int{403, 404, 409}},
}

// guiSchemas are the request schemas of registerGUI's routes.
var guiSchemas = map[string]string{
	// A template's own members are checked against its type once merged
	// with the type's defaults (package project).
	"template": `{"type": "object", "properties": {"name": {"type": "string", "minLength": 1}},
		"required": ["name", "template_type"]}`,
	"template_update": `{"type": "object"}`,
	"drawing": `{"type": "object",
		"properties": {
			"drawing_id": {"oneOf": [{"$ref": "uuid.json"}, {"type": "null"}]},
			"project_id": {"$ref": "uuid.json"},
			"svg": {"type": "string"},
			"x": {"type": "integer"},
			"y": {"type": "integer"},
			"z": {"type": "integer"},
			"locked": {"type": "boolean"},
			"rotation": {"type": "integer", "minimum": -359, "maximum": 360}
		},
		"additionalProperties": false}`,
}

// guiResponseSchemas describe registerGUI's replies.
var guiResponseSchemas = map[string]string{
	"drawing": `{"type": "object", "properties": {
		"drawing_id": {"type": "string", "format": "uuid"}, "project_id": {"type": "string", "format": "uuid"},
		"svg": {"type": "string"}, "x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"},
		"locked": {"type": "boolean"}, "rotation": {"type": "integer"}}}`,
	"drawings": `{"type": "array", "items": {"$ref": "#/components/schemas/drawing"}}`,
}

func allSchemas() map[string]string {
	out := maps.Clone(schemaSources)
	maps.Copy(out, guiSchemas)
	return out
}

func allResponseSchemas() map[string]string {
	out := maps.Clone(responseSchemas)
	maps.Copy(out, guiResponseSchemas)
	return out
}
