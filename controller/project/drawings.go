package project

import "encoding/json"

// Extra holds the members of a stored entry that labtap does not model
// (what a newer GNS3 writes, properties of other tools), kept as the JSON
// values they were and written back unchanged.
type Extra map[string]json.RawMessage

// FileExtra is what a project file holds beyond what labtap models: unknown
// members of the file itself and of its "topology" object ("computes"
// included).
type FileExtra struct {
	File, Topology Extra
}

// Drawing is a note, shape or picture of a project: an SVG document placed
// on the canvas.
type Drawing struct {
	ID, ProjectID string
	X, Y, Z       int
	Locked        bool
	Rotation      int
	// SVG is the drawing's SVG text, or the name of a file in the project's
	// project-files/images/ holding it (GNS3 offloads pictures there).
	SVG   string
	Extra Extra
}
