package api

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/archive"
	"github.com/labtap/labtap/controller/project"
)

// Portable projects, duplicates and snapshots, as GNS3 2.2 has them:
// parsing and replies here, the work in project.Service and
// package archive.

const (
	rImport        = "/v2/projects/{project_id}/import"
	gns3projectCT  = "application/gns3project"
	defaultMaxSize = 10 << 30
)

// The route docs and request schemas of this file, added to the shared
// maps before New reads them.
func init() {
	maps.Copy(routeDocs, archiveRouteDocs)
	maps.Copy(schemaSources, archiveSchemas)
	maps.Copy(responseSchemas, archiveResponseSchemas)
}

var archiveResponseSchemas = map[string]string{
	"snapshot": `{"type": "object", "properties": {
		"snapshot_id": {"type": "string", "format": "uuid"}, "project_id": {"type": "string", "format": "uuid"},
		"name": {"type": "string"}, "description": {"type": "string"}, "filename": {"type": "string"},
		"created_at": {"type": "integer", "description": "UTC seconds"}}}`,
	"snapshots": `{"type": "array", "items": {"$ref": "#/components/schemas/snapshot"}}`,
}

var archiveRouteDocs = map[string]routeDoc{
	"GET /v2/projects/{project_id}/export":                           {"Export a portable project (.gns3project zip, GNS3 2.2's layout), streamed as it is made; every node must be stopped. Query: include_snapshots, include_images, reset_mac_addresses, keep_compute_ids (yes/no), compression (none, zip, bzip2, lzma)", "", 200, "gns3project", []int{400, 404, 409}},
	"POST /v2/projects/{project_id}/import":                          {"Import a portable project under this id: raw body or multipart/form-data (first file part), streamed to disk; ?name= picks the name. Entries that are not regular files or could leave the project are refused; node types this server cannot run are kept, stopped", "archive", 201, "project", []int{400, 409, 413}},
	"POST /v2/projects/{project_id}/duplicate":                       {"Copy a project (closed, new ids), running nodes and all: the nodes' files come from their computes", "project_duplicate", 201, "project", []int{400, 403, 404, 409, 413}},
	"GET /v2/projects/{project_id}/snapshots":                        {"List a project's snapshots by creation time", "", 200, "snapshots", []int{404, 409}},
	"POST /v2/projects/{project_id}/snapshots":                       {"Take a snapshot of an opened project whose nodes are stopped", "snapshot_create", 201, "snapshot", []int{400, 403, 404, 409, 413}},
	"DELETE /v2/projects/{project_id}/snapshots/{snapshot_id}":       {"Delete a snapshot", "", 204, "", []int{403, 404, 409}},
	"POST /v2/projects/{project_id}/snapshots/{snapshot_id}/restore": {"Put the project back as the snapshot has it (atomic; snapshot.restored on the project stream)", "", 201, "project", []int{403, 404, 409}},
}

var archiveSchemas = map[string]string{
	"project_duplicate": `{"type": "object", "properties": ` + strings.Replace(strings.Replace(projectProperties,
		`"name": {"type": "string", "minLength": 1, "maxLength": 255,`,
		`"reset_mac_addresses": {"type": "boolean"}, "name": {"type": ["string", "null"], "minLength": 1, "maxLength": 255,`, 1),
		`"path": {"type": ["string", "null"], "minLength": 1, "maxLength": 4096, "description": "null is the same as absent (at creation: <projects>/<project_id>)"},`, `"path": {"type": ["string", "null"], "maxLength": 4096},`, 1) + `,
		"required": ["name"], "additionalProperties": false}`,
	"snapshot_create": `{"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1, "maxLength": 255},
			"description": {"type": "string", "minLength": 1, "maxLength": 1024}
		},
		"required": ["name"], "additionalProperties": false}`,
}

// archiveRoutes answer a project's export, import and duplicate routes.
type archiveRoutes struct {
	resource
	maxImport int64 // Config.MaxImportSize
}

func (a *API) registerArchive(app *fiber.App) {
	const p = "/v2/projects/{project_id}"
	ar := archiveRoutes{a.resource(), a.cfg.MaxImportSize}
	a.handle(app, "GET", p+"/export", ar.exportProject)
	a.handle(app, "POST", p+"/import", ar.importProject)
	a.handle(app, "POST", p+"/duplicate", ar.duplicateProject)
	sr := snapshotRoutes{a.resource()}
	a.handle(app, "GET", p+"/snapshots", sr.listSnapshots)
	a.handle(app, "POST", p+"/snapshots", sr.createSnapshot)
	a.handle(app, "DELETE", p+"/snapshots/{snapshot_id}", sr.deleteSnapshot)
	a.handle(app, "POST", p+"/snapshots/{snapshot_id}/restore", sr.restoreSnapshot)
}

// yes reads one of GNS3's yes/no query parameters: "yes" in any case is
// true, anything else false.
func yes(c *fiber.Ctx, name string) bool { return strings.EqualFold(c.Query(name), "yes") }

func (h archiveRoutes) exportProject(c *fiber.Ctx) error {
	comp, err := archive.ParseCompression(c.Query("compression"))
	if err != nil {
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	}
	opts := project.ExportOptions{
		IncludeImages:    yes(c, "include_images"),
		IncludeSnapshots: yes(c, "include_snapshots"),
		ResetMACs:        yes(c, "reset_mac_addresses"),
		// GNS3 reads keep_compute_ids; the spelling without "s" is taken too.
		KeepComputeIDs: yes(c, "keep_compute_ids") || yes(c, "keep_compute_id"),
		Compression:    comp,
	}
	exp, err := h.projects.Archives.Export(c.UserContext(), c.Params("project_id"), opts)
	if err != nil {
		return err
	}
	// The zip is made as it is sent: a pipe from the writer to the body.
	// Fasthttp closes the body when the reply ends, early or not, which
	// stops the writer and waits for it (the project is released then).
	body := writerBody(func(w io.Writer) error {
		_, err := exp.WriteTo(w)
		return err
	})
	c.Set(fiber.HeaderContentType, gns3projectCT)
	c.Set(fiber.HeaderContentDisposition, attachment(exp.Name+".gns3project"))
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Context().SetBodyStream(body, -1)
	return nil
}

// pipeBody is a reply body that a writer goroutine makes as it is read.
// The body owns the goroutine: Close stops the writer (its writes fail)
// and returns once it has ended.
type pipeBody struct {
	*io.PipeReader
	done chan struct{}
}

// writerBody starts write on a goroutine of its own, writing into the
// body it returns; write's error ends the body.
func writerBody(write func(io.Writer) error) *pipeBody {
	pr, pw := io.Pipe()
	b := &pipeBody{PipeReader: pr, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		pw.CloseWithError(write(pw))
	}()
	return b
}

// Close stops the writer and waits for it to end.
func (b *pipeBody) Close() error {
	b.PipeReader.Close()
	<-b.done
	return nil
}

// attachment is a Content-Disposition that survives any file name (RFC
// 6266): an ASCII fallback, and the name itself percent-encoded.
func attachment(name string) string {
	fallback := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, fallback, strings.ReplaceAll(url.PathEscape(name), "'", "%27"))
}

// importProject streams the archive (raw, or the first file of a
// multipart/form-data body: the web UI) to the service, which spools it to
// disk; the body never sits in memory and is bounded by MaxImportSize.
func (h archiveRoutes) importProject(c *fiber.Ctx) error {
	limit := h.maxImport
	if limit <= 0 {
		limit = defaultMaxSize
	}
	tooLarge := &project.Error{Kind: project.ErrTooLarge, Msg: fmt.Sprintf("Project archive over %d bytes", limit)}
	if cl := c.Request().Header.ContentLength(); cl > 0 && int64(cl) > limit+64<<10 {
		c.Context().SetConnectionClose() // the body stays unread
		return tooLarge
	}
	var body io.Reader = deadlineReader{c: c, r: c.Context().RequestBodyStream()}
	if !c.Request().IsBodyStream() {
		body = strings.NewReader(string(c.Request().Body()))
	}
	if mt, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); err == nil && mt == "multipart/form-data" {
		part, err := firstFile(multipart.NewReader(body, params["boundary"]))
		if err != nil {
			c.Context().SetConnectionClose()
			return fiber.NewError(fiber.StatusBadRequest, "Invalid multipart body: "+err.Error())
		}
		body = part
	}
	p, err := h.projects.Archives.Import(c.UserContext(), c.Params("project_id"), &limitedReader{r: body, left: limit, err: tooLarge}, c.Query("name"))
	if err != nil {
		c.Context().SetConnectionClose() // the body may be partly unread
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}

// firstFile returns the first part of a multipart body that carries a
// file, or the first part if none names one.
func firstFile(mr *multipart.Reader) (*multipart.Part, error) {
	var first *multipart.Part
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			if first != nil {
				return nil, errors.New("no file part")
			}
			return nil, errors.New("no part")
		}
		if err != nil {
			return nil, err
		}
		if part.FileName() != "" {
			return part, nil
		}
		if first == nil {
			first = part
		}
	}
}

// limitedReader reads at most left bytes, then fails with err.
type limitedReader struct {
	r    io.Reader
	left int64
	err  error
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(l.r, one[:])
		if n > 0 {
			return 0, l.err
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// deadlineReader gives a long upload a minute for each read, instead of
// the server's read timeout for the whole request.
type deadlineReader struct {
	c *fiber.Ctx
	r io.Reader
}

func (d deadlineReader) Read(p []byte) (int, error) {
	if conn := d.c.Context().Conn(); conn != nil {
		conn.SetReadDeadline(time.Now().Add(time.Minute))
	}
	return d.r.Read(p)
}

// projectDuplicateRequest is the body of POST .../duplicate: the project
// create body (members other than name and path are ignored, as in GNS3)
// plus reset_mac_addresses.
type projectDuplicateRequest struct {
	Name      *string `json:"name"`
	Path      *string `json:"path"`
	ResetMACs bool    `json:"reset_mac_addresses"`
}

func (h archiveRoutes) duplicateProject(c *fiber.Ctx) error {
	var req projectDuplicateRequest
	if err := h.decode(c, "project_duplicate", &req); err != nil {
		return err
	}
	if req.Path != nil && *req.Path != "" {
		// GNS3 allows a path only to its --local mode; labtap has none.
		return &project.Error{Kind: project.ErrForbidden, Msg: "The path is not allowed"}
	}
	dup := project.DuplicateRequest{ResetMACs: req.ResetMACs}
	if req.Name != nil {
		dup.Name = *req.Name
	}
	p, err := h.projects.Archives.Duplicate(c.UserContext(), c.Params("project_id"), dup)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(projectFrom(p))
}
