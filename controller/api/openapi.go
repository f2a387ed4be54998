package api

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// routeDoc documents one route of the OpenAPI document.
type routeDoc struct {
	summary  string
	body     string // request schema name; "raw" for a raw upload
	status   int    // success status
	response string // response schema name; "" for none, "pcap"/"image" for binary
	errors   []int
}

// Shared error lists.
var (
	projectErrs = []int{403, 404}
	bodyErrs    = []int{400, 403, 404, 409, 413}
)

// routeDocs documents every route. TestOpenAPIListsExactlyTheRegisteredRoutes
// holds it and the registered routes in step.
var routeDocs = map[string]routeDoc{
	"GET /v2/version":                                                 {"Server version; the GNS3 GUI needs both members", "", 200, "version", nil},
	"POST /v2/version":                                                {"Check that a client's version equals the server's", "version_check", 200, "version", []int{400, 409}},
	"GET /v2/computes":                                                {"List computes (agents), local included", "", 200, "computes", nil},
	"POST /v2/computes":                                               {"Register a compute (an agent)", "compute_create", 201, "compute", []int{400, 409, 413}},
	"GET /v2/computes/{compute_id}":                                   {"Get a compute", "", 200, "compute", []int{404}},
	"PUT /v2/computes/{compute_id}":                                   {"Change a compute", "compute_update", 200, "compute", []int{400, 404, 409, 413}},
	"DELETE /v2/computes/{compute_id}":                                {"Forget a compute, closing its projects (204 even if unknown)", "", 204, "", []int{409}},
	"POST /v2/computes/{compute_id}/drain":                            {"labtap: drain a compute: it takes no new nodes (placement skips it; a node asked of it is 409); its nodes run on. With {\"move\": true}, every stopped node of the opened projects is moved off by placement (with \"restart\": true, started nodes too: stopped, moved, started again), and the answer adds moved and left (running nodes and failed moves, each with its reason)", "compute_drain", 200, "compute", []int{400, 404}},
	"GET /v2/computes/{compute_id}/nodes":                             {"labtap: the nodes the opened projects have on a compute (those the caller may audit): what a recover would recreate elsewhere when it is lost", "", 200, "compute_nodes", []int{404}},
	"POST /v2/computes/{compute_id}/recover":                          {"labtap: recreate elsewhere, by placement, every node of the opened projects on a compute that is not connected (lost), from the project's entries, links wired again; the node's files on the lost compute (startup.vpc, container changes, disk overlays) and its capture files are lost. With {\"start\": true} they are started. A connected compute is 409 (drain it with move). Answers moved and left, each left node with its reason", "compute_recover", 200, "node_moves", []int{400, 404, 409}},
	"POST /v2/computes/{compute_id}/undrain":                          {"labtap: undrain a compute: it takes new nodes again", "", 200, "compute", []int{404}},
	"GET /v2/computes/{compute_id}/network/interfaces":                {"List the network interfaces of a compute's host, sorted by name (the cloud node dialog); special marks loopback, bridges and veths", "", 200, "host_interfaces", []int{404, 409}},
	"GET /v2/compute/network/interfaces":                              {"The web UI's list of the local compute's host interfaces", "", 200, "host_interfaces", []int{404, 409}},
	"GET /v2/computes/{compute_id}/docker/images":                     {"List the image tags of a compute's Docker Engine, sorted (the docker template wizard)", "", 200, "docker_images", []int{404, 409}},
	"GET /v2/notifications":                                           {"Controller events as JSON lines: a ping first, then each event; a ping after 5 s of silence", "", 200, "stream", nil},
	"GET /v2/notifications/ws":                                        {"Controller events over WebSocket, one text frame each", "", 101, "", []int{426}},
	"GET /v2/projects/{project_id}/notifications":                     {"A project's node and link events as JSON lines (the project need not be opened); each listener is a client of the project for auto_close, unless ?passive=true", "", 200, "stream", []int{404}},
	"GET /v2/projects/{project_id}/notifications/ws":                  {"A project's events over WebSocket; ?passive=true (the capture view) is no client of the project for auto_close", "", 101, "", []int{404, 426}},
	"GET /v2/projects":                                                {"List projects, opened and closed", "", 200, "projects", nil},
	"POST /v2/projects":                                               {"Create a project (an existing project_id returns that project)", "project_create", 201, "project", []int{400, 403, 409, 413}},
	"GET /v2/projects/{project_id}":                                   {"Get a project", "", 200, "project", []int{404}},
	"PUT /v2/projects/{project_id}":                                   {"Change a project's settings", "project_update", 200, "project", []int{400, 404, 409, 413}},
	"DELETE /v2/projects/{project_id}":                                {"Delete a project and its directory", "", 204, "", []int{404, 409}},
	"POST /v2/projects/{project_id}/open":                             {"Open a project: create its nodes and links on their computes", "", 201, "project", []int{404, 409}},
	"POST /v2/projects/{project_id}/close":                            {"Close a project: stop its nodes and captures", "", 204, "", []int{404}},
	"GET /v2/projects/{project_id}/stats":                             {"Count a project's nodes, links, drawings and snapshots", "", 200, "stats", []int{404}},
	"GET /v2/projects/{project_id}/nodes":                             {"List nodes (a closed project lists its file's entries)", "", 200, "nodes", []int{404}},
	"POST /v2/projects/{project_id}/nodes":                            {"Create a node", "node_create", 201, "node", bodyErrs},
	"POST /v2/projects/{project_id}/nodes/start":                      {"Start every node", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/stop":                       {"Stop every node", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/suspend":                    {"Suspend every node that can be", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/reload":                     {"Restart every node", "", 204, "", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/nodes/{node_id}":                   {"Get a node", "", 200, "node", projectErrs},
	"PUT /v2/projects/{project_id}/nodes/{node_id}":                   {"Change a node; read-only members are ignored", "node_update", 200, "node", bodyErrs},
	"DELETE /v2/projects/{project_id}/nodes/{node_id}":                {"Delete a node and its links", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/start":            {"Start a node; the reply has its real status", "", 200, "node", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/stop":             {"Stop a node (captures that depend on it stop first)", "", 200, "node", projectErrs},
	"POST /v2/projects/{project_id}/nodes/{node_id}/suspend":          {"Suspend a node", "", 200, "node", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/nodes/{node_id}/reload":           {"Restart a node", "", 200, "node", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/nodes/{node_id}/links":             {"List the links of a node", "", 200, "links", projectErrs},
	"GET /v2/templates":                                               {"List templates", "", 200, "templates", nil},
	"GET /v2/templates/{template_id}":                                 {"Get a template (304 when If-None-Match holds its ETag)", "", 200, "template", []int{404}},
	"POST /v2/projects/{project_id}/templates/{template_id}":          {"Create a node from a template", "template_create", 201, "node", bodyErrs},
	"GET /v2/projects/{project_id}/links":                             {"List links (a closed project lists its file's entries)", "", 200, "links", []int{404}},
	"POST /v2/projects/{project_id}/links":                            {"Create a link between two node ports", "link_create", 201, "link", bodyErrs},
	"GET /v2/projects/{project_id}/links/{link_id}":                   {"Get a link (a capturing link with its capture's counts now)", "", 200, "link", projectErrs},
	"PUT /v2/projects/{project_id}/links/{link_id}":                   {"Change a link's filters, style, suspend or labels (answers 201)", "link_update", 201, "link", bodyErrs},
	"DELETE /v2/projects/{project_id}/links/{link_id}":                {"Delete a link; a running capture ends with a valid file", "", 204, "", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/links/{link_id}/available_filters": {"List the filters a link can apply", "", 200, "filters", projectErrs},
	"POST /v2/projects/{project_id}/links/{link_id}/start_capture":    {"Start a pcap capture of the link (body may be empty)", "capture_start", 201, "link", bodyErrs},
	"POST /v2/projects/{project_id}/links/{link_id}/stop_capture":     {"Stop the link's capture; the file stays valid", "", 201, "link", projectErrs},
	"POST /v2/projects/{project_id}/start_capture":                    {"Capture every link of the project, across computes, into one pcapng (one interface per link and direction); links created later join", "project_capture_start", 201, "project_capture", []int{400, 403, 404, 409, 413}},
	"POST /v2/projects/{project_id}/stop_capture":                     {"Stop the project's capture; the file is complete when it answers", "", 201, "project_capture", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/pcap":                              {"Stream the project's capture, pcapng, from its first byte as it grows (chunked; ends when the capture stops)", "", 200, "pcapng", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/links/{link_id}/pcap":              {"Stream the capture from its first byte as it grows (chunked; ends when the capture stops)", "", 200, "pcap", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/links/{link_id}/capture_file":      {"Download the running capture's file as it is now (for a ring, the file being written): up to its last whole record, with Content-Length and its name in Content-Disposition; the capture goes on. Once it stopped, its last file whole", "", 200, "capture_file", []int{403, 404, 409}},
	"GET /v2/projects/{project_id}/links/{link_id}/view":              {"The capture view in a browser, opened on this link (HTML)", "", 200, "html", projectErrs},
	"GET /v2/projects/{project_id}/links/{link_id}/packets":           {"The capture's frames decoded, as Server-Sent Events (info, rows: JSON arrays of rows, end) from its first frame while it runs (once it stopped, its last file's to its end); ?filter= a Wireshark display filter where the controller has tshark, else (or when tshark refuses it) a protocol name or a tcpdump expression; the info event names the decoder (tshark or gopacket)", "", 200, "sse", []int{400, 403, 404, 409}},
	"GET /v2/symbols":                                                 {"List symbols, built-in and uploaded", "", 200, "symbols", nil},
	"GET /v2/default_symbols":                                         {"Default symbol of each node role, per theme", "", 200, "default_symbols", nil},
	"GET /v2/symbols/{symbol_id:.+}/raw":                              {"Download a symbol (unknown ids fall back as in GNS3)", "", 200, "image", []int{404}},
	"POST /v2/symbols/{symbol_id:.+}/raw":                             {"Upload a symbol under the base name of its id", "raw", 204, "", []int{400, 409, 413}},
	"GET /v2/symbols/{symbol_id:.+}/dimensions":                       {"Width and height of a symbol", "", 200, "dimensions", []int{404}},
	"GET /v2/openapi.json":                                            {"This document", "", 200, "openapi", nil},
	"GET /v2/computes/{compute_id}/qemu/images":                       {"List a compute's QEMU images with their md5", "", 200, "images", []int{404, 409}},
	"POST /v2/computes/{compute_id}/qemu/images/{filename}":           {"Upload a QEMU image (raw body, streamed; confined to the images folder)", "raw", 200, "empty", []int{400, 403, 404, 409}},
	"GET /v2/computes/{compute_id}/qemu/binaries":                     {"List a compute's qemu-system executables (?archs=x86_64,...)", "", 200, "qemu_binaries", []int{404, 409}},
	"GET /v2/computes/{compute_id}/qemu/img-binaries":                 {"List a compute's qemu-img executables", "", 200, "qemu_binaries", []int{404, 409}},
	"GET /v2/computes/{compute_id}/qemu/capabilities":                 {"Platforms a compute's QEMU runs with KVM", "", 200, "qemu_capabilities", []int{404, 409}},

	// Capture files, running or stopped, on any compute (captures.go).
	"GET /v2/projects/{project_id}/captures":                                  {"List every capture file of the project on every compute that answers (running, stopped, ring files), oldest first, each with its compute, link, size, records, first and last time and drops", "", 200, "capture_files", []int{403, 404}},
	"GET /v2/projects/{project_id}/captures/{compute_id}/{file_name}":         {"Download a capture file from the compute that holds it: a stopped one whole, a running one up to its last whole record (Content-Length, its name in Content-Disposition)", "", 200, "capture_file", []int{400, 403, 404, 409}},
	"DELETE /v2/projects/{project_id}/captures/{compute_id}/{file_name}":      {"Delete a stopped capture file (a running capture's file: 409)", "", 204, "", []int{400, 403, 404, 409}},
	"GET /v2/projects/{project_id}/captures/{compute_id}/{file_name}/view":    {"The capture view in a browser, opened on one capture file (HTML)", "", 200, "html", projectErrs},
	"GET /v2/projects/{project_id}/captures/{compute_id}/{file_name}/packets": {"A capture file's frames decoded, as Server-Sent Events (as a link's packets), to the file's end as it is now", "", 200, "sse", []int{400, 403, 404, 409}},
}

// responseSchemas describe the replies (OpenAPI 3.1, JSON Schema 2020-12).
var responseSchemas = map[string]string{
	"error": `{"type": "object", "required": ["message", "status"], "properties": {
		"message": {"type": "string"}, "status": {"type": "integer"},
		"path": {"type": "string", "description": "400 only: the route template"},
		"request": {"description": "400 only: the request as parsed, or {\"malformed_json\": text}"},
		"method": {"type": "string", "description": "400 only"}}}`,
	"version": `{"type": "object", "properties": {"local": {"type": "boolean"}, "version": {"type": "string"}}}`,
	"compute": `{"type": "object", "properties": {
		"compute_id": {"type": "string"}, "name": {"type": "string"}, "protocol": {"enum": ["http", "https"]},
		"host": {"type": "string"}, "port": {"type": "integer"}, "user": {"type": ["string", "null"]},
		"connected": {"type": "boolean"}, "cpu_usage_percent": {"type": ["number", "null"]},
		"memory_usage_percent": {"type": ["number", "null"]}, "last_error": {"type": ["string", "null"]},
		"capabilities": {"type": "object", "properties": {"node_types": {"type": "array", "items": {"type": "string"}},
			"platform": {"type": "string"}, "version": {"type": ["string", "null"]},
			"unavailable": {"type": "object", "description": "labtap: node types this compute cannot run, and why", "additionalProperties": {"type": "string"}}}}}}`,
	"computes": `{"type": "array", "items": {"$ref": "#/components/schemas/compute"}}`,
	"compute_nodes": `{"type": "array", "items": {"type": "object", "properties": {"project_id": {"type": "string"}, "node_id": {"type": "string"},
		"name": {"type": "string"}, "node_type": {"type": "string"}, "status": {"type": "string"}}}}`,
	"node_moves": `{"type": "object", "properties": {
		"moved": {"type": "array", "items": {"type": "object", "properties": {"project_id": {"type": "string"}, "node_id": {"type": "string"}, "name": {"type": "string"}, "compute_id": {"type": "string"}}}},
		"left": {"type": "array", "items": {"type": "object", "properties": {"project_id": {"type": "string"}, "node_id": {"type": "string"}, "name": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}}}}}}`,
	"host_interfaces": `{"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"},
		"ip_address": {"type": "string"}, "netmask": {"type": "string"}, "mac_address": {"type": "string"}, "type": {"type": "string", "enum": ["ethernet", "tap"]},
		"special": {"type": "boolean"}}}}`,
	"docker_images": `{"type": "array", "items": {"type": "object", "properties": {"image": {"type": "string"}}}}`,
	"project": `{"type": "object", "properties": {
		"project_id": {"type": "string", "format": "uuid"}, "name": {"type": "string"}, "path": {"type": "string"},
		"filename": {"type": "string"}, "status": {"enum": ["opened", "closed"]},
		"auto_start": {"type": "boolean"}, "auto_close": {"type": "boolean"}, "auto_open": {"type": "boolean"},
		"scene_height": {"type": "integer"}, "scene_width": {"type": "integer"}, "zoom": {"type": "integer"},
		"show_layers": {"type": "boolean"}, "snap_to_grid": {"type": "boolean"}, "show_grid": {"type": "boolean"},
		"grid_size": {"type": "integer"}, "drawing_grid_size": {"type": "integer"},
		"show_interface_labels": {"type": "boolean"}, "supplier": {"type": ["object", "null"]},
		"variables": {"type": ["array", "null"]}, "capture_disk_budget": {"type": "integer"}}}`,
	"projects": `{"type": "array", "items": {"$ref": "#/components/schemas/project"}}`,
	"stats": `{"type": "object", "properties": {"nodes": {"type": "integer"}, "links": {"type": "integer"},
		"drawings": {"type": "integer"}, "snapshots": {"type": "integer"}}}`,
	"port": `{"type": "object", "properties": {"name": {"type": "string"}, "short_name": {"type": "string"},
		"adapter_number": {"type": "integer"}, "port_number": {"type": "integer"}, "link_type": {"enum": ["ethernet", "serial"]},
		"data_link_types": {"type": "object", "additionalProperties": {"type": "string"}},
		"mac_address": {"type": "string", "description": "ports of docker and qemu nodes"},
		"adapter_type": {"type": "string", "description": "ports of qemu nodes"}}}`,
	"node": `{"type": "object", "properties": {
		"node_id": {"type": "string", "format": "uuid"}, "project_id": {"type": "string", "format": "uuid"},
		"compute_id": {"type": "string"}, "template_id": {"type": ["string", "null"]}, "node_type": {"type": "string"},
		"name": {"type": "string"}, "status": {"enum": ["stopped", "started", "suspended"]},
		"console": {"type": ["integer", "null"]}, "console_host": {"type": "string"},
		"console_type": {"type": ["string", "null"]}, "console_auto_start": {"type": "boolean"},
		"command_line": {"type": ["string", "null"]}, "node_directory": {"type": ["string", "null"]},
		"properties": {"type": "object"}, "label": {"type": "object"},
		"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}, "locked": {"type": "boolean"},
		"width": {"type": "integer"}, "height": {"type": "integer"}, "symbol": {"type": ["string", "null"]},
		"port_name_format": {"type": "string"}, "port_segment_size": {"type": "integer"},
		"first_port_name": {"type": ["string", "null"]}, "custom_adapters": {"type": "array"},
		"ports": {"type": "array", "items": {"$ref": "#/components/schemas/port"}}}}`,
	"nodes": `{"type": "array", "items": {"$ref": "#/components/schemas/node"}}`,
	"link": `{"type": "object", "properties": {
		"link_id": {"type": "string", "format": "uuid"}, "project_id": {"type": "string", "format": "uuid"},
		"nodes": {"type": "array", "items": {"type": "object", "properties": {"node_id": {"type": "string"},
			"adapter_number": {"type": "integer"}, "port_number": {"type": "integer"}, "label": {"type": "object"}}}},
		"filters": {"type": "object"}, "link_style": {"type": "object"}, "suspend": {"type": "boolean"},
		"link_type": {"enum": ["ethernet", "serial"]}, "capturing": {"type": "boolean"},
		"capture_file_name": {"type": ["string", "null"]}, "capture_file_path": {"type": ["string", "null"]},
		"capture_compute_id": {"type": ["string", "null"]},
		"capture": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/capture"}],
			"description": "labtap's extension: the capture's full state, null before any capture"}}}`,
	"capture": `{"type": "object", "properties": {
		"active": {"type": "boolean"}, "file_name": {"type": "string"},
		"file_path": {"type": "string", "description": "on the compute's host; the newest file of a ring"},
		"spec": {"$ref": "#/components/schemas/capture_start"},
		"frames": {"type": "integer", "description": "records written"}, "bytes": {"type": "integer", "description": "bytes written, headers included"},
		"dropped": {"type": "integer", "description": "frames forwarded but not written: the disk could not keep up, or a write failed"},
		"filtered": {"type": "integer", "description": "frames forwarded that capture_filter kept out"},
		"files": {"type": "integer", "description": "files the capture began"},
		"error": {"type": "string", "description": "why it ended by itself on a failure"},
		"limit": {"type": "string", "description": "why it ended by itself at a limit"}}}`,
	"links": `{"type": "array", "items": {"$ref": "#/components/schemas/link"}}`,
	"capture_files": `{"type": "array", "items": {"type": "object", "properties": {
		"compute_id": {"type": "string"}, "file_name": {"type": "string"}, "link_id": {"type": "string", "description": "\"\" where the file does not say"},
		"capture_format": {"enum": ["pcap", "pcapng"]}, "running": {"type": "boolean"}, "size": {"type": "integer"}, "records": {"type": "integer"},
		"first_time": {"type": ["string", "null"], "format": "date-time"}, "last_time": {"type": ["string", "null"], "format": "date-time"},
		"dropped": {"type": "integer"}, "modified": {"type": "string", "format": "date-time"}}}}`,
	"filters": `{"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"},
		"name": {"type": "string"}, "description": {"type": "string"}, "parameters": {"type": "array"}}}}`,
	"template": `{"type": "object", "properties": {"template_id": {"type": "string"}, "name": {"type": "string"},
		"template_type": {"type": "string"}, "builtin": {"type": "boolean"}, "category": {"type": "string"},
		"compute_id": {"type": ["string", "null"]}, "default_name_format": {"type": "string"},
		"symbol": {"type": "string"}, "properties": {"type": "object"}}}`,
	"templates": `{"type": "array", "items": {"$ref": "#/components/schemas/template"}}`,
	"symbols": `{"type": "array", "items": {"type": "object", "properties": {"symbol_id": {"type": "string"},
		"filename": {"type": "string"}, "builtin": {"type": "boolean"}, "theme": {"type": "string"}}}}`,
	"default_symbols": `{"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}}}`,
	"project_capture": `{"type": "object", "properties": {
		"project_id": {"type": "string", "format": "uuid"}, "capturing": {"type": "boolean"},
		"capture_file_name": {"type": "string"}, "capture_file_path": {"type": "string", "description": "on the controller's host"},
		"links": {"type": "integer", "description": "links whose frames are being merged now"},
		"interfaces": {"type": "integer", "description": "interfaces of the file: two per link that joined"},
		"frames": {"type": "integer"}, "bytes": {"type": "integer"}}}`,
	"dimensions": `{"type": "object", "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}}}`,
	"openapi":    `{"type": "object"}`,
	"images": `{"type": "array", "items": {"type": "object", "properties": {"filename": {"type": "string"},
		"path": {"type": "string"}, "md5sum": {"type": "string"}, "filesize": {"type": "integer"}}}}`,
	"empty":             `{"type": "object"}`,
	"qemu_binaries":     `{"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "version": {"type": "string"}}}}`,
	"qemu_capabilities": `{"type": "object", "properties": {"kvm": {"type": "array", "items": {"type": "string"}}}}`,
}

var placeholder = regexp.MustCompile(`\{([a-z_]+)(:[^}]*)?\}`)

// OpenAPI builds the OpenAPI 3.1 document of the routes registered.
func (a *API) OpenAPI() map[string]any {
	schemas := map[string]any{}
	for name, src := range allSchemas() {
		schemas[name] = openAPISchema(src)
	}
	for name, src := range allResponseSchemas() {
		schemas[name] = openAPISchema(src)
	}
	paths := map[string]map[string]any{}
	for _, r := range a.routes {
		if !strings.HasPrefix(r.Template, "/v2/") {
			continue // the page, its files and /metrics are not the API
		}
		doc, ok := routeDocs[r.Method+" "+r.Template]
		if !ok {
			doc, ok = guiRouteDocs[r.Method+" "+r.Template]
		}
		if !ok {
			doc = routeDoc{summary: "undocumented", status: 200}
		}
		path := placeholder.ReplaceAllString(r.Template, "{$1}")
		op := map[string]any{
			"summary":     doc.summary,
			"operationId": operationID(r.Method, r.Template),
			"responses":   responsesOf(doc),
		}
		var params []any
		for _, m := range placeholder.FindAllStringSubmatch(r.Template, -1) {
			p := map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
			if m[2] == ":.+" {
				p["description"] = "may contain '/' and ':' (percent-encode ':' as %3A)"
			}
			params = append(params, p)
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		switch doc.body {
		case "":
		case "archive":
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
				"multipart/form-data": map[string]any{"schema": map[string]any{"type": "object",
					"properties": map[string]any{"file": map[string]any{"type": "string", "format": "binary"}}}}}}
		case "raw":
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		default:
			op["requestBody"] = map[string]any{"content": map[string]any{
				"application/json": map[string]any{"schema": ref(doc.body)}}}
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(r.Method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "labtap controller API (GNS3 v2 compatible)",
			"version":     a.cfg.Version,
			"description": "Every reply carries X-Route, the matched route template. Errors are JSON {message, status}; a 400 adds path, request and method.",
		},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
}

func responsesOf(doc routeDoc) map[string]any {
	out := map[string]any{}
	ok := map[string]any{"description": "success"}
	switch doc.response {
	case "":
	case "stream":
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{
			"type": "string", "description": "one JSON object {action, event} per line"}}}
	case "gns3project":
		ok["content"] = map[string]any{"application/gns3project": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case "html":
		ok["content"] = map[string]any{"text/html": map[string]any{"schema": map[string]any{"type": "string"}}}
	case "sse":
		ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{
			"type": "string", "description": "event: info {format, link_type, filter}; event: rows [{no, time, abs, iface, src, dst, proto, len, info, layers: [{name, summary}], hex}]; event: end {reason}"}}}
	case "pcap":
		ok["content"] = map[string]any{"application/vnd.tcpdump.pcap": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case "capture_file":
		ok["content"] = map[string]any{"application/vnd.tcpdump.pcap": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
			"application/x-pcapng": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case "pcapng":
		ok["content"] = map[string]any{"application/x-pcapng": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case "file":
		ok["content"] = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case "image":
		ok["content"] = map[string]any{"image/svg+xml": map[string]any{}, "image/png": map[string]any{}, "image/jpeg": map[string]any{}, "image/gif": map[string]any{}}
	default:
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(doc.response)}}
	}
	out[itoa(doc.status)] = ok
	errs := slices.Clone(doc.errors)
	errs = append(errs, 401) // when Basic authentication is on
	for _, code := range errs {
		e := map[string]any{"description": errorText(code)}
		if code != 401 {
			e["content"] = map[string]any{"application/json": map[string]any{"schema": ref("error")}}
		}
		out[itoa(code)] = e
	}
	return out
}

func errorText(code int) string {
	return map[int]string{
		400: "invalid request (JSON, schema, values)", 401: "authentication required (empty body)",
		403: "the project is not opened", 404: "not found", 409: "conflict with the current state, or a compute failed",
		413: "request body too large", 426: "the route speaks WebSocket only",
	}[code]
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// openAPISchema turns a request schema into the document's form: its
// "<name>.json" references point into components.
func openAPISchema(src string) any {
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		return map[string]any{"description": "invalid schema: " + err.Error()}
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, val := range t {
				if s, ok := val.(string); ok && k == "$ref" && strings.HasSuffix(s, ".json") {
					t[k] = "#/components/schemas/" + strings.TrimSuffix(s, ".json")
					continue
				}
				t[k] = walk(val)
			}
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		}
		return x
	}
	return walk(v)
}

// operationID names an operation after its method and path, e.g.
// "post_projects_project_id_links_link_id_start_capture".
func operationID(method, template string) string {
	path := placeholder.ReplaceAllString(strings.TrimPrefix(template, "/v2/"), "$1")
	path = strings.NewReplacer("/", "_", ".", "_").Replace(path)
	return strings.ToLower(method) + "_" + path
}

func (a *API) openAPI(c *fiber.Ctx) error {
	return c.JSON(a.OpenAPI())
}
