package project

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image"
	_ "image/gif" // pictures GNS3 stored
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/labtap/labtap/internal/atomicfile"
)

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

// Drawing events, on the project's stream.
const (
	DrawingCreated = "drawing.created"
	DrawingUpdated = "drawing.updated"
	DrawingDeleted = "drawing.deleted"
)

// imagesDir is where a project keeps drawings' pictures and long SVGs, by
// content hash, as GNS3 does (the .gns3 file stays small, and archives and
// snapshots carry them).
const imagesDir = "project-files/images"

// inlineSVG is the longest SVG kept in the project file; a longer one goes
// to imagesDir (GNS3's limit).
const inlineSVG = 1000

// DrawingUpdate sets a drawing's members; nil members stay (or take their
// default at creation: x, y 0, z 2, unlocked, no rotation, "<svg></svg>").
type DrawingUpdate struct {
	X, Y, Z, Rotation *int
	Locked            *bool
	SVG               *string
}

// Drawings are the notes, shapes and pictures of projects.
type Drawings struct {
	core *core
}

// List lists a project's drawings in creation order. An opened
// project's carry their SVG text; a closed project's are as stored (the
// SVG may be a file name), as GNS3 answers.
func (s *Drawings) List(projectID string) ([]Drawing, error) {
	st, err := s.core.lookup(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	p, list := st.p, slices.Clone(st.drawings)
	st.mu.RUnlock()
	if p.Status == Opened {
		for i := range list {
			list[i].SVG = s.resolveSVG(p, list[i].SVG)
		}
	}
	return list, nil
}

// Get returns one drawing of an opened project.
func (s *Drawings) Get(projectID, id string) (Drawing, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return Drawing{}, err
	}
	st.mu.RLock()
	i := st.drawingLocked(id)
	var d Drawing
	if i >= 0 {
		d = st.drawings[i]
	}
	p := st.p
	st.mu.RUnlock()
	if i < 0 {
		return Drawing{}, drawingNotFound(id)
	}
	d.SVG = s.resolveSVG(p, d.SVG)
	return d, nil
}

func drawingNotFound(id string) error {
	return errorf(ErrNotFound, "Drawing ID %s doesn't exist", id)
}

// drawingLocked is the index of a drawing, -1 if none. st.mu must be held.
func (st *state) drawingLocked(id string) int {
	return slices.IndexFunc(st.drawings, func(d Drawing) bool { return d.ID == id })
}

// Create adds a drawing to an opened project (id "" picks one). An
// id that exists returns that drawing unchanged, as GNS3 does (the GUI
// re-sends drawings it believes lost).
func (s *Drawings) Create(ctx context.Context, projectID, id string, u DrawingUpdate) (_ Drawing, err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Drawing{}, err
	}
	defer st.unlock(&err)
	if id == "" {
		id = uuid.NewString()
	}
	st.mu.RLock()
	i := st.drawingLocked(id)
	p := st.p
	var existing Drawing
	if i >= 0 {
		existing = st.drawings[i]
	}
	st.mu.RUnlock()
	if i >= 0 {
		existing.SVG = s.resolveSVG(p, existing.SVG)
		return existing, nil
	}
	d := Drawing{ID: id, ProjectID: projectID, Z: 2, SVG: "<svg></svg>"}
	full, err := s.apply(p, &d, u)
	if err != nil {
		return Drawing{}, err
	}
	st.mu.Lock()
	st.drawings = append(st.drawings, d)
	st.mu.Unlock()
	if err := s.core.save(st); err != nil {
		st.mu.Lock()
		st.drawings = slices.DeleteFunc(st.drawings, func(x Drawing) bool { return x.ID == id })
		st.mu.Unlock()
		return Drawing{}, err
	}
	out := d
	out.SVG = full
	s.core.emitLocked(st, Event{Action: DrawingCreated, Drawing: &out})
	return out, nil
}

// Update changes a drawing. A change announces drawing.updated,
// with the SVG only when it changed (GNS3); a request that changes nothing
// announces nothing (the GUI sends one for every mouse release).
func (s *Drawings) Update(ctx context.Context, projectID, id string, u DrawingUpdate) (_ Drawing, err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return Drawing{}, err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	i := st.drawingLocked(id)
	p := st.p
	var old Drawing
	if i >= 0 {
		old = st.drawings[i]
	}
	st.mu.RUnlock()
	if i < 0 {
		return Drawing{}, drawingNotFound(id)
	}
	d := old
	full, err := s.apply(p, &d, u)
	if err != nil {
		return Drawing{}, err
	}
	out := d
	out.SVG = full
	if reflect.DeepEqual(d, old) {
		return out, nil
	}
	st.mu.Lock()
	st.drawings[st.drawingLocked(id)] = d
	st.mu.Unlock()
	if err := s.core.save(st); err != nil {
		st.mu.Lock()
		st.drawings[st.drawingLocked(id)] = old
		st.mu.Unlock()
		return Drawing{}, err
	}
	ev := out
	s.core.emitLocked(st, Event{Action: DrawingUpdated, Drawing: &ev, OmitSVG: d.SVG == old.SVG})
	return out, nil
}

// Delete removes a drawing that is not locked.
func (s *Drawings) Delete(ctx context.Context, projectID, id string) (err error) {
	st, err := s.core.lockOpened(projectID)
	if err != nil {
		return err
	}
	defer st.unlock(&err)
	st.mu.RLock()
	i := st.drawingLocked(id)
	p := st.p
	var old Drawing
	if i >= 0 {
		old = st.drawings[i]
	}
	st.mu.RUnlock()
	if i < 0 {
		return drawingNotFound(id)
	}
	if old.Locked {
		return errorf(ErrConflict, "Drawing ID %s cannot be deleted because it is locked", id)
	}
	before := slices.Clone(st.drawings)
	st.mu.Lock()
	st.drawings = slices.Delete(slices.Clone(st.drawings), i, i+1)
	st.mu.Unlock()
	if err := s.core.save(st); err != nil {
		st.mu.Lock()
		st.drawings = before
		st.mu.Unlock()
		return err
	}
	old.SVG = s.resolveSVG(p, old.SVG)
	s.core.emitLocked(st, Event{Action: DrawingDeleted, Drawing: &old})
	return nil
}

// apply sets u's members on d, checking and storing a new SVG; it
// returns d's SVG text (d.SVG may be a file name).
func (s *Drawings) apply(p Project, d *Drawing, u DrawingUpdate) (string, error) {
	if u.Rotation != nil && (*u.Rotation < -359 || *u.Rotation > 360) {
		return "", errorf(ErrInvalid, "rotation %d is not within -359..360", *u.Rotation)
	}
	set(&d.X, u.X)
	set(&d.Y, u.Y)
	set(&d.Z, u.Z)
	set(&d.Rotation, u.Rotation)
	set(&d.Locked, u.Locked)
	if u.SVG == nil {
		return s.resolveSVG(p, d.SVG), nil
	}
	text, err := sanitizeSVG(*u.SVG)
	if err != nil {
		return "", err
	}
	if text == s.resolveSVG(p, d.SVG) {
		return text, nil // unchanged: keep how it is stored
	}
	d.SVG = text
	if data, ext, ok := embeddedPicture(text); ok {
		// GNS3's "Insert picture": the picture goes to the project's
		// images as <md5>.<type>, and reads give it back in an SVG of its
		// size (as GNS3 does, so archives move between the two).
		sum := md5.Sum(data)
		name := hex.EncodeToString(sum[:]) + "." + ext
		if err := storeImage(p, name, data); err != nil {
			return "", err
		}
		d.SVG = name
		return s.resolveSVG(p, name), nil
	}
	if len(text) > inlineSVG {
		sum := md5.Sum([]byte(text))
		name := hex.EncodeToString(sum[:]) + ".svg"
		if err := storeImage(p, name, []byte(text)); err != nil {
			return "", err
		}
		d.SVG = name
	}
	return text, nil
}

// storeImage writes a drawing's picture or long SVG into the project's
// images, named by its content.
func storeImage(p Project, name string, data []byte) error {
	dir := filepath.Join(p.Path, filepath.FromSlash(imagesDir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &Error{Kind: ErrConflict, Msg: "Could not store the drawing", Err: err}
	}
	if err := atomicfile.Write(filepath.Join(dir, name), data, 0o644); err != nil {
		return &Error{Kind: ErrConflict, Msg: "Could not store the drawing", Err: err}
	}
	return nil
}

// maxPicturePixels bounds an embedded picture's width × height (a
// decompression bomb is a few bytes of PNG).
const maxPicturePixels = 64 << 20

// embeddedPicture finds GNS3's picture drawing in an SVG: a root whose one
// child element is an <image> whose (xlink:)href is a base64 data: URI of
// a PNG, JPEG or GIF picture whose header reads as one. It returns the
// picture's bytes and its file extension. The SVG text is bounded by
// MaxSVG, so the picture is too.
func embeddedPicture(text string) ([]byte, string, bool) {
	d := xml.NewDecoder(strings.NewReader(text))
	depth, children := 0, 0
	var href string
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 2 {
				children++
				if t.Name.Local != "image" {
					return nil, "", false
				}
				for _, a := range t.Attr {
					if a.Name.Local == "href" && (a.Name.Space == "" || a.Name.Space == "xlink") {
						href = a.Value
					}
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	if children != 1 {
		return nil, "", false
	}
	mime, payload, ok := strings.Cut(strings.TrimPrefix(href, "data:"), ";base64,")
	if !ok || !strings.HasPrefix(href, "data:image/") {
		return nil, "", false
	}
	ext := strings.TrimPrefix(mime, "image/")
	if ext != "png" && ext != "jpeg" && ext != "gif" {
		return nil, "", false
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(payload), ""))
	if err != nil {
		return nil, "", false
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || format != ext || cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPicturePixels {
		return nil, "", false
	}
	return data, ext, true
}

// resolveSVG returns a stored drawing's SVG text: the value itself, or for
// a file name (GNS3 offloads pictures and long SVGs) the file's SVG, a
// picture wrapped in an SVG of its size, or "<svg></svg>" when the file is
// missing or unreadable. SVG text is cleaned (sanitizeSVG) here, as it is
// served: the files API and imported archives write what it is read from
// without the drawings API's check.
func (s *Drawings) resolveSVG(p Project, stored string) string {
	const empty = "<svg></svg>"
	clean := func(text string) string {
		out, err := sanitizeSVG(text)
		if err != nil {
			s.core.log.Warn("drawing SVG not served", "project", p.ID, "err", err)
			return empty
		}
		return out
	}
	if strings.Contains(stored, "<svg") {
		return clean(stored)
	}
	name := filepath.Base(filepath.Clean("/" + stored))
	if name == "/" || name == "." {
		return empty
	}
	root, err := os.OpenRoot(filepath.Join(p.Path, filepath.FromSlash(imagesDir)))
	if err != nil {
		return empty
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		s.core.log.Warn("drawing picture missing", "project", p.ID, "file", name)
		return empty
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSVG+1))
	if err != nil || len(data) > MaxSVG {
		return empty
	}
	if strings.HasSuffix(strings.ToLower(name), ".svg") {
		return clean(string(data))
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return empty
	}
	return fmt.Sprintf("<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" height=\"%d\" width=\"%d\">\n"+
		"<image height=\"%d\" width=\"%d\" xlink:href=\"data:image/%s;base64,%s\" />\n</svg>",
		cfg.Height, cfg.Width, cfg.Height, cfg.Width, format, base64.StdEncoding.EncodeToString(data))
}
