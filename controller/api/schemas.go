package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/labtap/labtap/capspec"
)

// Shared member definitions of the request schemas.
const (
	projectProperties = `{
			"name": {"type": "string", "minLength": 1, "maxLength": 255, "description": "at most 255 bytes of UTF-8, no control characters"},
			"project_id": {"oneOf": [{"$ref": "uuid.json"}, {"type": "null"}]},
			"path": {"type": ["string", "null"], "minLength": 1, "maxLength": 4096, "description": "null is the same as absent (at creation: <projects>/<project_id>)"},
			"auto_close": {"type": "boolean"},
			"capture_disk_budget": {"type": "integer", "minimum": 0, "maximum": 1125899906842624,
				"description": "labtap's extension: the bytes the project's capture files may hold on each agent (0: no bound); past it the oldest stopped files go"},
			"auto_open": {"type": "boolean"},
			"auto_start": {"type": "boolean"},
			"scene_height": {"type": "integer", "minimum": 0, "maximum": 1000000},
			"scene_width": {"type": "integer", "minimum": 0, "maximum": 1000000},
			"zoom": {"type": "integer", "minimum": 1, "maximum": 100000},
			"show_layers": {"type": "boolean"},
			"snap_to_grid": {"type": "boolean"},
			"show_grid": {"type": "boolean"},
			"grid_size": {"type": "integer", "minimum": 0, "maximum": 100000},
			"drawing_grid_size": {"type": "integer", "minimum": 0, "maximum": 100000},
			"show_interface_labels": {"type": "boolean"},
			"supplier": {"type": ["object", "null"],
				"properties": {"logo": {"type": "string", "maxLength": 2048}, "url": {"type": "string", "maxLength": 2048}}},
			"variables": {"type": ["array", "null"], "maxItems": 1000, "items": {"type": "object",
				"properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255, "description": "at most 255 bytes of UTF-8, no control characters"}, "value": {"type": "string", "maxLength": 4096}},
				"required": ["name"], "additionalProperties": false}}
		}`

	nodeProperties = `{
			"compute_id": {"type": "string", "maxLength": 255},
			"project_id": {"$ref": "uuid.json"},
			"node_id": {"$ref": "uuid.json"},
			"template_id": {"oneOf": [{"$ref": "uuid.json"}, {"type": "null"}]},
			"node_type": {"enum": ["cloud", "nat", "ethernet_hub", "ethernet_switch", "frame_relay_switch",
				"atm_switch", "docker", "dynamips", "vpcs", "traceng", "virtualbox", "vmware", "iou", "qemu"]},
			"node_directory": {"type": ["string", "null"], "maxLength": 4096},
			"command_line": {"type": ["string", "null"], "maxLength": 8192},
			"name": {"type": "string", "minLength": 1, "maxLength": 255, "description": "at most 255 bytes of UTF-8, no control characters"},
			"console": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
			"console_host": {"type": "string", "minLength": 1, "maxLength": 253},
			"console_type": {"enum": ["vnc", "telnet", "http", "https", "spice", "spice+agent", "none", null]},
			"console_auto_start": {"type": "boolean"},
			"properties": {"type": "object"},
			"status": {"enum": ["stopped", "started", "suspended"]},
			"label": {"$ref": "label.json"},
			"symbol": {"type": ["string", "null"], "minLength": 1, "maxLength": 1024},
			"width": {"type": "integer", "minimum": 0, "maximum": 1000000},
			"height": {"type": "integer", "minimum": 0, "maximum": 1000000},
			"x": {"type": "integer", "minimum": -10000000, "maximum": 10000000},
			"y": {"type": "integer", "minimum": -10000000, "maximum": 10000000},
			"z": {"type": "integer", "minimum": -1000000, "maximum": 1000000},
			"locked": {"type": "boolean"},
			"port_name_format": {"type": "string", "maxLength": 255},
			"port_segment_size": {"type": "integer", "minimum": 0, "maximum": 1000000},
			"first_port_name": {"type": ["string", "null"], "maxLength": 255},
			"custom_adapters": {"type": "array", "maxItems": 1000, "items": {"type": "object",
				"properties": {
					"adapter_number": {"type": "integer", "minimum": 0, "maximum": 65535},
					"port_name": {"type": "string", "minLength": 1, "maxLength": 255},
					"adapter_type": {"type": "string", "minLength": 1, "maxLength": 255},
					"mac_address": {"type": "string", "pattern": "^([0-9a-fA-F]{2}[:]){5}([0-9a-fA-F]{2})$"}
				},
				"required": ["adapter_number"], "additionalProperties": false}},
			"ports": {"type": "array", "maxItems": 65536, "items": {"type": "object"}}
		}`

	linkProperties = `{
			"capture_file_name": {"type": ["string", "null"], "maxLength": 255},
			"capture_file_path": {"type": ["string", "null"], "maxLength": 4096},
			"capture_compute_id": {"type": ["string", "null"], "maxLength": 255},
			"capturing": {"type": "boolean"},
			"capture": {"type": ["object", "null"]},
			"filters": {"type": "object", "additionalProperties": {"type": "array"}},
			"link_id": {"$ref": "uuid.json"},
			"link_style": {"type": "object"},
			"link_type": {"enum": ["ethernet", "serial"]},
			"nodes": {"type": "array", "maxItems": 2, "items": {"type": "object",
				"properties": {
					"node_id": {"$ref": "uuid.json"},
					"adapter_number": {"type": "integer", "minimum": 0, "maximum": 65535},
					"port_number": {"type": "integer", "minimum": 0, "maximum": 65535},
					"label": {"$ref": "label.json"}
				},
				"required": ["node_id", "adapter_number", "port_number"], "additionalProperties": false}},
			"project_id": {"$ref": "uuid.json"},
			"suspend": {"type": "boolean"}
		}`

	computeProperties = `{
			"compute_id": {"type": "string", "maxLength": 255},
			"name": {"type": "string", "maxLength": 255},
			"protocol": {"enum": ["http", "https"]},
			"host": {"type": "string", "minLength": 1, "maxLength": 253},
			"port": {"type": "integer", "minimum": 1, "maximum": 65535},
			"user": {"type": ["string", "null"], "maxLength": 255},
			"password": {"type": ["string", "null"], "maxLength": 1024},
			"use_controller_secret": {"type": "boolean", "description": "labtap: give this compute the controller-wide agent secret; only for a host matching the controller's --trusted-agents (403 otherwise). An agent registering itself proves it knows the secret by sending it in X-Labtap-Secret instead."}
		}`
)

// Request schemas, JSON Schema draft-04 as GNS3 validates them, with our fixes: a null project name and links with other than
// 0-2 endpoints are refused. They are also the request bodies of the
// OpenAPI document.
var schemaSources = map[string]string{
	"uuid": `{"type": "string", "minLength": 36, "maxLength": 36,
		"pattern": "^[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$"}`,

	"label": `{"type": "object",
		"properties": {
			"text": {"type": "string", "maxLength": 255},
			"style": {"type": ["string", "null"], "maxLength": 1024},
			"x": {"type": ["integer", "null"], "minimum": -10000000, "maximum": 10000000},
			"y": {"type": "integer", "minimum": -10000000, "maximum": 10000000},
			"rotation": {"type": "integer", "minimum": -359, "maximum": 360}
		},
		"required": ["text"], "additionalProperties": false}`,

	"project_create": `{"type": "object", "properties": ` + projectProperties + `,
		"required": ["name"], "additionalProperties": false}`,

	// GNS3 refuses project_id in a PUT although its handler means to drop
	// it: accepted here, and ignored. A null name or path (GNS3's schema
	// allows both) changes nothing.
	"project_update": `{"type": "object", "properties": ` + strings.Replace(projectProperties,
		`"name": {"type": "string",`, `"name": {"type": ["string", "null"],`, 1) + `, "additionalProperties": false}`,

	"node_create": `{"type": "object", "properties": ` + nodeProperties + `,
		"required": ["name", "node_type"], "additionalProperties": false}`, // no compute_id, or "auto": the controller places it (GNS3 3.x allocates one)

	"node_update": `{"type": "object", "properties": ` + nodeProperties + `, "additionalProperties": false}`,

	"link_create": `{"type": "object", "properties": ` + linkProperties + `,
		"required": ["nodes"], "additionalProperties": false}`,

	"link_update": `{"type": "object", "properties": ` + linkProperties + `, "additionalProperties": false}`,

	"version_check": `{"type": "object",
		"properties": {"version": {"type": "string", "maxLength": 64}, "local": {"type": "boolean"}},
		"required": ["version"], "additionalProperties": false}`,

	"compute_create": `{"type": "object", "properties": ` + computeProperties + `,
		"required": ["protocol", "host", "port"], "additionalProperties": false}`,

	"compute_drain":   `{"type": "object", "properties": {"move": {"type": "boolean"}, "restart": {"type": "boolean"}}, "additionalProperties": false}`,
	"compute_recover": `{"type": "object", "properties": {"start": {"type": "boolean"}}, "additionalProperties": false}`,
	"compute_update":  `{"type": "object", "properties": ` + computeProperties + `, "additionalProperties": false}`,

	"template_create": `{"type": "object",
		"properties": {
			"x": {"type": "integer", "minimum": -10000000, "maximum": 10000000},
			"y": {"type": "integer", "minimum": -10000000, "maximum": 10000000},
			"name": {"type": ["string", "null"], "maxLength": 255},
			"compute_id": {"type": ["string", "null"], "maxLength": 255}
		},
		"required": ["x", "y"], "additionalProperties": false}`,

	"capture_start": captureStartSchema(),

	"project_capture_start": fmt.Sprintf(`{"type": "object",
		"properties": {
			"capture_file_name": {"type": "string", "maxLength": %d,
				"description": "kept to [0-9A-Za-z_-] plus .pcapng; the default is <project>_all.pcapng; a name in use is 409"},
			"capture_filter": {"type": "string", "maxLength": %d,
				"description": "a tcpdump expression each link's capture applies: only the frames it matches are written"}
		},
		"additionalProperties": false}`, capspec.MaxFileName*4, capspec.MaxFilterLen),
}

// captureStartSchema is the body of start_capture, made from the capture
// vocabulary (package capspec): GNS3's two members, and labtap's.
func captureStartSchema() string {
	enum := func(values []string) string { b, _ := json.Marshal(values); return string(b) }
	return fmt.Sprintf(`{"type": "object",
		"properties": {
			"capture_file_name": {"type": "string", "maxLength": %[1]d,
				"description": "kept to [0-9A-Za-z_-] plus the format's extension; the default is GNS3's name of the link"},
			"data_link_type": {"enum": %[2]s},
			"capture_format": {"enum": %[3]s, "description": "labtap's extension: pcapng records who sent each frame"},
			"capture_filter": {"type": "string", "maxLength": %[4]d,
				"description": "labtap's extension: a tcpdump expression; only the frames it matches are written, every frame is still forwarded"},
			"capture_max_bytes": {"type": "integer", "minimum": 0, "maximum": %[5]d,
				"description": "labtap's extension: a file ends before it passes this size (0: no limit, else at least %[6]d); the capture stops, or goes on in the next file with capture_ring_files > 1"},
			"capture_max_seconds": {"type": "integer", "minimum": 0, "maximum": %[7]d,
				"description": "labtap's extension: a file ends this long after it began (0: no limit), as with capture_max_bytes"},
			"capture_max_packets": {"type": "integer", "minimum": 0, "maximum": %[9]d,
				"description": "labtap's extension: a file ends once it holds this many packets (0: no limit), as with capture_max_bytes"},
			"capture_ring_files": {"type": "integer", "minimum": 0, "maximum": %[8]d,
				"description": "labtap's extension: with more than 1, files name-00001.pcap, name-00002.pcap, ... follow one another at the limits, and the newest this many are kept (dumpcap -b)"}
		},
		"additionalProperties": false}`,
		capspec.MaxFileName*4, enum(capspec.DataLinkTypes()), enum(capspec.Formats()), capspec.MaxFilterLen,
		int64(capspec.MaxMaxBytes), capspec.MinMaxBytes, capspec.MaxMaxSeconds, capspec.MaxRingFiles, int64(capspec.MaxMaxPackets))
}
