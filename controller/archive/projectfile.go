package archive

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// Revision is the newest project file revision read (GNS3 2.2).
const Revision = 9

// ImportRewrite says how an archive's project.gns3 becomes the project's
// file.
type ImportRewrite struct {
	ProjectID, Name string
	// NewID, when set, gives every node, link and drawing a new id (an
	// import next to the project it came from); nil keeps the ids (a
	// snapshot restore).
	NewID func() string
	// KeepComputeIDs keeps each node's compute_id; otherwise every node is
	// placed on "local" (GNS3 spreads them over every compute, bug 3.1.13).
	KeepComputeIDs bool
	// Set replaces top-level members (e.g. auto_open).
	Set map[string]any
}

// Imported is what ImportProjectFile made.
type Imported struct {
	Data []byte // the project file
	// NodeDirs maps the node directories to move, old → new
	// ("project-files/vpcs/<old id>" → "project-files/vpcs/<new id>").
	NodeDirs map[string]string
	// NodeTypes lists each node's type, in file order.
	NodeTypes []string
}

var safeSegment = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// isDots reports a path segment that names a directory or its parent.
func isDots(s string) bool { return s == "." || s == ".." }

// ImportProjectFile checks an archive's project.gns3 and rewrites it as
// rw says. Members labtap does not model are kept as they are.
func ImportProjectFile(data []byte, rw ImportRewrite) (Imported, error) {
	doc, err := decodeProject(data)
	if err != nil {
		return Imported{}, err
	}
	if t, ok := doc["type"]; ok && t != "topology" {
		return Imported{}, refuse("Cannot import project, the project.gns3 file is corrupted")
	}
	if rev, ok := doc["revision"].(json.Number); ok {
		if n, err := rev.Int64(); err != nil || n > Revision {
			return Imported{}, refuse("This project was created with more recent version of GNS3 (file revision: %s). Please upgrade GNS3 to version 2.2 or later", rev)
		}
	}
	if id, _ := doc["project_id"].(string); id == "" {
		return Imported{}, refuse("Cannot import project, the project.gns3 file is corrupted")
	}
	if name, _ := doc["name"].(string); name == "" {
		return Imported{}, refuse("Cannot import project, the project.gns3 file is corrupted")
	}
	doc["project_id"], doc["name"] = rw.ProjectID, rw.Name
	for k, v := range rw.Set {
		doc[k] = v
	}
	topo, ok := doc["topology"].(map[string]any)
	if !ok {
		topo = map[string]any{}
		doc["topology"] = topo
	}
	out := Imported{NodeDirs: map[string]string{}}
	ids := map[string]string{}
	for _, n := range objects(topo["nodes"]) {
		id, _ := n["node_id"].(string)
		typ, _ := n["node_type"].(string)
		if id == "" || typ == "" {
			return Imported{}, refuse("Invalid data in topology file: a node has no node_id or node_type")
		}
		if isDots(id) || isDots(typ) {
			// Its directory project-files/<type>/<id> would be a parent.
			return Imported{}, refuse("Invalid data in topology file: node_id %q or node_type %q is a directory name", id, typ)
		}
		if _, dup := ids[id]; dup {
			return Imported{}, refuse("Invalid data in topology file: node %s appears twice", id)
		}
		ids[id] = id
		out.NodeTypes = append(out.NodeTypes, typ)
		if !rw.KeepComputeIDs {
			n["compute_id"] = "local"
		}
		if rw.NewID == nil {
			continue
		}
		ids[id] = rw.NewID()
		n["node_id"] = ids[id]
		if safeSegment.MatchString(typ) && safeSegment.MatchString(id) {
			out.NodeDirs["project-files/"+typ+"/"+id] = "project-files/" + typ + "/" + ids[id]
		}
	}
	if rw.NewID != nil {
		for _, l := range objects(topo["links"]) {
			l["link_id"] = rw.NewID()
			for _, e := range objects(l["nodes"]) {
				if id, _ := e["node_id"].(string); ids[id] != "" {
					e["node_id"] = ids[id]
				}
			}
		}
		for _, d := range objects(topo["drawings"]) {
			d["drawing_id"] = rw.NewID()
		}
	}
	out.Data, err = encodeProject(doc)
	if err != nil {
		return Imported{}, fmt.Errorf("encode project file: %w", err)
	}
	return out, nil
}
