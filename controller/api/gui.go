package api

import (
	"maps"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// The routes GNS3's GUI and web UI call beyond the core of projects,
// nodes and links: drawings, template editing,
// settings pages, files, console resets and the listings their dialogs
// open with.

func (a *API) registerGUI(app *fiber.App) {
	const (
		project  = "/v2/projects/{project_id}"
		drawings = project + "/drawings"
		drawing  = drawings + "/{drawing_id}"
	)
	dr := drawingRoutes{a.resource()}
	a.handle(app, "GET", drawings, dr.listDrawings)
	a.handle(app, "POST", drawings, dr.createDrawing)
	a.handle(app, "GET", drawing, dr.getDrawing)
	a.handle(app, "PUT", drawing, dr.updateDrawing)
	a.handle(app, "DELETE", drawing, dr.deleteDrawing)
	tr := templateRoutes{a.resource()}
	a.handle(app, "POST", "/v2/templates", tr.createTemplate)
	a.handle(app, "PUT", "/v2/templates/{template_id}", tr.updateTemplate)
	a.handle(app, "DELETE", "/v2/templates/{template_id}", tr.deleteTemplate)
	a.handle(app, "POST", "/v2/templates/{template_id}/duplicate", tr.duplicateTemplate)

	fr := fileRoutes{a.resource()}
	a.handle(app, "GET", project+"/files/{path:.+}", fr.getProjectFile)
	a.handle(app, "POST", project+"/files/{path:.+}", fr.postProjectFile)
	a.handle(app, "POST", project+"/nodes/console/reset", nodeRoutes{a.resource()}.resetConsoles)
	a.handle(app, "POST", project+"/nodes/{node_id}/console/reset", nodeRoutes{a.resource()}.resetConsole)
	a.handle(app, "POST", project+"/nodes/{node_id}/duplicate", nodeRoutes{a.resource()}.duplicateNode)
	a.handle(app, "POST", project+"/nodes/{node_id}/move", nodeRoutes{a.resource()}.moveNode)
	a.handleStream(app, "GET", rConsoleWS, a.consoleWS())
	a.handle(app, "GET", project+"/nodes/{node_id}/files/{path:.+}", fr.getNodeFile)
	a.handle(app, "POST", project+"/nodes/{node_id}/files/{path:.+}", fr.postNodeFile)

	a.handle(app, "GET", "/v2/appliances", a.listAppliances)
	str := settingsRoutes{a.resource(), a.settings}
	a.handle(app, "GET", "/v2/gns3vm", str.getGNS3VM)
	a.handle(app, "PUT", "/v2/gns3vm", str.putGNS3VM)
	a.handle(app, "GET", "/v2/gns3vm/engines", emptyList)
	a.handle(app, "GET", "/v2/gns3vm/engines/{engine}/vms", str.gns3VMEngineVMs)
	a.handle(app, "GET", "/v2/iou_license", str.getIOULicense)
	a.handle(app, "PUT", "/v2/iou_license", str.putIOULicense)
	a.handle(app, "GET", "/v2/statistics", a.statistics)
	a.handle(app, "POST", "/v2/projects/load", a.loadProject)
	// GNS3 runs these for the GUI's own local server only, and answers
	// any other client 403: labtap is never that server.
	a.handle(app, "POST", "/v2/debug", localOnly("You can only debug a local server"))
	a.handle(app, "POST", "/v2/shutdown", localOnly("You can only stop a local server"))
	// Emulators labtap does not run: their dialogs' listings are empty.
	// (Docker and QEMU have routes of their own.)
	for _, l := range []string{"iou/images", "dynamips/images", "virtualbox/vms", "vmware/vms"} {
		a.handle(app, "GET", "/v2/computes/{compute_id}/"+l, a.computeEmptyList)
	}
	for _, l := range []string{"iou/images", "dynamips/images", "virtualbox/vms", "vmware/vms"} {
		a.handle(app, "GET", "/v2/compute/"+l, emptyList)
	}
	// Their uploads and actions are 409 saying so, as the
	// forwarded calls are, rather than a 404 "No route" toast: the web UI's
	// image uploads, and the IOS router wizard's Idle-PC search, whose path
	// is too short for the forwarded calls' template.
	for _, e := range []string{"iou", "dynamips"} {
		a.handle(app, "POST", "/v2/compute/"+e+"/images/{filename:.+}", notRunHere(e))
	}
	a.handle(app, "POST", "/v2/computes/{compute_id}/auto_idlepc", a.computeNotRunHere("dynamips"))
}

// listAppliances answers GET /v2/appliances: the catalogue's appliances
// this server's computes can run, their symbols of the GUI's symbol_theme;
// update=yes (download the registry first, in GNS3) lists the same.
func (a *API) listAppliances(c *fiber.Ctx) error {
	return c.JSON(a.appliances.List(c.UserContext(), c.Query("symbol_theme")))
}

// localOnly answers a route that GNS3 serves only to the GUI that
// started it: 403 with msg.
func localOnly(msg string) fiber.Handler {
	return func(*fiber.Ctx) error {
		return &project.Error{Kind: project.ErrForbidden, Msg: msg}
	}
}

// guiRouteDocs documents the routes of registerGUI (see routeDocs).
var guiRouteDocs = map[string]routeDoc{
	"GET /v2/projects/{project_id}/files/{path:.+}":                  {"Read a file of the project's directory (README.txt); paths stay inside it", "", 200, "file", []int{400, 403, 404, 413}},
	"POST /v2/projects/{project_id}/files/{path:.+}":                 {"Write a file of the project's directory, atomically (raw body, 10 MiB at most; not the project file)", "raw", 201, "", []int{400, 403, 404, 413}},
	"POST /v2/projects/{project_id}/nodes/console/reset":             {"Disconnect every client of every started node's console", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/console/reset":   {"Disconnect every client of a node's console", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/duplicate":       {"Copy a stopped node (VPCS: with its startup.vpc) at x, y, z; links are not copied", "node_duplicate", 201, "node", bodyErrs},
	"POST /v2/projects/{project_id}/nodes/{node_id}/move":            {"labtap: move a stopped node (a switch or hub may run) to another compute, or \"auto\" (placement): its files (VPCS: startup.vpc) go with it and its links are wired again; refused while one of its links captures; a failure leaves it where it was", "node_move", 200, "node", bodyErrs},
	"GET /v2/projects/{project_id}/nodes/{node_id}/files/{path:.+}":  {"Read a file of the node's directory (VPCS: startup.vpc); paths stay inside it", "", 200, "file", []int{400, 403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/files/{path:.+}": {"Write a file of the node's directory (raw body, 512 KiB at most); VPCS reads startup.vpc at start", "raw", 201, "", []int{400, 403, 404, 409, 413}},
	"GET " + rConsoleWS:                                      {"WebSocket to a started node's telnet console, through its agent (binary frames out; text or binary in)", "", 101, "", []int{403, 404, 409}},
	"GET /v2/appliances":                                     {"The appliance catalogue: labtap's FRR and Debian host docker images and its tiny QEMU guest, each listed where a connected compute runs its node type (the QEMU guest once its files are in that compute's images, with their md5 sums); nothing is fetched (update=yes lists the same)", "", 200, "list", nil},
	"GET /v2/gns3vm":                                         {"GNS3 VM settings, kept for clients (labtap runs no GNS3 VM)", "", 200, "settings", nil},
	"PUT /v2/gns3vm":                                         {"Store GNS3 VM settings (merged); enable: true is 409", "gns3vm", 201, "settings", []int{400, 409, 413}},
	"GET /v2/gns3vm/engines":                                 {"GNS3 VM engines: none", "", 200, "list", nil},
	"GET /v2/gns3vm/engines/{engine}/vms":                    {"VMs of a GNS3 VM engine: none", "", 200, "list", []int{404}},
	"GET /v2/iou_license":                                    {"IOU license settings, kept for clients", "", 200, "settings", nil},
	"PUT /v2/iou_license":                                    {"Store IOU license settings (merged)", "iou_license", 201, "settings", []int{400, 409, 413}},
	"GET /v2/statistics":                                     {"Load of each connected compute", "", 200, "list", nil},
	"POST /v2/projects/load":                                 {"Open a .gns3 by path: only a GUI's own local server does (403)", "", 403, "", nil},
	"POST /v2/debug":                                         {"Dump debug information: only a GUI's own local server does (403)", "", 403, "", nil},
	"POST /v2/shutdown":                                      {"Stop the server: only a GUI's own local server does (403)", "", 403, "", nil},
	"GET /v2/computes/{compute_id}/iou/images":               {"IOU images of a compute: none (not run here)", "", 200, "list", []int{404}},
	"GET /v2/computes/{compute_id}/dynamips/images":          {"Dynamips images of a compute: none (not run here)", "", 200, "list", []int{404}},
	"GET /v2/computes/{compute_id}/virtualbox/vms":           {"VirtualBox VMs of a compute: none (not run here)", "", 200, "list", []int{404}},
	"GET /v2/computes/{compute_id}/vmware/vms":               {"VMware VMs of a compute: none (not run here)", "", 200, "list", []int{404}},
	"GET /v2/compute/iou/images":                             {"The web UI's IOU image list: none", "", 200, "list", nil},
	"GET /v2/compute/dynamips/images":                        {"The web UI's Dynamips image list: none", "", 200, "list", nil},
	"GET /v2/compute/virtualbox/vms":                         {"The web UI's VirtualBox VM list: none", "", 200, "list", nil},
	"GET /v2/compute/vmware/vms":                             {"The web UI's VMware VM list: none", "", 200, "list", nil},
	"POST /v2/compute/iou/images/{filename:.+}":              {"The web UI's IOU image upload: 409, IOU is not run here", "raw", 409, "", []int{409}},
	"POST /v2/compute/dynamips/images/{filename:.+}":         {"The web UI's Dynamips image upload: 409, Dynamips is not run here", "raw", 409, "", []int{409}},
	"POST /v2/computes/{compute_id}/auto_idlepc":             {"The IOS router wizard's Idle-PC search: 409, Dynamips is not run here", "", 409, "", []int{404, 409}},
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
	"node_move": `{"type": "object", "properties": {"compute_id": {"type": "string", "minLength": 1, "maxLength": 255}},
		"required": ["compute_id"], "additionalProperties": false}`,
	"node_duplicate": `{"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}},
		"required": ["x", "y"], "additionalProperties": false}`,
	"gns3vm": `{"type": "object", "properties": {
			"enable": {"type": "boolean"}, "vmname": {"type": ["string", "null"], "maxLength": 255},
			"when_exit": {"enum": ["stop", "suspend", "keep"]}, "headless": {"type": "boolean"},
			"engine": {"enum": ["vmware", "virtualbox", "hyper-v", "remote", null]},
			"allocate_vcpus_ram": {"type": "boolean"}, "ram": {"type": "integer", "minimum": 0},
			"vcpus": {"type": "integer", "minimum": 0}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}},
		"additionalProperties": false}`,
	"iou_license": `{"type": "object", "properties": {
			"iourc_content": {"type": "string", "maxLength": 65536}, "license_check": {"type": "boolean"}},
		"additionalProperties": false}`,
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
	"list":     `{"type": "array"}`,
	"settings": `{"type": "object"}`,
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
