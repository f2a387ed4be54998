// Package api is an agent's HTTP API: the proto routes, decoded, handed to
// the agent's state, and answered with proto bodies; plus the capture
// stream, which follows a growing capture file until the capture stops.
package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/labtap/labtap/captures"
	"github.com/labtap/labtap/metrics"
	"github.com/labtap/labtap/proto"
)

// Parts are the agent's state the API drives, each by the part that owns
// it: with a *host.Host h, Service is h, and the others h.Captures,
// h.Filters, h.Events and h.Images. Errors should be *proto.Error;
// anything else is reported as an internal error.
type Parts struct {
	Service  Service
	Captures CaptureService
	Filters  FilterChecker
	Events   EventSource
	// Images serves the image and QEMU wizard routes; nil leaves them out.
	Images ImageService
}

// Service is the agent's projects, nodes and links. *host.Host satisfies
// it.
type Service interface {
	Info() proto.AgentInfo
	OpenProject(spec proto.ProjectSpec) error
	CloseProject(ctx context.Context, projectID string) error
	CreateNode(ctx context.Context, projectID string, spec proto.NodeSpec) (proto.NodeState, error)
	Node(projectID, nodeID string) (proto.NodeState, error)
	SetNodeStatus(ctx context.Context, projectID, nodeID, status string) (proto.NodeState, error)
	DeleteNode(ctx context.Context, projectID, nodeID string) error
	PutLink(projectID string, spec proto.LinkSpec) error
	Link(projectID, linkID string) (proto.LinkState, error)
	DeleteLink(projectID, linkID string) error
	ReserveTunnelPort(projectID, id string) (proto.TunnelPort, error)
	ReleaseTunnelPort(projectID, id string) error
	// NodeFile reads a file of a node's directory; WriteNodeFile replaces
	// one. Paths stay inside the directory.
	NodeFile(projectID, nodeID, name string) ([]byte, error)
	WriteNodeFile(projectID, nodeID, name string, data []byte) error
	// ResetConsole disconnects every client of a node's console.
	ResetConsole(projectID, nodeID string) error
	State() proto.AgentState
	// DockerImages lists the Docker Engine's image tags, sorted.
	DockerImages(ctx context.Context) ([]string, error)
	// Interfaces lists the host's network interfaces, sorted by name.
	Interfaces() ([]proto.HostInterface, error)
}

// CaptureService runs the captures of links. *host.Captures satisfies it.
type CaptureService interface {
	Start(projectID, linkID string, spec proto.CaptureSpec) (proto.CaptureState, error)
	Stop(projectID, linkID string) (proto.CaptureState, error)
	State(projectID, linkID string) (proto.CaptureState, error)
	// File returns a link's running capture, for streaming.
	File(projectID, linkID string) (*captures.Ring, error)
}

// CaptureFileService is what a CaptureService adds to serve the files of
// a project's captures folder. *host.Captures satisfies it.
type CaptureFileService interface {
	// Files lists the capture files of a project, running and stopped.
	Files(projectID string) ([]proto.CaptureFileInfo, error)
	// OpenFile returns size bytes of whole records of a capture file, to
	// send from body, which the caller closes.
	OpenFile(projectID, name string) (size int64, body io.ReadCloser, err error)
	// DeleteFile removes a stopped capture file.
	DeleteFile(projectID, name string) error
}

// FilterChecker compiles bpf filter expressions for a data link type, as
// a link would. *host.Filters satisfies it.
type FilterChecker interface {
	Check(dataLinkType string, bpf []string) error
}

// EventSource is what the controller follows. *host.Events satisfies it.
type EventSource interface {
	// Subscribe follows the agent's events until cancel is called; the
	// channel is closed when the agent drops the follower or ends.
	Subscribe() (events <-chan proto.Event, cancel func())
}

// StatisticsService is what a Service adds to report its host's figures.
// *host.Host satisfies it.
type StatisticsService interface {
	Statistics() proto.Statistics
}

// ConsoleDialer is what a Service adds to connect to a node's console.
// *host.Host satisfies it.
type ConsoleDialer interface {
	DialConsole(ctx context.Context, projectID, nodeID string) (net.Conn, error)
}

// NodeCopier is what a Service adds to copy a node's directory into
// another's (a duplicate). *host.Host satisfies it.
type NodeCopier interface {
	CopyNodeDir(projectID, fromID, toID string) error
}

// ConsoleAccessor takes the controller's word on who may connect to node
// consoles (proto.ConsolesPath). *host.Host satisfies it.
type ConsoleAccessor interface {
	SetConsoleAccess(a proto.ConsoleAccess) error
}

// ImageService serves images and the QEMU wizard's routes. *host.Images
// satisfies it.
type ImageService interface {
	Images(ctx context.Context, nodeType string) ([]proto.Image, error)
	WriteImage(nodeType, path string, r io.Reader, limit int64) error
	QemuBinariesList(ctx context.Context, archs []string) []proto.QemuBinary
	QemuImgBinaries(ctx context.Context) []proto.QemuBinary
	QemuCapabilities() proto.QemuCapabilities
	// ImageFile opens an image for reading.
	ImageFile(nodeType, path string) (*os.File, error)
	// CreateQemuImg and ResizeQemuImg run qemu-img create and resize on a
	// disk inside the images folder or a project's folder.
	CreateQemuImg(ctx context.Context, c proto.QemuImgCreate) error
	ResizeQemuImg(ctx context.Context, r proto.QemuImgResize) error
}

// DiskService is what a Service adds to grow a QEMU node's disks.
// *host.Host satisfies it.
type DiskService interface {
	// ResizeDisk grows a disk of a stopped QEMU node.
	ResizeDisk(ctx context.Context, projectID, nodeID string, r proto.ResizeDisk) error
}

// Config configures the handler.
type Config struct {
	// Secret, when set, must be sent in proto.SecretHeader on every call.
	Secret string
	// MaxImageBytes bounds one image upload; 0 means 128 GiB.
	MaxImageBytes int64
	// Metrics, when set, answers GET /metrics (behind the secret too).
	Metrics http.Handler
	// Requests counts the requests answered; nil counts nothing.
	Requests *metrics.HTTP
	// PingInterval is how often the events stream pings; 0 means
	// proto.PingInterval, what controllers expect (tests shorten it).
	PingInterval time.Duration
	Logger       *slog.Logger
}

// maxBody bounds request bodies; every agent request is small JSON.
const maxBody = 1 << 20

type handlers struct {
	svc      Service
	caps     CaptureService
	filters  FilterChecker
	feed     EventSource
	secret   []byte
	maxImage int64
	requests *metrics.HTTP
	ping     time.Duration
	log      *slog.Logger
}

// NewHandler returns the agent's HTTP handler. Every part but Images must
// be set.
func NewHandler(parts Parts, cfg Config) http.Handler {
	if parts.Service == nil || parts.Captures == nil || parts.Filters == nil || parts.Events == nil {
		panic("api.NewHandler: Parts.Service, Captures, Filters and Events must be set")
	}
	svc := parts.Service
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = 128 << 30
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = proto.PingInterval
	}
	h := &handlers{svc: svc, caps: parts.Captures, filters: parts.Filters, feed: parts.Events, secret: []byte(cfg.Secret), maxImage: cfg.MaxImageBytes, requests: cfg.Requests, ping: cfg.PingInterval, log: cfg.Logger}
	mux := &routes{ServeMux: http.NewServeMux()}
	const p, n, l = "/v1/projects/{project}", "/v1/projects/{project}/nodes/{node}", "/v1/projects/{project}/links/{link}"
	mux.HandleFunc("GET "+proto.InfoPath, h.info)
	mux.HandleFunc("GET "+proto.DockerImagesPath, h.dockerImages)
	mux.HandleFunc("GET "+proto.InterfacesPath, h.interfaces)
	mux.HandleFunc("PUT "+proto.FilterCheckPath, h.checkFilters)
	mux.HandleFunc("PUT "+p, h.openProject)
	mux.HandleFunc("DELETE "+p, h.closeProject)
	mux.HandleFunc("PUT "+n, h.createNode)
	mux.HandleFunc("GET "+n, h.node)
	mux.HandleFunc("DELETE "+n, h.deleteNode)
	mux.HandleFunc("PUT "+n+"/status", h.setNodeStatus)
	mux.HandleFunc("GET "+n+"/files/{path...}", h.nodeFile)
	mux.HandleFunc("PUT "+n+"/files/{path...}", h.writeNodeFile)
	mux.HandleFunc("POST "+n+"/console/reset", h.resetConsole)
	if st, ok := svc.(StatisticsService); ok {
		mux.HandleFunc("GET "+proto.StatisticsPath, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, st.Statistics())
		})
	}
	if cd, ok := svc.(ConsoleDialer); ok {
		mux.HandleFunc("GET "+n+"/console", func(w http.ResponseWriter, r *http.Request) {
			h.serveConsole(w, r, cd)
		})
	}
	if ca, ok := svc.(ConsoleAccessor); ok {
		mux.HandleFunc("PUT "+proto.ConsolesPath, func(w http.ResponseWriter, r *http.Request) {
			var body proto.ConsoleAccess
			if !decode(w, r, &body) {
				return
			}
			h.reply(w, nil, ca.SetConsoleAccess(body))
		})
	}
	if c, ok := svc.(NodeCopier); ok {
		mux.HandleFunc("POST "+n+"/copy", func(w http.ResponseWriter, r *http.Request) {
			var body proto.NodeCopy
			if !decode(w, r, &body) {
				return
			}
			h.reply(w, nil, c.CopyNodeDir(r.PathValue("project"), r.PathValue("node"), body.DestinationNodeID))
		})
	}
	mux.HandleFunc("PUT "+l, h.putLink)
	mux.HandleFunc("GET "+l, h.link)
	mux.HandleFunc("DELETE "+l, h.deleteLink)
	mux.HandleFunc("PUT "+l+"/capture", h.startCapture)
	mux.HandleFunc("GET "+l+"/capture", h.capture)
	mux.HandleFunc("DELETE "+l+"/capture", h.stopCapture)
	mux.HandleFunc("GET "+l+"/capture/pcap", h.stream)
	mux.HandleFunc("GET "+l+"/capture/file", h.snapshot)
	if cf, ok := parts.Captures.(CaptureFileService); ok {
		h.registerCaptureFiles(mux, cf)
	}
	mux.HandleFunc("PUT "+p+"/tunnel-ports/{id}", h.reserveTunnelPort)
	mux.HandleFunc("DELETE "+p+"/tunnel-ports/{id}", h.releaseTunnelPort)
	mux.HandleFunc("GET "+proto.StatePath, h.state)
	mux.HandleFunc("GET "+proto.EventsPath, h.events)
	if parts.Images != nil {
		h.registerImages(mux, parts.Images)
	}
	if ds, ok := svc.(DiskService); ok {
		mux.HandleFunc("POST "+n+"/resize_disk", func(w http.ResponseWriter, r *http.Request) {
			var c proto.ResizeDisk
			if !decode(w, r, &c) {
				return
			}
			h.replyCreated(w, ds.ResizeDisk(r.Context(), r.PathValue("project"), r.PathValue("node"), c))
		})
	}
	if cfg.Metrics != nil {
		mux.Handle("GET "+proto.MetricsPath, cfg.Metrics)
	}
	return h.guard(mux)
}

// routes is the agent's mux, noting the patterns registered on it.
type routes struct {
	*http.ServeMux
	patterns []string
}

func (m *routes) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routes) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// guarded is the agent's handler: the routes behind guard.
type guarded struct {
	http.Handler
	patterns []string // every route's, as registered
}

// guard refuses requests from web pages, checks the shared secret (both
// before any route runs, unknown ones included) and answers unknown
// routes with a proto error instead of the mux's plain text. It counts
// every request by its route pattern and logs it once answered (the
// access log).
func (h *handlers) guard(mux *routes) http.Handler {
	return &guarded{patterns: mux.patterns, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := mux.Handler(r)
		route := "unmatched"
		if _, path, ok := strings.Cut(pattern, " "); ok {
			route = path
		}
		rw := &recorder{ResponseWriter: w}
		defer func() {
			if rw.status == 0 {
				rw.status = http.StatusOK
			}
			d := time.Since(start)
			h.requests.Observe(r.Method, route, rw.status, d)
			h.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("method", r.Method),
				slog.String("route", route), slog.Int("status", rw.status),
				slog.Duration("duration", d), slog.Int64("bytes", rw.bytes))
		}()
		if fromPage(r) {
			writeError(rw, proto.Errorf(proto.CodeForbidden, "requests from web pages are refused: this agent answers its controller and other agents"))
			return
		}
		if len(h.secret) > 0 && subtle.ConstantTimeCompare([]byte(r.Header.Get(proto.SecretHeader)), h.secret) != 1 {
			writeError(rw, proto.Errorf(proto.CodeUnauthorized, "missing or wrong shared secret"))
			return
		}
		if pattern == "" {
			writeError(rw, proto.Errorf(proto.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
			return
		}
		if limit := int64(maxBody); !(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/images/")) {
			r.Body = http.MaxBytesReader(rw, r.Body, limit)
		}
		mux.ServeHTTP(rw, r)
	})}
}

// fromPage reports whether a browser sent r for a web page: browsers name
// the page's origin in Origin on every request but a same-origin GET, and
// say in Sec-Fetch-Site, which no page can set, whether it crosses sites.
// No page has any business with an agent (its callers are the controller
// and other agents, which send neither), and without a secret a page the
// user visits could otherwise drive it with a plain POST.
func fromPage(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return r.Header.Get("Origin") != "" || site != "" && site != "none"
}

// recorder notes the status and the body size of a reply. Unwrap gives
// http.ResponseController the writer underneath (flushes, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (h *handlers) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.svc.Info())
}

func (h *handlers) interfaces(w http.ResponseWriter, r *http.Request) {
	list, err := h.svc.Interfaces()
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handlers) dockerImages(w http.ResponseWriter, r *http.Request) {
	tags, err := h.svc.DockerImages(r.Context())
	out := make([]proto.DockerImage, 0, len(tags))
	for _, t := range tags {
		out = append(out, proto.DockerImage{Image: t})
	}
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handlers) openProject(w http.ResponseWriter, r *http.Request) {
	var spec proto.ProjectSpec
	if !decode(w, r, &spec) {
		return
	}
	spec.ProjectID = r.PathValue("project")
	h.reply(w, nil, h.svc.OpenProject(spec))
}

func (h *handlers) closeProject(w http.ResponseWriter, r *http.Request) {
	h.reply(w, nil, h.svc.CloseProject(r.Context(), r.PathValue("project")))
}

func (h *handlers) createNode(w http.ResponseWriter, r *http.Request) {
	var spec proto.NodeSpec
	if !decode(w, r, &spec) {
		return
	}
	spec.NodeID = r.PathValue("node")
	st, err := h.svc.CreateNode(r.Context(), r.PathValue("project"), spec)
	h.reply(w, st, err)
}

func (h *handlers) nodeFile(w http.ResponseWriter, r *http.Request) {
	data, err := h.svc.NodeFile(r.PathValue("project"), r.PathValue("node"), r.PathValue("path"))
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	h.reply(w, proto.NodeFile{Content: data}, nil)
}

func (h *handlers) writeNodeFile(w http.ResponseWriter, r *http.Request) {
	var f proto.NodeFile
	if !decode(w, r, &f) {
		return
	}
	h.reply(w, nil, h.svc.WriteNodeFile(r.PathValue("project"), r.PathValue("node"), r.PathValue("path"), f.Content))
}

func (h *handlers) resetConsole(w http.ResponseWriter, r *http.Request) {
	h.reply(w, nil, h.svc.ResetConsole(r.PathValue("project"), r.PathValue("node")))
}

func (h *handlers) node(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.Node(r.PathValue("project"), r.PathValue("node"))
	h.reply(w, st, err)
}

func (h *handlers) deleteNode(w http.ResponseWriter, r *http.Request) {
	h.reply(w, nil, h.svc.DeleteNode(r.Context(), r.PathValue("project"), r.PathValue("node")))
}

func (h *handlers) setNodeStatus(w http.ResponseWriter, r *http.Request) {
	var spec proto.NodeStatusSpec
	if !decode(w, r, &spec) {
		return
	}
	st, err := h.svc.SetNodeStatus(r.Context(), r.PathValue("project"), r.PathValue("node"), spec.Status)
	h.reply(w, st, err)
}

func (h *handlers) putLink(w http.ResponseWriter, r *http.Request) {
	var spec proto.LinkSpec
	if !decode(w, r, &spec) {
		return
	}
	spec.LinkID = r.PathValue("link")
	h.reply(w, nil, h.svc.PutLink(r.PathValue("project"), spec))
}

func (h *handlers) checkFilters(w http.ResponseWriter, r *http.Request) {
	var fc proto.FilterCheck
	if !decode(w, r, &fc) {
		return
	}
	h.reply(w, nil, h.filters.Check(fc.DataLinkType, fc.BPF))
}

func (h *handlers) link(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.Link(r.PathValue("project"), r.PathValue("link"))
	h.reply(w, st, err)
}

func (h *handlers) deleteLink(w http.ResponseWriter, r *http.Request) {
	h.reply(w, nil, h.svc.DeleteLink(r.PathValue("project"), r.PathValue("link")))
}

func (h *handlers) startCapture(w http.ResponseWriter, r *http.Request) {
	var spec proto.CaptureSpec
	if !decode(w, r, &spec) {
		return
	}
	st, err := h.caps.Start(r.PathValue("project"), r.PathValue("link"), spec)
	h.reply(w, st, err)
}

func (h *handlers) capture(w http.ResponseWriter, r *http.Request) {
	st, err := h.caps.State(r.PathValue("project"), r.PathValue("link"))
	h.reply(w, st, err)
}

func (h *handlers) stopCapture(w http.ResponseWriter, r *http.Request) {
	st, err := h.caps.Stop(r.PathValue("project"), r.PathValue("link"))
	h.reply(w, st, err)
}

// PcapContentType is the media type of a capture stream.
const PcapContentType = "application/vnd.tcpdump.pcap"

// stream sends the capture file from its first byte and then each record
// as it is written, flushed at once, until the capture stops (the body then
// ends cleanly) or the client goes away.
func (h *handlers) stream(w http.ResponseWriter, r *http.Request) {
	f, err := h.caps.File(r.PathValue("project"), r.PathValue("link"))
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", PcapContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	// No write deadline: a stream lasts as long as the capture.
	_ = rc.SetWriteDeadline(time.Time{})
	if err := f.Follow(r.Context(), w, rc.Flush); err != nil && r.Context().Err() == nil {
		h.log.Debug("capture stream ended", "link", r.PathValue("link"), "err", err)
	}
}

// PcapngContentType is the media type of a pcapng capture.
const PcapngContentType = "application/x-pcapng"

// snapshot sends the file a running capture writes as it is now: up to its
// last whole record, a valid capture on its own, with its length and its
// name (Content-Disposition).
func (h *handlers) snapshot(w http.ResponseWriter, r *http.Request) {
	f, err := h.caps.File(r.PathValue("project"), r.PathValue("link"))
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	s, err := f.Snapshot()
	if err != nil {
		h.reply(w, nil, proto.Errorf(proto.CodeNotFound, "%v", err))
		return
	}
	defer s.Close()
	ctype := PcapContentType
	if strings.HasSuffix(s.Name, ".pcapng") {
		ctype = PcapngContentType
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(s.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": s.Name}))
	w.Header().Set("Cache-Control", "no-store")
	// A large file takes its time: no write deadline, the size bounds it.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if _, err := io.Copy(w, s); err != nil && r.Context().Err() == nil {
		h.log.Debug("capture snapshot cut", "link", r.PathValue("link"), "err", err)
	}
}

// registerCaptureFiles serves the files of projects' captures folders.
func (h *handlers) registerCaptureFiles(mux *routes, cf CaptureFileService) {
	const files = "/v1/projects/{project}/captures"
	mux.HandleFunc("GET "+files, func(w http.ResponseWriter, r *http.Request) {
		list, err := cf.Files(r.PathValue("project"))
		if err != nil {
			h.reply(w, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("GET "+files+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		size, body, err := cf.OpenFile(r.PathValue("project"), name)
		if err != nil {
			h.reply(w, nil, err)
			return
		}
		defer body.Close()
		ctype := PcapContentType
		if strings.HasSuffix(name, ".pcapng") {
			ctype = PcapngContentType
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		w.Header().Set("Cache-Control", "no-store")
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) // the size bounds it
		if _, err := io.CopyN(w, body, size); err != nil && r.Context().Err() == nil {
			h.log.Debug("capture file cut", "file", name, "err", err)
		}
	})
	mux.HandleFunc("DELETE "+files+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		h.reply(w, nil, cf.DeleteFile(r.PathValue("project"), r.PathValue("name")))
	})
}

func (h *handlers) reserveTunnelPort(w http.ResponseWriter, r *http.Request) {
	tp, err := h.svc.ReserveTunnelPort(r.PathValue("project"), r.PathValue("id"))
	h.reply(w, tp, err)
}

func (h *handlers) releaseTunnelPort(w http.ResponseWriter, r *http.Request) {
	h.reply(w, nil, h.svc.ReleaseTunnelPort(r.PathValue("project"), r.PathValue("id")))
}

func (h *handlers) state(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.svc.State())
}

// events streams the agent's events as JSON lines: a hello, then each
// event as it happens and a ping every Config.PingInterval, each flushed at
// once. The stream ends when the client goes away, or when the agent drops
// a follower too slow to keep up or ends itself; the controller then
// reconnects and reconciles.
func (h *handlers) events(w http.ResponseWriter, r *http.Request) {
	ch, cancel := h.feed.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // lasts as long as the follower
	enc := json.NewEncoder(w)
	send := func(ev proto.Event) bool {
		if enc.Encode(ev) != nil {
			return false
		}
		return rc.Flush() == nil
	}
	info := h.svc.Info()
	if !send(proto.Event{Kind: proto.EventHello, Info: &info}) {
		return
	}
	ping := time.NewTicker(h.ping)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok || !send(ev) {
				return
			}
		case <-ping.C:
			info := h.svc.Info()
			if !send(proto.Event{Kind: proto.EventPing, Info: &info}) {
				return
			}
		}
	}
}

// reply writes v (or 204 when v is nil) on success, the error otherwise.
func (h *handlers) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		pe, ok := errors.AsType[*proto.Error](err)
		if !ok {
			h.log.Error("request failed", "err", err)
			pe = proto.Errorf(proto.CodeInternal, "internal error: %v", err)
		}
		writeError(w, pe)
		return
	}
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// decode reads a JSON body into v, refusing unknown members. An empty body
// is an empty object. It answers the request itself when it fails.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			writeError(w, proto.Errorf(proto.CodeInvalid, "request body over %d bytes", maxBody))
			return false
		}
		writeError(w, proto.Errorf(proto.CodeInvalid, "read body: %v", err))
		return false
	}
	if len(body) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, proto.Errorf(proto.CodeInvalid, "invalid JSON body: %v", err))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(proto.Errorf(proto.CodeInternal, "encode reply: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func writeError(w http.ResponseWriter, e *proto.Error) {
	writeJSON(w, e.Code.Status(), e)
}

// Serve answers HTTP requests on ln until ctx is done. Then it calls
// beforeShutdown (which should end long streams, e.g. by stopping the
// captures they follow), and shuts the server down, waiting up to 10 s for
// requests in flight.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, beforeShutdown func()) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("agent api: %w", err)
	case <-ctx.Done():
	}
	if beforeShutdown != nil {
		beforeShutdown()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("agent api: %w", err)
	}
	return nil
}
