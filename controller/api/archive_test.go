package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	agentapi "github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// archiveLab is the controller on a loopback port (real agent, fake
// VPCS), with notifications and a known data directory.
type archiveLab struct {
	*live
	data     string
	projects string // the projects directory
}

func newArchiveLab(t *testing.T, maxImport int64) *archiveLab {
	t.Helper()
	data := t.TempDir()
	h := host.New(host.Config{DataDir: data, Runners: map[string]host.RunnerFactory{
		"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
			return node.NewFake(env.Agent, env.OnStop), nil
		},
	}})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{}))
	l := &live{t: t}
	ctx, cancel := context.WithCancel(context.Background())
	l.hub = notify.New(notify.Config{IdleGrace: time.Hour})
	events := &api.Events{Hub: l.hub, Version: "2.2.59"}
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient(), OnChange: events.ComputeChanged})
	reg.Add(t.Context(), compute.Compute{ID: "local", Name: "box", URL: agent.URL, Protocol: "http", Host: "127.0.0.1", Port: 3080})
	dir := filepath.Join(data, "projects")
	l.projects = project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Events: events, Store: &topology.Store{Dir: dir, Version: "2.2.59"},
		ImagesDir: filepath.Join(data, "images")})
	app, _, err := api.New(api.Config{Projects: l.projects, Computes: reg, Agents: reg.Agents, Hub: l.hub, Context: ctx, Version: "2.2.59",
		MaxImportSize: maxImport, Load: func() (float64, float64) { return 12.5, 40 }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { cancel(); app.Shutdown(); l.hub.Close(); h.Close(); agent.Close() })
	l.url = "http://" + ln.Addr().String()
	return &archiveLab{live: l, data: data, projects: dir}
}

// send sends a request with a raw body and returns the reply whole.
func (l *archiveLab) send(method, path, ctype string, body io.Reader) (*http.Response, []byte) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.url+path, body)
	if err != nil {
		l.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatalf("%s %s: reading the reply: %v", method, path, err)
	}
	return resp, data
}

// expectError checks a JSON error reply: status, message and X-Route.
func expectError(t *testing.T, resp *http.Response, body []byte, status int, message, route string) {
	t.Helper()
	var e map[string]any
	json.Unmarshal(body, &e)
	if resp.StatusCode != status || e["status"] != float64(status) || !strings.Contains(fmt.Sprint(e["message"]), message) {
		t.Fatalf("reply %d %s, want %d with message containing %q", resp.StatusCode, body, status, message)
	}
	if got := resp.Header.Get("X-Route"); got != route {
		t.Fatalf("X-Route %q, want %q", got, route)
	}
}

const (
	rExport    = "/v2/projects/{project_id}/export"
	rImport    = "/v2/projects/{project_id}/import"
	rDuplicate = "/v2/projects/{project_id}/duplicate"
	rSnapshots = "/v2/projects/{project_id}/snapshots"
	rSnapshot  = "/v2/projects/{project_id}/snapshots/{snapshot_id}"
	rRestore   = "/v2/projects/{project_id}/snapshots/{snapshot_id}/restore"
)

// The fixture is a .gns3project laid out exactly as GNS3 2.2.59 was
// seen to write one: project.gns3 first (mode 0600, keys sorted,
// indent 4, compute_id "local", computes emptied), then the project
// directory's files. It holds two VPCS and a qemu node (a type labtap
// cannot run), links among them, a drawing and a member from a newer GNS3.
const (
	fixPC1   = "11111111-1111-4111-8111-111111111111"
	fixPC2   = "22222222-2222-4222-8222-222222222222"
	fixR1    = "33333333-3333-4333-8333-333333333333"
	fixLink1 = "44444444-4444-4444-8444-444444444444"
	fixLink2 = "55555555-5555-4555-8555-555555555555"
	fixDraw  = "66666666-6666-4666-8666-666666666666"
	fixProj  = "77777777-7777-4777-8777-777777777777"
)

func fixtureProjectFile() map[string]any {
	vpcs := func(id, name string, x int) map[string]any {
		return map[string]any{
			"compute_id": "local", "console": 5000 + x, "console_auto_start": false, "console_type": "telnet",
			"custom_adapters": []any{}, "first_port_name": nil, "height": 59,
			"label":  map[string]any{"rotation": 0, "style": "font-size: 10", "text": name, "x": 17, "y": -25},
			"locked": false, "name": name, "node_id": id, "node_type": "vpcs",
			"port_name_format": "Ethernet{0}", "port_segment_size": 0, "properties": map[string]any{},
			"symbol": ":/symbols/computer.svg", "template_id": "19021f99-e36f-394d-b4a1-8aaa902ab9cc",
			"width": 65, "x": x, "y": 0, "z": 1,
		}
	}
	r1 := map[string]any{
		"compute_id": "local", "console": 5005, "console_auto_start": false, "console_type": "telnet",
		"custom_adapters": []any{}, "first_port_name": nil, "height": 48,
		"label":  map[string]any{"rotation": 0, "style": "font-size: 10", "text": "R1", "x": 5, "y": -25},
		"locked": false, "name": "R1", "node_id": fixR1, "node_type": "qemu",
		"port_name_format": "Gi0/{0}", "port_segment_size": 0,
		"properties": map[string]any{"adapters": 4, "hda_disk_image": "vios.qcow2", "mac_address": "0c:33:33:33:00:00", "ram": 512},
		"symbol":     ":/symbols/router.svg", "template_id": nil, "width": 66, "x": 300, "y": 0, "z": 1,
	}
	link := func(id, a string, aa int, b string, ba int) map[string]any {
		end := func(n string, adapter int) map[string]any {
			return map[string]any{"adapter_number": adapter, "node_id": n, "port_number": 0,
				"label": map[string]any{"rotation": 0, "style": "font-size: 10", "text": "e0", "x": 60, "y": 25}}
		}
		return map[string]any{"filters": map[string]any{}, "link_id": id, "link_style": map[string]any{},
			"nodes": []any{end(a, aa), end(b, ba)}, "suspend": false}
	}
	return map[string]any{
		"auto_close": true, "auto_open": false, "auto_start": false, "drawing_grid_size": 25, "grid_size": 75,
		"name": "from-gns3", "project_id": fixProj, "revision": 9, "scene_height": 1000, "scene_width": 2000,
		"show_grid": false, "show_interface_labels": false, "show_layers": false, "snap_to_grid": false,
		"supplier": nil, "type": "topology", "variables": nil, "version": "2.2.59", "zoom": 100,
		"topology": map[string]any{
			"computes": []any{},
			"drawings": []any{map[string]any{"drawing_id": fixDraw, "locked": false, "rotation": 0,
				"svg": `<svg height="50" width="100"><text>core</text></svg>`, "x": -50, "y": -80, "z": 2}},
			"links": []any{link(fixLink1, fixPC1, 0, fixPC2, 0), link(fixLink2, fixPC2, 0, fixR1, 1)},
			"nodes": []any{vpcs(fixPC1, "PC1", -200), vpcs(fixPC2, "PC2", 0), r1},
		},
	}
}

// fixtureFiles are the project directory's files in the fixture.
var fixtureFiles = []struct{ name, data string }{
	{"README.txt", "A lab made with GNS3 2.2.59."},
	{"project-files/qemu/" + fixR1 + "/hda_disk.qcow2", "QFI\xfb qcow2 overlay"},
	{"project-files/vpcs/" + fixPC1 + "/startup.vpc", "set pcname PC1\nip 10.0.0.1/24\n"},
	{"project-files/vpcs/" + fixPC2 + "/startup.vpc", "set pcname PC2\nip 10.0.0.2/24\n"},
}

// gns3Archive writes the fixture as GNS3 2.2 would export it.
func gns3Archive(t *testing.T, doc map[string]any) []byte {
	t.Helper()
	var pf bytes.Buffer
	enc := json.NewEncoder(&pf)
	enc.SetIndent("", "    ")
	enc.SetEscapeHTML(false)
	enc.Encode(doc)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	add := func(name string, mode fs.FileMode, data []byte) {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Date(2026, 11, 23, 21, 55, 25, 0, time.UTC)}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	add("project.gns3", 0o600, bytes.TrimSuffix(pf.Bytes(), []byte("\n")))
	for _, f := range fixtureFiles {
		add(f.name, 0o644, []byte(f.data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// exportOf downloads an export and returns its entries' names and data.
func (l *archiveLab) exportOf(pid, query string) (map[string][]byte, []string) {
	l.t.Helper()
	resp, data := l.send("GET", "/v2/projects/"+pid+"/export"+query, "", nil)
	if resp.StatusCode != 200 {
		l.t.Fatalf("export: %d %s", resp.StatusCode, data)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		l.t.Fatalf("export is not a zip: %v", err)
	}
	files := map[string][]byte{}
	var names []string
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			l.t.Fatal(err)
		}
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
		names = append(names, f.Name)
	}
	return files, names
}

// TestImportAGNS3ExportThenExportItAgain is the portable-project round
// trip: an archive laid out as GNS3 2.2 exports it imports into labtap
// (new ids, files moved with their nodes, the qemu node kept), and
// labtap's export of it has the same layout and the same project file,
// ids aside: closed, and again after an open, a start and a close.
func TestImportAGNS3ExportThenExportItAgain(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	ctl := l.listenHTTP("/v2/notifications")
	fixture := fixtureProjectFile()
	pid := "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
	resp, body := l.send("POST", "/v2/projects/"+pid+"/import?name=from-gns3", "application/octet-stream", bytes.NewReader(gns3Archive(t, fixture)))
	if resp.StatusCode != 201 || resp.Header.Get("X-Route") != rImport || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("import: %d %q %s", resp.StatusCode, resp.Header.Get("X-Route"), body)
	}
	var p map[string]any
	json.Unmarshal(body, &p)
	if p["project_id"] != pid || p["status"] != "closed" || p["name"] != "from-gns3" || p["filename"] != "from-gns3.gns3" ||
		p["auto_close"] != true || p["auto_open"] != false || p["auto_start"] != false || p["path"] != filepath.Join(l.projects, pid) {
		t.Fatalf("imported project %s", body)
	}
	if e := ctl.expect(t, "project.created")[0]; e.Event["project_id"] != pid || e.Event["status"] != "closed" {
		t.Fatalf("project.created %v", e.Event)
	}
	// The node ids are new; each node's files moved with it.
	nodes := l.list("/v2/projects/" + pid + "/nodes")
	ids := map[string]string{}
	for _, n := range nodes {
		ids[n["name"].(string)] = n["node_id"].(string)
	}
	if len(ids) != 3 || ids["PC1"] == fixPC1 || ids["R1"] == fixR1 || ids["PC1"] == "" {
		t.Fatalf("imported nodes %v", nodes)
	}
	data, err := os.ReadFile(filepath.Join(l.projects, pid, "project-files", "vpcs", ids["PC1"], "startup.vpc"))
	if err != nil || string(data) != fixtureFiles[2].data {
		t.Fatalf("PC1's startup.vpc %q %v", data, err)
	}
	if left, _ := filepath.Glob(filepath.Join(l.projects, ".*")); len(left) != 0 {
		t.Fatalf("the import left %v", left)
	}

	// ran: the VPCS ran, and their computes chose their consoles.
	compare := func(stage string, ran bool) {
		t.Helper()
		files, names := l.exportOf(pid, "")
		if names[0] != "project.gns3" {
			t.Fatalf("%s: the export starts with %q", stage, names[0])
		}
		want := []string{"project.gns3"}
		for _, f := range fixtureFiles {
			name := strings.NewReplacer(fixPC1, ids["PC1"], fixPC2, ids["PC2"], fixR1, ids["R1"]).Replace(f.name)
			want = append(want, name)
			if string(files[name]) != f.data {
				t.Errorf("%s: %s = %q, want %q", stage, name, files[name], f.data)
			}
		}
		slices.Sort(want[1:]) // in path order
		if !slices.Equal(names, want) {
			t.Errorf("%s: entries %q\nwant %q", stage, names, want)
		}
		var got map[string]any
		json.Unmarshal(files["project.gns3"], &got)
		wantDoc := sameIDs(t, fixture, got)
		wantDoc["project_id"] = pid
		if ran {
			gotNodes, _ := got["topology"].(map[string]any)["nodes"].([]any)
			for i, n := range wantDoc["topology"].(map[string]any)["nodes"].([]any) {
				if n := n.(map[string]any); n["node_type"] == "vpcs" && i < len(gotNodes) {
					n["console"], n["console_type"] = gotNodes[i].(map[string]any)["console"], gotNodes[i].(map[string]any)["console_type"]
				}
			}
		}
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(wantDoc, "", " ")
		if string(g) != string(w) {
			t.Errorf("%s: project.gns3 differs from the fixture (ids aside):\n%s", stage, lineDiff(string(w), string(g)))
		}
	}
	compare("closed", false)

	// Opened, the qemu node is there, stopped, and cannot start; the VPCS
	// start; the links, the one to the qemu node too, are kept.
	l.call("POST", "/v2/projects/"+pid+"/open", nil, 201)
	if got := l.list("/v2/projects/" + pid + "/links"); len(got) != 2 {
		t.Fatalf("links after open: %v", got)
	}
	resp, body = l.send("POST", "/v2/projects/"+pid+"/nodes/"+ids["R1"]+"/start", "", nil)
	expectError(t, resp, body, 409, "Node type qemu is not supported by this server", "/v2/projects/{project_id}/nodes/{node_id}/start")
	r1 := l.call("GET", "/v2/projects/"+pid+"/nodes/"+ids["R1"], nil, 200)
	if r1["status"] != "stopped" || r1["node_type"] != "qemu" || r1["properties"].(map[string]any)["ram"] != 512.0 {
		t.Fatalf("the qemu node: %v", r1)
	}
	l.call("POST", "/v2/projects/"+pid+"/nodes/start", nil, 204) // every node that can start
	if n := l.call("GET", "/v2/projects/"+pid+"/nodes/"+ids["PC1"], nil, 200); n["status"] != "started" {
		t.Fatalf("PC1 after start all: %v", n["status"])
	}
	// Running nodes: GNS3's refusal, before any byte of the zip.
	resp, body = l.send("GET", "/v2/projects/"+pid+"/export", "", nil)
	expectError(t, resp, body, 409, "Project must be stopped in order to export it", rExport)
	l.call("POST", "/v2/projects/"+pid+"/nodes/stop", nil, 204)
	l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
	compare("after open, start, stop and close", true)

	// A snapshot, a node deleted (with its link), a restore: the project
	// is the fixture again, drawing, qemu node and unknown members included.
	l.call("POST", "/v2/projects/"+pid+"/open", nil, 201)
	snap := l.call("POST", "/v2/projects/"+pid+"/snapshots", map[string]any{"name": "as imported"}, 201)
	l.call("DELETE", "/v2/projects/"+pid+"/nodes/"+ids["PC1"], nil, 204)
	l.call("POST", "/v2/projects/"+pid+"/snapshots/"+snap["snapshot_id"].(string)+"/restore", nil, 201)
	l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
	compare("after a snapshot restore", true)
}

// sameIDs returns the fixture with its ids replaced by those of got
// (matched by node name, link and drawing position).
func sameIDs(t *testing.T, fixture, got map[string]any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(fixture)
	var want map[string]any
	json.Unmarshal(raw, &want)
	gt, _ := got["topology"].(map[string]any)
	if gt == nil {
		t.Fatalf("no topology in %v", got)
	}
	byName := map[string]string{}
	for _, n := range gt["nodes"].([]any) {
		n := n.(map[string]any)
		byName[n["name"].(string)] = n["node_id"].(string)
	}
	var pairs []string
	for _, n := range want["topology"].(map[string]any)["nodes"].([]any) {
		n := n.(map[string]any)
		pairs = append(pairs, n["node_id"].(string), byName[n["name"].(string)])
	}
	for i, kind := range []string{"links", "drawings"} {
		member := []string{"link_id", "drawing_id"}[i]
		wl := want["topology"].(map[string]any)[kind].([]any)
		gl, _ := gt[kind].([]any)
		for j := range wl {
			if j < len(gl) {
				pairs = append(pairs, wl[j].(map[string]any)[member].(string), gl[j].(map[string]any)[member].(string))
			}
		}
	}
	raw = []byte(strings.NewReplacer(pairs...).Replace(string(raw)))
	want = nil
	json.Unmarshal(raw, &want)
	return want
}

func (l *archiveLab) list(path string) []map[string]any {
	l.t.Helper()
	resp, body := l.send("GET", path, "", nil)
	var out []map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
		l.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return out
}

// TestExportReplyIsGNS3s checks the export reply's headers:
// the GNS3 media type, an attachment named after the project that any
// name survives, chunked, X-Route; and the GUI's five parameters.
func TestExportReplyIsGNS3s(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	p := l.call("POST", "/v2/projects", map[string]any{"name": `lab "ü"`}, 201)
	pid := p["project_id"].(string)
	l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	ls := l.listenHTTP("/v2/projects/" + pid + "/notifications")
	resp, data := l.send("GET", "/v2/projects/"+pid+"/export?include_images=no&include_snapshots=no&reset_mac_addresses=no&keep_compute_ids=no&compression=zip", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gns3project" || resp.Header.Get("X-Route") != rExport {
		t.Fatalf("export: %d %v", resp.StatusCode, resp.Header)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="lab ___.gns3project"; filename*=UTF-8''lab%20%22%C3%BC%22.gns3project` {
		t.Errorf("Content-Disposition %q", cd)
	}
	if resp.ContentLength != -1 || !slices.Contains(resp.TransferEncoding, "chunked") {
		t.Errorf("Content-Length %d, Transfer-Encoding %v: want chunked", resp.ContentLength, resp.TransferEncoding)
	}
	if _, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	if e := ls.expect(t, "log.info")[0]; e.Event["message"] != fmt.Sprintf("Project %s exported (%d bytes)", `lab "ü"`, len(data)) {
		t.Errorf("log.info %v", e.Event)
	}
	// include_images with no QEMU node: no images, nothing to warn of
	// (TestImagesTravelWithPortableProjects has them).
	if _, names := l.exportOf(pid, "?include_images=yes"); names[0] != "project.gns3" {
		t.Errorf("export starts with %s", names[0])
	}
	ls.expect(t, "log.info")
	resp, body := l.send("GET", "/v2/projects/"+pid+"/export?compression=gzip", "", nil)
	expectError(t, resp, body, 400, "unknown compression", rExport)
	resp, body = l.send("GET", "/v2/projects/00000000-0000-4000-8000-000000000000/export", "", nil)
	expectError(t, resp, body, 404, "Project ID 00000000-0000-4000-8000-000000000000 doesn't exist", rExport)
}

// TestImportTakesTheWebUIsMultipartBody posts the archive as the web UI
// does: multipart/form-data, ?name unencoded.
func TestImportTakesTheWebUIsMultipartBody(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("note", "a field before the file")
	fw, _ := mw.CreateFormFile("file", "from-gns3.gns3project")
	fw.Write(gns3Archive(t, fixtureProjectFile()))
	mw.Close()
	pid := "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2e"
	resp, body := l.send("POST", "/v2/projects/"+pid+"/import?name=web%20ui", mw.FormDataContentType(), &b)
	if resp.StatusCode != 201 {
		t.Fatalf("multipart import: %d %s", resp.StatusCode, body)
	}
	if nodes := l.list("/v2/projects/" + pid + "/nodes"); len(nodes) != 3 {
		t.Fatalf("nodes %v", nodes)
	}
	// A second import under another id takes a free name.
	resp, body = l.send("POST", "/v2/projects/9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2f/import?name=web%20ui", "application/octet-stream", bytes.NewReader(gns3Archive(t, fixtureProjectFile())))
	var p map[string]any
	json.Unmarshal(body, &p)
	if resp.StatusCode != 201 || p["name"] != "web ui-1" {
		t.Fatalf("second import: %d %s", resp.StatusCode, body)
	}
}

// TestImportRefusalsChangeNothing sends archives that must be refused:
// each gets its 4xx and leaves the projects directory as it was (no
// project, no temporary file), and nothing appears outside it.
func TestImportRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 64<<10)
	existing := l.call("POST", "/v2/projects", map[string]any{"name": "there"}, 201)["project_id"].(string)
	zipOf := func(extra func(zw *zip.Writer)) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create("project.gns3")
		pf, _ := json.Marshal(fixtureProjectFile())
		w.Write(pf)
		if extra != nil {
			extra(zw)
		}
		zw.Close()
		return b.Bytes()
	}
	withEntry := func(name string, mode fs.FileMode, data string) []byte {
		return zipOf(func(zw *zip.Writer) {
			h := &zip.FileHeader{Name: name}
			h.SetMode(mode)
			w, _ := zw.CreateHeader(h)
			w.Write([]byte(data))
		})
	}
	newer := fixtureProjectFile()
	newer["revision"] = 10
	newerZip := func() []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create("project.gns3")
		pf, _ := json.Marshal(newer)
		w.Write(pf)
		zw.Close()
		return b.Bytes()
	}()
	dotNode := func(id, typ string) []byte {
		doc := fixtureProjectFile()
		topo := doc["topology"].(map[string]any)
		topo["nodes"] = append(topo["nodes"].([]any), map[string]any{"node_id": id, "node_type": typ, "name": "dots", "compute_id": "local", "properties": map[string]any{}})
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create("project.gns3")
		pf, _ := json.Marshal(doc)
		w.Write(pf)
		zw.Close()
		return b.Bytes()
	}
	tests := []struct {
		name   string
		id     string
		body   []byte
		status int
		msg    string
	}{
		// Their node directory "project-files/../.." was renamed: 500.
		{"node dir up", "", dotNode("..", ".."), 409, "Invalid data in topology file"},
		{"node dir dot", "", dotNode(".", "vpcs"), 409, "Invalid data in topology file"},
		{"not a zip", "", []byte("not a zip at all"), 409, "Cannot import project, not a GNS3 project (invalid zip)"},
		{"no project file", "", func() []byte {
			var b bytes.Buffer
			zw := zip.NewWriter(&b)
			zw.Create("README.txt")
			zw.Close()
			return b.Bytes()
		}(), 409, "Cannot import project, project.gns3 file could not be found"},
		{"dot-dot", "", withEntry("../../escaped", 0o644, "owned"), 409, "is not a clean relative path"},
		{"absolute", "", withEntry("/tmp/labtap-import-absolute", 0o644, "owned"), 409, "is not a relative path"},
		{"symlink", "", withEntry("project-files/qemu/x/disk.qcow2", fs.ModeSymlink|0o777, "/etc/shadow"), 409, "is not a regular file"},
		{"symlink out", "", withEntry("../victim", fs.ModeSymlink|0o777, "/etc/hostname"), 409, "Archive entry"},
		{"device", "", withEntry("dev", fs.ModeDevice|fs.ModeCharDevice|0o666, ""), 409, "is not a regular file"},
		{"duplicate", "", zipOf(func(zw *zip.Writer) { zw.Create("a"); zw.Create("a") }), 409, "appears twice"},
		{"newer revision", "", newerZip, 409, "file revision: 10"},
		{"id taken", existing, zipOf(nil), 409, "Project ID " + existing + " already exists"},
		{"not a uuid", "not-a-uuid", zipOf(nil), 400, "Invalid project ID"},
		{"over the size cap", "", withEntry("big.bin", 0o644, strings.Repeat("x", 70<<10)), 413, "Project archive over 65536 bytes"},
	}
	before := tree(t, l.data)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := cmpOr(tt.id, "0f0e0d0c-0b0a-4909-8807-060504030201")
			comp := zip.Store
			_ = comp
			resp, body := l.send("POST", "/v2/projects/"+id+"/import", "application/octet-stream", bytes.NewReader(tt.body))
			expectError(t, resp, body, tt.status, tt.msg, rImport)
			if after := tree(t, l.data); !slices.Equal(before, after) {
				t.Errorf("a refused import changed files:\nbefore %q\nafter  %q", before, after)
			}
			if _, err := os.Lstat("/tmp/labtap-import-absolute"); err == nil {
				t.Errorf("an absolute entry was written")
			}
		})
	}
	if got := l.list("/v2/projects"); len(got) != 1 {
		t.Errorf("projects after refused imports: %v", got)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tree lists the files under dir (names, kinds, sizes), skipping the
// agent's own files.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, _ := d.Info()
		out = append(out, fmt.Sprintf("%s %v %d", strings.TrimPrefix(p, dir), info.Mode(), info.Size()))
		return nil
	})
	sort.Strings(out)
	return out
}

// TestDuplicateProject checks POST .../duplicate against GNS3 2.2's replies.
func TestDuplicateProject(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	ctl := l.listenHTTP("/v2/notifications")
	p := l.call("POST", "/v2/projects", map[string]any{"name": "specprobe-dup", "auto_close": false}, 201)
	pid := p["project_id"].(string)
	a := l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	b := l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 201)
	l.call("POST", "/v2/projects/"+pid+"/links", map[string]any{"nodes": []any{
		map[string]any{"node_id": a["node_id"], "adapter_number": 0, "port_number": 0},
		map[string]any{"node_id": b["node_id"], "adapter_number": 0, "port_number": 0}}}, 201)
	os.WriteFile(filepath.Join(l.projects, pid, "README.txt"), []byte("notes"), 0o644)
	os.MkdirAll(filepath.Join(l.projects, pid, "project-files", "captures"), 0o755)
	os.WriteFile(filepath.Join(l.projects, pid, "project-files", "captures", "x.pcap"), []byte("pcap"), 0o644)
	ctl.expect(t, "project.created")
	l.call("POST", "/v2/projects/"+pid+"/snapshots", map[string]any{"name": "kept"}, 201)

	// The GUI's Save as: {"name", "path": null}.
	dup := l.call("POST", "/v2/projects/"+pid+"/duplicate", map[string]any{"name": "specprobe-dup", "path": nil}, 201)
	did := dup["project_id"].(string)
	if did == pid || dup["name"] != "specprobe-dup-1" || dup["status"] != "closed" || dup["auto_close"] != false || dup["filename"] != "specprobe-dup-1.gns3" {
		t.Fatalf("duplicate %v", dup)
	}
	if e := ctl.expect(t, "project.created")[0]; e.Event["project_id"] != did {
		t.Fatalf("project.created %v", e.Event)
	}
	if got, _ := os.ReadFile(filepath.Join(l.projects, did, "README.txt")); string(got) != "notes" {
		t.Errorf("README.txt not copied: %q", got)
	}
	if _, err := os.Stat(filepath.Join(l.projects, did, "project-files", "captures")); err == nil {
		t.Errorf("captures copied")
	}
	nodes := l.list("/v2/projects/" + did + "/nodes")
	links := l.list("/v2/projects/" + did + "/links")
	if len(nodes) != 2 || len(links) != 1 || nodes[0]["node_id"] == a["node_id"] {
		t.Fatalf("copy: nodes %v links %v", nodes, links)
	}
	if snaps := l.list("/v2/projects/" + did + "/snapshots"); len(snaps) != 1 || snaps[0]["name"] != "kept" || snaps[0]["project_id"] != did {
		t.Errorf("the copy's snapshots %v", snaps)
	}
	l.call("POST", "/v2/projects/"+did+"/open", nil, 201)
	if src := l.call("GET", "/v2/projects/"+pid, nil, 200); src["status"] != "opened" {
		t.Errorf("source %v", src["status"])
	}

	// "name": null takes a free name after the source's.
	if dup2 := l.call("POST", "/v2/projects/"+pid+"/duplicate", map[string]any{"name": nil, "reset_mac_addresses": true}, 201); dup2["name"] != "specprobe-dup-2" {
		t.Errorf("duplicate with a null name: %v", dup2["name"])
	}

	// Refusals.
	resp, body := l.send("POST", "/v2/projects/"+pid+"/duplicate", "", strings.NewReader(`{}`))
	expectError(t, resp, body, 400, "JSON schema error", rDuplicate)
	resp, body = l.send("POST", "/v2/projects/"+pid+"/duplicate", "", strings.NewReader(`{"name": "x", "path": "/tmp/elsewhere"}`))
	expectError(t, resp, body, 403, "The path is not allowed", rDuplicate)
	l.call("POST", "/v2/projects/"+pid+"/nodes/"+a["node_id"].(string)+"/start", nil, 200)
	// A running project is copied too (GNS3: 201).
	l.call("POST", "/v2/projects/"+pid+"/duplicate", map[string]any{"name": "running"}, 201)
	resp, body = l.send("POST", "/v2/projects/00000000-0000-4000-8000-000000000000/duplicate", "", strings.NewReader(`{"name": "x"}`))
	expectError(t, resp, body, 404, "doesn't exist", rDuplicate)
	if left, _ := filepath.Glob(filepath.Join(l.projects, ".*")); len(left) != 0 {
		t.Errorf("duplicates left %v", left)
	}
}

// TestSnapshotRoutes checks list, create, delete and their refusals
// against GNS3 2.2's observed replies.
func TestSnapshotRoutes(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "snaps"}, 201)["project_id"].(string)
	a := l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	snaps := "/v2/projects/" + pid + "/snapshots"
	if got := l.list(snaps); len(got) != 0 {
		t.Fatalf("snapshots of a new project: %v", got)
	}
	before := time.Now().Unix()
	s1 := l.call("POST", snaps, map[string]any{"name": "snap one"}, 201)
	if s1["name"] != "snap one" || s1["project_id"] != pid || s1["snapshot_id"] == "" ||
		s1["filename"] != s1["snapshot_id"].(string)+".gns3snapshot" ||
		!strings.HasPrefix(s1["description"].(string), "Snapshot 'snap one' taken on ") ||
		int64(s1["created_at"].(float64)) < before {
		t.Fatalf("snapshot %v", s1)
	}
	if keys(s1)[0] != "created_at" || len(s1) != 6 {
		t.Errorf("snapshot members %v", keys(s1))
	}
	// The file is an uncompressed export, in snapshots/, named by id.
	file := filepath.Join(l.projects, pid, "snapshots", s1["filename"].(string))
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatalf("snapshot file: %v", err)
	}
	if zr.File[0].Name != "project.gns3" || zr.File[0].Method != zip.Store {
		t.Errorf("snapshot file starts with %s, method %d", zr.File[0].Name, zr.File[0].Method)
	}
	zr.Close()
	s2 := l.call("POST", snaps, map[string]any{"name": "../escaped", "description": "mine"}, 201)
	if s2["description"] != "mine" {
		t.Errorf("description %v, want the client's", s2["description"])
	}
	if _, err := os.Stat(filepath.Join(l.projects, pid, "escaped.gns3snapshot")); err == nil {
		t.Errorf("a snapshot name named a file")
	}
	// Sorted by creation time, then name (both were taken in one second).
	if got := l.list(snaps); len(got) != 2 || got[0]["created_at"].(float64) == got[1]["created_at"].(float64) && got[0]["name"] != "../escaped" {
		t.Fatalf("list %v", got)
	}
	resp, body := l.send("POST", snaps, "", strings.NewReader(`{"name": "snap one"}`))
	expectError(t, resp, body, 409, "The snapshot name snap one already exists", rSnapshots)
	resp, body = l.send("POST", snaps, "", strings.NewReader(`{"name": 7}`))
	expectError(t, resp, body, 400, "JSON schema error", rSnapshots)
	resp, body = l.send("POST", snaps, "", strings.NewReader(`{"name": "`+strings.Repeat("n", 256)+`"}`))
	expectError(t, resp, body, 400, "JSON schema error", rSnapshots)
	l.call("POST", "/v2/projects/"+pid+"/nodes/"+a["node_id"].(string)+"/start", nil, 200)
	resp, body = l.send("POST", snaps, "", strings.NewReader(`{"name": "running"}`))
	expectError(t, resp, body, 409, "Project must be stopped in order to export it", rSnapshots)
	l.call("POST", "/v2/projects/"+pid+"/nodes/"+a["node_id"].(string)+"/stop", nil, 200)

	resp, body = l.send("DELETE", snaps+"/00000000-0000-4000-8000-000000000000", "", nil)
	expectError(t, resp, body, 404, "Snapshot ID 00000000-0000-4000-8000-000000000000 doesn't exist", rSnapshot)
	resp, _ = l.send("DELETE", snaps+"/"+s2["snapshot_id"].(string), "", nil)
	if resp.StatusCode != 204 || resp.Header.Get("X-Route") != rSnapshot {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if got := l.list(snaps); len(got) != 1 {
		t.Fatalf("after delete %v", got)
	}
	// Closed: listed (observed), not changed.
	l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
	if got := l.list(snaps); len(got) != 1 {
		t.Fatalf("closed list %v", got)
	}
	resp, body = l.send("POST", snaps, "", strings.NewReader(`{"name": "closed"}`))
	expectError(t, resp, body, 403, "The project is not opened", rSnapshots)
	resp, body = l.send("POST", snaps+"/"+s1["snapshot_id"].(string)+"/restore", "", nil)
	expectError(t, resp, body, 403, "The project is not opened", rRestore)
}

// TestSnapshotRestoreNotifiesAndReloads restores a snapshot: the reply is
// the project, the project stream says what went and what came back, then
// snapshot.restored, and the GUI's reload (POST /open) works.
func TestSnapshotRestoreNotifiesAndReloads(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	ctl := l.listenHTTP("/v2/notifications")
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "restore"}, 201)["project_id"].(string)
	ctl.expect(t, "project.created")
	base := "/v2/projects/" + pid
	a := l.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	b := l.call("POST", base+"/nodes", map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 201)
	link := l.call("POST", base+"/links", map[string]any{"nodes": []any{
		map[string]any{"node_id": a["node_id"], "adapter_number": 0, "port_number": 0},
		map[string]any{"node_id": b["node_id"], "adapter_number": 0, "port_number": 0}}}, 201)
	os.WriteFile(filepath.Join(l.projects, pid, "README.txt"), []byte("before"), 0o644)
	const note = `<svg height="20" width="80"><text>kept</text></svg>`
	d1 := l.call("POST", base+"/drawings", map[string]any{"svg": note, "x": 5, "y": 6}, 201)
	snap := l.call("POST", base+"/snapshots", map[string]any{"name": "two PCs"}, 201)
	// After the snapshot: PC2 renamed, a third PC, the link gone, a capture file.
	l.call("PUT", base+"/nodes/"+b["node_id"].(string), map[string]any{"name": "renamed"}, 200)
	c := l.call("POST", base+"/nodes", map[string]any{"name": "PC3", "node_type": "vpcs", "compute_id": "local"}, 201)
	l.call("DELETE", base+"/links/"+link["link_id"].(string), nil, 204)
	d2 := l.call("POST", base+"/drawings", map[string]any{"svg": `<svg height="9" width="9"><rect height="9" width="9"/></svg>`}, 201)
	l.call("PUT", base+"/drawings/"+d1["drawing_id"].(string), map[string]any{"x": 50}, 201)
	os.WriteFile(filepath.Join(l.projects, pid, "README.txt"), []byte("after"), 0o644)
	os.MkdirAll(filepath.Join(l.projects, pid, "project-files", "captures"), 0o755)
	os.WriteFile(filepath.Join(l.projects, pid, "project-files", "captures", "kept.pcap"), []byte("pcap"), 0o644)
	l.call("POST", base+"/nodes/"+a["node_id"].(string)+"/start", nil, 200)

	ls := l.listenHTTP(base + "/notifications")
	got := l.call("POST", base+"/snapshots/"+snap["snapshot_id"].(string)+"/restore", nil, 201)
	if got["project_id"] != pid || got["status"] != "opened" || got["name"] != "restore" {
		t.Fatalf("restore reply %v", got)
	}
	// Everything that was is deleted, everything restored created, then
	// snapshot.restored (the web UI keeps stale items otherwise).
	events := ls.expect(t, "node.deleted", "node.deleted", "node.deleted", "drawing.deleted", "drawing.deleted",
		"node.created", "node.created", "link.created", "drawing.created", "snapshot.restored", "log.info")
	if events[9].Event["snapshot_id"] != snap["snapshot_id"] || events[9].Event["name"] != "two PCs" {
		t.Errorf("snapshot.restored %v", events[9].Event)
	}
	if events[5].Event["name"] != "PC1" || events[6].Event["name"] != "PC2" || events[5].Event["status"] != "stopped" {
		t.Errorf("node.created %v / %v", events[5].Event, events[6].Event)
	}
	if events[3].Event["drawing_id"] != d1["drawing_id"] || events[4].Event["drawing_id"] != d2["drawing_id"] || events[4].Event["svg"] == nil {
		t.Errorf("drawing.deleted %v / %v", events[3].Event, events[4].Event)
	}
	if e := events[8].Event; e["drawing_id"] != d1["drawing_id"] || e["x"] != 5.0 || e["svg"] != note || e["project_id"] != pid {
		t.Errorf("drawing.created %v", e)
	}
	if got := l.list(base + "/drawings"); len(got) != 1 || got[0]["drawing_id"] != d1["drawing_id"] || got[0]["x"] != 5.0 {
		t.Errorf("drawings after restore %v", got)
	}
	ctlEvents := ctl.expect(t, "project.opened")
	if ctlEvents[0].Event["project_id"] != pid {
		t.Errorf("project.opened %v", ctlEvents[0].Event)
	}
	// The GUI reloads: open (already opened), nodes, links.
	l.call("POST", base+"/open", nil, 201)
	nodes := l.list(base + "/nodes")
	if len(nodes) != 2 || nodes[1]["name"] != "PC2" || nodes[0]["node_id"] != a["node_id"] {
		t.Fatalf("nodes after restore %v", nodes)
	}
	if links := l.list(base + "/links"); len(links) != 1 || links[0]["link_id"] != link["link_id"] {
		t.Fatalf("links after restore %v", links)
	}
	resp, _ := l.send("GET", base+"/nodes/"+c["node_id"].(string), "", nil)
	if resp.StatusCode != 404 {
		t.Errorf("PC3 after restore: %d", resp.StatusCode)
	}
	if data, _ := os.ReadFile(filepath.Join(l.projects, pid, "README.txt")); string(data) != "before" {
		t.Errorf("README.txt %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(l.projects, pid, "project-files", "captures", "kept.pcap")); string(data) != "pcap" {
		t.Errorf("a capture was lost in the restore")
	}
	if got := l.list(base + "/snapshots"); len(got) != 1 {
		t.Errorf("snapshots after restore %v", got)
	}
	// The file on disk is what the project is: it reopens the same.
	l.call("POST", base+"/close", nil, 204)
	l.call("POST", base+"/open", nil, 201)
	if again := l.list(base + "/nodes"); len(again) != 2 || again[1]["name"] != "PC2" {
		t.Fatalf("nodes after reopen %v", again)
	}
	if left, _ := filepath.Glob(filepath.Join(l.projects, ".*")); len(left) != 0 {
		t.Errorf("restore left %v", left)
	}
}

// TestFailedRestoreLeavesTheProjectAsItWas restores a damaged snapshot:
// 409, and the project, its nodes, links, file and files are as before.
func TestFailedRestoreLeavesTheProjectAsItWas(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "intact"}, 201)["project_id"].(string)
	base := "/v2/projects/" + pid
	l.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	snap := l.call("POST", base+"/snapshots", map[string]any{"name": "s"}, 201)
	l.call("POST", base+"/nodes", map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 201)
	file := filepath.Join(l.projects, pid, "snapshots", snap["filename"].(string))
	cases := map[string]func(){
		"truncated": func() { os.Truncate(file, 100) },
		"zip-slip": func() {
			f, _ := os.Create(file)
			zw := zip.NewWriter(f)
			w, _ := zw.Create("project.gns3")
			w.Write([]byte(`{"name": "s", "project_id": "` + pid + `", "revision": 9, "type": "topology", "topology": {}}`))
			h := &zip.FileHeader{Name: "../../outside"}
			h.SetMode(fs.ModeSymlink | 0o777)
			w, _ = zw.CreateHeader(h)
			w.Write([]byte("/etc/passwd"))
			zw.Close()
			f.Close()
		},
		// Unpacked and checked fine; its node's compute is unknown, so the
		// rebuild fails after the directories were swapped: swapped back.
		"node on an unknown compute": func() {
			f, _ := os.Create(file)
			zw := zip.NewWriter(f)
			w, _ := zw.Create("project.gns3")
			w.Write([]byte(`{"name": "s", "project_id": "` + pid + `", "revision": 9, "type": "topology", "topology": {"nodes": [
				{"compute_id": "gone", "name": "PC9", "node_id": "99999999-9999-4999-8999-999999999999", "node_type": "vpcs", "properties": {}}]}}`))
			w, _ = zw.Create("README.txt")
			w.Write([]byte("from the snapshot"))
			zw.Close()
			f.Close()
		},
		"bad topology": func() {
			f, _ := os.Create(file)
			zw := zip.NewWriter(f)
			w, _ := zw.Create("project.gns3")
			w.Write([]byte(`{"name": "s", "project_id": "` + pid + `", "revision": 9, "type": "topology", "topology": {"nodes": "not a list"}}`))
			zw.Close()
			f.Close()
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			nodesBefore := l.list(base + "/nodes")
			fileBefore, _ := os.ReadFile(filepath.Join(l.projects, pid, "intact.gns3"))
			treeBefore := tree(t, l.data)
			damage()
			treeDamaged := tree(t, l.data)
			resp, body := l.send("POST", base+"/snapshots/"+snap["snapshot_id"].(string)+"/restore", "", nil)
			if resp.StatusCode != 409 || resp.Header.Get("X-Route") != rRestore {
				t.Fatalf("restore of a damaged snapshot: %d %s", resp.StatusCode, body)
			}
			if after := l.list(base + "/nodes"); len(after) != len(nodesBefore) || len(after) != 2 {
				t.Errorf("nodes %v, want %v", after, nodesBefore)
			}
			if fileAfter, _ := os.ReadFile(filepath.Join(l.projects, pid, "intact.gns3")); !bytes.Equal(fileAfter, fileBefore) {
				t.Errorf("the project file changed")
			}
			if after := tree(t, l.data); !slices.Equal(after, treeDamaged) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", treeDamaged, after)
			}
			_ = treeBefore
		})
	}
}

// TestRestoreUnderConcurrentChanges restores while other clients change
// the project: every change lands either before the restore (and is
// undone by it) or after (and stays), never half; the file on disk always
// ends equal to what the API shows.
func TestRestoreUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "busy"}, 201)["project_id"].(string)
	base := "/v2/projects/" + pid
	a := l.call("POST", base+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
	snap := l.call("POST", base+"/snapshots", map[string]any{"name": "s"}, 201)
	var wg sync.WaitGroup
	statuses := make(chan int, 100)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("N%d", i), "node_type": "vpcs", "compute_id": "local"})
			resp, _ := l.send("POST", base+"/nodes", "application/json", bytes.NewReader(body))
			statuses <- resp.StatusCode
			body, _ = json.Marshal(map[string]any{"x": i * 10})
			resp, _ = l.send("PUT", base+"/nodes/"+a["node_id"].(string), "application/json", bytes.NewReader(body))
			statuses <- resp.StatusCode
		}()
	}
	restored := 0
	for range 3 {
		resp, body := l.send("POST", base+"/snapshots/"+snap["snapshot_id"].(string)+"/restore", "", nil)
		switch resp.StatusCode {
		case 201:
			restored++
		case 409:
			if !strings.Contains(string(body), "Another operation is running on this project") {
				t.Errorf("restore: 409 %s", body)
			}
		default:
			t.Errorf("restore: %d %s", resp.StatusCode, body)
		}
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 201 && s != 200 && s != 404 {
			t.Errorf("a concurrent change got %d", s)
		}
	}
	if restored == 0 {
		t.Fatalf("no restore succeeded")
	}
	// What the API shows is what the file holds.
	shown := l.list(base + "/nodes")
	l.call("POST", base+"/close", nil, 204)
	stored := l.list(base + "/nodes")
	names := func(list []map[string]any) []string {
		var out []string
		for _, n := range list {
			out = append(out, fmt.Sprint(n["node_id"], n["name"], n["x"]))
		}
		sort.Strings(out)
		return out
	}
	if !slices.Equal(names(shown), names(stored)) {
		t.Errorf("shown %v\nstored %v", names(shown), names(stored))
	}
	if !slices.ContainsFunc(shown, func(n map[string]any) bool { return n["node_id"] == a["node_id"] }) {
		t.Errorf("PC1, in the snapshot, is gone: %v", names(shown))
	}
}

// lineDiff lists the lines of got that are not in want (+) and the
// reverse (-), enough to read a JSON difference.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAnExportCutShortReleasesTheProject drops an export's connection
// after its first bytes: the project is not left held (a change goes
// through, and the next export is not refused as busy).
func TestAnExportCutShortReleasesTheProject(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	pid := l.call("POST", "/v2/projects", map[string]any{"name": "big"}, 201)["project_id"].(string)
	big := filepath.Join(l.projects, pid, "project-files", "qemu", "n1", "hda_disk.qcow2")
	os.MkdirAll(filepath.Dir(big), 0o755)
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(256 << 20) // sparse: far more than the socket buffers hold
	f.Close()
	resp, err := http.Get(l.url + "/v2/projects/" + pid + "/export?compression=none")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away mid-zip
	client := &http.Client{Timeout: time.Minute}
	req, _ := http.NewRequest("PUT", l.url+"/v2/projects/"+pid, strings.NewReader(`{"zoom": 50}`))
	put, err := client.Do(req)
	if err != nil {
		t.Fatalf("a change after the cut export: %v", err)
	}
	put.Body.Close()
	if put.StatusCode != 200 {
		t.Fatalf("PUT after the cut export: %d", put.StatusCode)
	}
	os.Remove(big)
	if files, _ := l.exportOf(pid, ""); files["project.gns3"] == nil {
		t.Fatalf("the next export has no project.gns3")
	}
}

// TestImportIsNotHeldToTheBodyLimit imports an archive larger than every
// other route's 10 MiB body limit, raw and as multipart, and finds its
// large file whole in the project.
func TestImportIsNotHeldToTheBodyLimit(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	disk := make([]byte, 12<<20)            // over every other route's 10 MiB limit (checked below)
	rand.NewChaCha8([32]byte{1}).Read(disk) // incompressible: the archive is as large
	doc := fixtureProjectFile()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("project.gns3")
	json.NewEncoder(w).Encode(doc)
	w, _ = zw.Create("project-files/qemu/" + fixR1 + "/hda_disk.qcow2")
	w.Write(disk)
	zw.Close()
	archiveBytes := b.Bytes()
	if len(archiveBytes) <= 10<<20 {
		t.Fatalf("a %d-byte archive is within the body limit: the test would prove nothing", len(archiveBytes))
	}
	for i, kind := range []string{"raw", "multipart"} {
		t.Run(kind, func(t *testing.T) {
			pid := fmt.Sprintf("5a5a5a5a-0000-4000-8000-00000000000%d", i)
			body, ctype := io.Reader(bytes.NewReader(archiveBytes)), "application/octet-stream"
			if kind == "multipart" {
				var mb bytes.Buffer
				mw := multipart.NewWriter(&mb)
				fw, _ := mw.CreateFormFile("file", "big.gns3project")
				fw.Write(archiveBytes)
				mw.Close()
				body, ctype = &mb, mw.FormDataContentType()
			}
			resp, data := l.send("POST", "/v2/projects/"+pid+"/import", ctype, body)
			if resp.StatusCode != 201 {
				t.Fatalf("import of %d bytes: %d %s", len(archiveBytes), resp.StatusCode, data)
			}
			var r1 string
			for _, n := range l.list("/v2/projects/" + pid + "/nodes") {
				if n["name"] == "R1" {
					r1 = n["node_id"].(string)
				}
			}
			got, err := os.ReadFile(filepath.Join(l.projects, pid, "project-files", "qemu", r1, "hda_disk.qcow2"))
			if err != nil || !bytes.Equal(got, disk) {
				t.Fatalf("the disk image arrived with %d bytes (%v), want %d", len(got), err, len(disk))
			}
		})
	}
}

// TestLoadFinishesWhatACrashCutShort starts the controller on a projects
// directory as a crash leaves it in the middle of archive operations: an
// unpacked import (holding a project file with a live project's id), an
// upload, and a restore cut between its two renames. The live project
// loads with its old files and its snapshots, and nothing else is left.
func TestLoadFinishesWhatACrashCutShort(t *testing.T) {
	t.Parallel()
	const id = "5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e6f"
	s := newServerWith(t, func(data string) {
		projects := filepath.Join(data, "projects")
		write := func(rel, content string) {
			p := filepath.Join(projects, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(content), 0o644)
		}
		// The restore renamed the project away, not the snapshot in yet;
		// the snapshots had moved to the new files already.
		write("."+id+".restore-old/from-gns3.gns3", gns3File)
		write("."+id+".restore-old/README.txt", "old")
		write("."+id+".restore-new/from-gns3.gns3", strings.Replace(gns3File, `"zoom": 100`, `"zoom": 50`, 1))
		write("."+id+".restore-new/snapshots/snapshots.conf", "[]")
		write("."+id+".restore-new/project-files/captures/a.pcap", "pcap")
		write(".import-123/other.gns3", gns3File)
		write(".upload-456.gns3project", "PK")
	})
	p := s.must("GET", "/v2/projects/"+id, nil, 200, rProject)
	if p.body["zoom"] != 100.0 || p.body["name"] != "from-gns3" {
		t.Fatalf("the project after the crash: %s", p.raw)
	}
	var names []string
	filepath.WalkDir(filepath.Join(s.data, "projects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(s.data, "projects"), p)
			names = append(names, rel)
		}
		return nil
	})
	want := []string{id + "/README.txt", id + "/from-gns3.gns3", id + "/project-files/captures/a.pcap", id + "/snapshots/snapshots.conf"}
	if !slices.Equal(names, want) {
		t.Fatalf("files after the crash: %q\nwant %q", names, want)
	}
}

// withImages is a GNS3 archive with image entries first, as GNS3 writes
// them.
func withImages(t *testing.T, arch []byte, images map[string]string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(arch), int64(len(arch)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range slices.Sorted(maps.Keys(images)) {
		w, _ := zw.Create(name)
		w.Write([]byte(images[name]))
	}
	for _, f := range zr.File {
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	return b.Bytes()
}

// include_images: an import installs the archive's
// images/QEMU/ into the local images folder, never over an image of the
// same name with other content; an export with include_images=yes holds
// the local QEMU images the nodes use as images/QEMU/<file>, first, and
// nothing a node names outside the images folder.
func TestImagesTravelWithPortableProjects(t *testing.T) {
	t.Parallel()
	l := newArchiveLab(t, 0)
	qemuDir := filepath.Join(l.data, "images", "QEMU")
	const disk = "QFI\xfb the vios base image"
	arch := withImages(t, gns3Archive(t, fixtureProjectFile()), map[string]string{"images/QEMU/vios.qcow2": disk, "images/IOU/i86bi.bin": "iou"})
	pid := "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	resp, body := l.send("POST", "/v2/projects/"+pid+"/import?name=with-images", "application/octet-stream", bytes.NewReader(arch))
	if resp.StatusCode != 201 {
		t.Fatalf("import: %d %s", resp.StatusCode, body)
	}
	if got, err := os.ReadFile(filepath.Join(qemuDir, "vios.qcow2")); err != nil || string(got) != disk {
		t.Fatalf("installed image: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(l.data, "images", "IOU")); err == nil {
		t.Errorf("an IOU image was installed")
	}
	if _, err := os.Stat(filepath.Join(l.projects, pid, "images")); err == nil {
		t.Errorf("images/ was left in the project")
	}
	// Another archive, an image of the same name with other content: the
	// installed one stays.
	other := withImages(t, gns3Archive(t, fixtureProjectFile()), map[string]string{"images/qemu/vios.qcow2": "QFI\xfb another image"})
	pid2 := "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6e"
	if resp, body := l.send("POST", "/v2/projects/"+pid2+"/import", "application/octet-stream", bytes.NewReader(other)); resp.StatusCode != 201 {
		t.Fatalf("second import: %d %s", resp.StatusCode, body)
	}
	if got, _ := os.ReadFile(filepath.Join(qemuDir, "vios.qcow2")); string(got) != disk {
		t.Fatalf("an image was overwritten: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(qemuDir, ".*")); len(left) != 0 {
		t.Errorf("import left %v", left)
	}

	// Export: the image, first, in GNS3's layout; without include_images,
	// none.
	files, names := l.exportOf(pid, "?include_images=yes")
	if names[0] != "images/QEMU/vios.qcow2" || string(files["images/QEMU/vios.qcow2"]) != disk || names[1] != "project.gns3" {
		t.Fatalf("export with images: %q", names[:2])
	}
	if _, names := l.exportOf(pid, "?include_images=no"); names[0] != "project.gns3" {
		t.Fatalf("export without images starts with %q", names[0])
	}
	// A node naming a file outside the images folder (an archive's own
	// choice): not exported.
	os.WriteFile(filepath.Join(l.data, "secret"), []byte("not an image"), 0o600)
	doc := fixtureProjectFile()
	for _, n := range doc["topology"].(map[string]any)["nodes"].([]any) {
		if n := n.(map[string]any); n["node_type"] == "qemu" {
			n["properties"].(map[string]any)["hda_disk_image"] = filepath.Join(l.data, "secret")
			n["properties"].(map[string]any)["cdrom_image"] = "../secret"
		}
	}
	pid3 := "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6f"
	if resp, body := l.send("POST", "/v2/projects/"+pid3+"/import", "application/octet-stream", bytes.NewReader(gns3Archive(t, doc))); resp.StatusCode != 201 {
		t.Fatalf("third import: %d %s", resp.StatusCode, body)
	}
	files, names = l.exportOf(pid3, "?include_images=yes")
	for _, n := range names {
		if strings.HasPrefix(n, "images/") || bytes.Contains(files[n], []byte("not an image")) {
			t.Errorf("exported %s: a node names a file outside the images folder", n)
		}
	}
}

// An import carries node properties the API bounds (1 MiB of JSON per
// node): an archive's node over it is refused as a request would be, not
// loaded into memory and every reply about the node.
func TestImportRefusesANodeOverThePropertiesBound(t *testing.T) {
	l := newArchiveLab(t, 0)
	doc := fixtureProjectFile()
	noise := make([]byte, 700<<10)
	for i := range noise {
		noise[i] = byte(rand.Uint32())
	}
	node := doc["topology"].(map[string]any)["nodes"].([]any)[0].(map[string]any)
	node["properties"] = map[string]any{"a": hex.EncodeToString(noise)}
	os.MkdirAll(l.projects, 0o755) // any import makes it
	before := tree(t, l.data)
	resp, body := l.send("POST", "/v2/projects/0f0e0d0c-0b0a-4909-8807-060504030201/import", "application/octet-stream", bytes.NewReader(gns3Archive(t, doc)))
	expectError(t, resp, body, 413, "properties are over", rImport)
	if after := tree(t, l.data); !slices.Equal(before, after) {
		t.Errorf("a refused import changed files:\nbefore %q\nafter  %q", before, after)
	}
}

// A taken name an import or a duplicate numbers ("name-1") stays within
// the bound every name has: a 255-byte name became 257 bytes, which the
// project's own PUT then refused.
func TestNumberedProjectNamesStayWithinTheBound(t *testing.T) {
	l := newArchiveLab(t, 0)
	long := strings.Repeat("é", 127) + "n" // 255 bytes, 2-byte runes to cut
	id := l.call("POST", "/v2/projects", map[string]any{"name": long}, 201)["project_id"].(string)
	for range 2 {
		d := l.call("POST", "/v2/projects/"+id+"/duplicate", map[string]any{"name": long}, 201)
		name := d["name"].(string)
		if len(name) > 255 || !utf8.ValidString(name) || name == long {
			t.Fatalf("duplicate named %q (%d bytes)", name, len(name))
		}
		l.call("PUT", "/v2/projects/"+d["project_id"].(string), map[string]any{"name": name}, 200)
	}
}
