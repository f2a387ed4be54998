package api_test

import (
	"os"
	"path/filepath"
	"testing"
)

// gns3File is a project file as GNS3 2.2 writes it: written
// here from GNS3 2.2's layout, with two VPCS and a link between them, a
// filter, a suspended link and the keys GNS3 adds that we do not use.
const gns3File = `{
    "auto_close": true,
    "auto_open": false,
    "auto_start": false,
    "drawing_grid_size": 25,
    "grid_size": 75,
    "name": "from-gns3",
    "project_id": "5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e6f",
    "revision": 9,
    "scene_height": 1000,
    "scene_width": 2000,
    "show_grid": false,
    "show_interface_labels": false,
    "show_layers": false,
    "snap_to_grid": false,
    "supplier": null,
    "topology": {
        "computes": [],
        "drawings": [
            {"drawing_id": "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "locked": false, "rotation": 0,
             "svg": "<svg height=\"10\" width=\"10\"></svg>", "x": 0, "y": 0, "z": 0}
        ],
        "links": [
            {
                "filters": {"delay": [20, 5]},
                "link_id": "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d",
                "link_style": {},
                "nodes": [
                    {"adapter_number": 0, "label": {"rotation": 0, "style": "font-size: 10", "text": "e0", "x": 60, "y": 25},
                     "node_id": "11111111-1111-4111-8111-111111111111", "port_number": 0},
                    {"adapter_number": 0, "label": {"rotation": 0, "style": "font-size: 10", "text": "e0", "x": -5, "y": 20},
                     "node_id": "22222222-2222-4222-8222-222222222222", "port_number": 0}
                ],
                "suspend": true
            }
        ],
        "nodes": [
            {
                "compute_id": "local", "console": 5000, "console_auto_start": false, "console_type": "telnet",
                "custom_adapters": [], "first_port_name": null, "height": 59,
                "label": {"rotation": 0, "style": "font-size: 10", "text": "PC1", "x": 17, "y": -25},
                "locked": false, "name": "PC1", "node_id": "11111111-1111-4111-8111-111111111111", "node_type": "vpcs",
                "port_name_format": "Ethernet{0}", "port_segment_size": 0, "properties": {},
                "symbol": ":/symbols/computer.svg", "template_id": "19021f99-e36f-394d-b4a1-8aaa902ab9cc",
                "width": 65, "x": -200, "y": -100, "z": 1
            },
            {
                "compute_id": "local", "console": 5001, "console_auto_start": false, "console_type": "telnet",
                "custom_adapters": [], "first_port_name": null, "height": 59,
                "label": {"rotation": 0, "style": "font-size: 10", "text": "PC2", "x": 17, "y": -25},
                "locked": false, "name": "PC2", "node_id": "22222222-2222-4222-8222-222222222222", "node_type": "vpcs",
                "port_name_format": "Ethernet{0}", "port_segment_size": 0, "properties": {},
                "symbol": ":/symbols/computer.svg", "template_id": "19021f99-e36f-394d-b4a1-8aaa902ab9cc",
                "width": 65, "x": 100, "y": -100, "z": 1
            }
        ]
    },
    "type": "topology",
    "variables": null,
    "version": "2.2.59",
    "zoom": 100
}
`

func TestAProjectWrittenByGNS3Opens(t *testing.T) {
	t.Parallel()
	const id = "5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e6f"
	s := newServerWith(t, func(data string) {
		dir := filepath.Join(data, "projects", id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "from-gns3.gns3"), []byte(gns3File), 0o644)
	})
	p := s.must("GET", "/v2/projects/"+id, nil, 200, rProject)
	if p.body["status"] != "closed" || p.body["name"] != "from-gns3" || p.body["filename"] != "from-gns3.gns3" {
		t.Fatalf("loaded project: %s", p.raw)
	}
	if nodes := s.must("GET", "/v2/projects/"+id+"/nodes", nil, 200, rNodes); len(nodes.list) != 2 {
		t.Fatalf("closed project nodes: %s", nodes.raw)
	}
	s.must("POST", "/v2/projects/"+id+"/open", nil, 201, rProject+"/open")
	n := s.must("GET", "/v2/projects/"+id+"/nodes/11111111-1111-4111-8111-111111111111", nil, 200, rNode)
	if n.body["name"] != "PC1" || n.body["x"] != -200.0 || n.body["status"] != "stopped" || n.body["label"].(map[string]any)["x"] != 17.0 {
		t.Fatalf("opened node: %s", n.raw)
	}
	l := s.must("GET", "/v2/projects/"+id+"/links/7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d", nil, 200, rLink)
	if l.body["suspend"] != true || l.body["filters"].(map[string]any)["delay"] == nil || l.body["capturing"] != false {
		t.Fatalf("opened link: %s", l.raw)
	}
	// The link works: both nodes start and a capture runs on it.
	for _, nid := range []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"} {
		s.must("POST", "/v2/projects/"+id+"/nodes/"+nid+"/start", nil, 200, rNode+"/start")
	}
	s.must("POST", "/v2/projects/"+id+"/links/7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d/start_capture", nil, 201, rStart)
}

func TestANewerProjectFileRevisionIsNotLoaded(t *testing.T) {
	t.Parallel()
	s := newServerWith(t, func(data string) {
		dir := filepath.Join(data, "projects", "x")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "x.gns3"), []byte(`{"name": "x", "project_id": "5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e60", "revision": 10, "type": "topology", "topology": {}}`), 0o644)
	})
	s.must("GET", "/v2/projects/5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e60", nil, 404, rProject)
}
