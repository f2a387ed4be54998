package archive_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/archive"
	"github.com/labtap/labtap/internal/testenv"
)

// gns3Project is a project file as GNS3 2.2 writes it, with a qemu node
// (image path, MAC), a VPCS node, a drawing and members labtap does not
// model.
const gns3Project = `{
    "auto_close": true,
    "auto_open": false,
    "auto_start": false,
    "drawing_grid_size": 25,
    "grid_size": 75,
    "name": "lab",
    "project_id": "c2dd1bd6-36e5-433b-96c4-d378ffc38d2a",
    "revision": 9,
    "scene_height": 1000,
    "scene_width": 2000,
    "show_grid": false,
    "show_interface_labels": false,
    "show_layers": false,
    "snap_to_grid": false,
    "supplier": null,
    "topology": {
        "computes": [{"compute_id": "vm", "host": "10.0.0.5", "name": "GNS3 VM", "port": 3080, "protocol": "http"}],
        "drawings": [{"drawing_id": "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "locked": false, "rotation": 0, "svg": "<svg height=\"10\" width=\"10\"><rect/></svg>", "x": 1, "y": 2, "z": 0}],
        "links": [],
        "nodes": [
            {"compute_id": "vm", "name": "R1", "node_id": "aaaaaaaa-1111-4111-8111-111111111111", "node_type": "qemu",
             "properties": {"hda_disk_image": "/home/gns3/GNS3/images/QEMU/vios.qcow2", "mac_address": "0c:aa:bb:00:00:00", "adapters": 2}},
            {"compute_id": "local", "name": "PC1", "node_id": "bbbbbbbb-2222-4222-8222-222222222222", "node_type": "vpcs",
             "properties": {"mac_address": null}, "a_future_member": [1, 2.50, "x"]}
        ]
    },
    "type": "topology",
    "variables": null,
    "version": "2.2.59",
    "zoom": 100
}`

// fixtureProject writes a project directory as GNS3 2.2 leaves it, plus
// the things an export must leave out.
func fixtureProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c2dd1bd6-36e5-433b-96c4-d378ffc38d2a")
	files := map[string]string{
		"lab.gns3":        gns3Project,
		"old-name.gns3":   "{}", // a second project file GNS3 leaves after a rename (bug 3.1.10)
		"README.txt":      "read me",
		"lab.gns3.12.tmp": "half-written",
		"project-files/vpcs/bbbbbbbb-2222-4222-8222-222222222222/startup.vpc":    "ip 10.0.0.1/24",
		"project-files/qemu/aaaaaaaa-1111-4111-8111-111111111111/hda_disk.qcow2": "disk",
		"project-files/images/5f3c.svg":                                          "<svg/>",
		"project-files/captures/R1_PC1.pcap":                                     "pcap",
		"project-files/tmp/x":                                                    "tmp",
		"project-files/vpcs/vpcs.log":                                            "log",
		"project-files/iou/1_log.txt":                                            "log",
		".DS_Store":                                                              "mac",
		"snapshots/snapshots.conf":                                               "[]",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "project-files", "docker", "empty"), 0o755)
	os.Symlink("/etc/hostname", filepath.Join(dir, "project-files", "link"))
	return dir
}

func export(t *testing.T, dir string, opts archive.ExportOptions) (*zip.Reader, []byte, []string) {
	t.Helper()
	var warnings []string
	opts.Warn = func(m string) { warnings = append(warnings, m) }
	pf, err := os.ReadFile(filepath.Join(dir, "lab.gns3"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := archive.Export(&b, dir, pf, opts); err != nil {
		t.Fatal(err)
	}
	zr, err := archive.Open(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return zr, b.Bytes(), warnings
}

// TestExportHasGNS3Layout checks an export against GNS3 2.2's observed
// layout: project.gns3 first (mode 0600), then the project directory's
// files, streamed (data descriptors), with what GNS3 excludes left out
// and project.gns3 rewritten as GNS3 does it.
func TestExportHasGNS3Layout(t *testing.T) {
	dir := fixtureProject(t)
	zr, _, warnings := export(t, dir, archive.ExportOptions{Compression: archive.Deflate})
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Flags&0x8 == 0 && !strings.HasSuffix(f.Name, "/") {
			t.Errorf("%s: no data descriptor (flag bit 3): not streamed", f.Name)
		}
		if f.Method != zip.Deflate && !strings.HasSuffix(f.Name, "/") {
			t.Errorf("%s: method %d, want deflate", f.Name, f.Method)
		}
	}
	want := []string{
		"project.gns3",
		"README.txt",
		"project-files/docker/empty/",
		"project-files/images/5f3c.svg",
		"project-files/qemu/aaaaaaaa-1111-4111-8111-111111111111/hda_disk.qcow2",
		"project-files/vpcs/bbbbbbbb-2222-4222-8222-222222222222/startup.vpc",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("entries %q\nwant %q", names, want)
	}
	if m := zr.File[0].Mode(); m != 0o600 {
		t.Errorf("project.gns3 mode %v, want 0600", m)
	}
	if m := zr.File[1].Mode(); m != 0o644 {
		t.Errorf("README.txt mode %v, want 0644", m)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "project-files/link") || strings.Contains(warnings[0], dir) {
		t.Errorf("warnings %q, want one naming the link (and no server path)", warnings)
	}
	doc := readProject(t, zr)
	topo := doc["topology"].(map[string]any)
	if c := topo["computes"].([]any); len(c) != 0 {
		t.Errorf("computes %v, want emptied", c)
	}
	r1 := topo["nodes"].([]any)[0].(map[string]any)
	props := r1["properties"].(map[string]any)
	if r1["compute_id"] != "local" || props["hda_disk_image"] != "vios.qcow2" || props["mac_address"] != "0c:aa:bb:00:00:00" {
		t.Errorf("qemu node %v: want compute local, the image's base name, the MAC kept", r1)
	}
	pc := topo["nodes"].([]any)[1].(map[string]any)
	if !slices.Equal(pc["a_future_member"].([]any), []any{json.Number("1"), json.Number("2.50"), "x"}) {
		t.Errorf("unknown member %v not kept as written", pc["a_future_member"])
	}
	if d := topo["drawings"].([]any); len(d) != 1 || d[0].(map[string]any)["svg"] != `<svg height="10" width="10"><rect/></svg>` {
		t.Errorf("drawings %v", d)
	}
	if doc["project_id"] != "c2dd1bd6-36e5-433b-96c4-d378ffc38d2a" || doc["name"] != "lab" || doc["auto_close"] != true {
		t.Errorf("project members changed: %v", doc)
	}
}

func readProject(t *testing.T, zr *zip.Reader) map[string]any {
	t.Helper()
	data, err := archive.ReadProjectFile(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("{\n    \"auto_close\"")) {
		t.Errorf("project.gns3 is not indented by 4 with sorted keys: %.40q", data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestExportOptions(t *testing.T) {
	dir := fixtureProject(t)
	zr, _, _ := export(t, dir, archive.ExportOptions{IncludeSnapshots: true, ResetMACs: true, KeepComputeIDs: true})
	if !slices.ContainsFunc(zr.File, func(f *zip.File) bool { return f.Name == "snapshots/snapshots.conf" }) {
		t.Errorf("include_snapshots: no snapshots/snapshots.conf")
	}
	topo := readProject(t, zr)["topology"].(map[string]any)
	r1 := topo["nodes"].([]any)[0].(map[string]any)
	props := r1["properties"].(map[string]any)
	if r1["compute_id"] != "vm" || props["hda_disk_image"] != "/home/gns3/GNS3/images/QEMU/vios.qcow2" || props["mac_address"] != nil {
		t.Errorf("keep_compute_ids and reset_mac_addresses: %v", r1)
	}
	if len(topo["computes"].([]any)) != 1 {
		t.Errorf("keep_compute_ids: computes %v", topo["computes"])
	}
}

// TestExportIsReadByPythonZipfile has Python's zipfile, GNS3's own reader,
// read an export in each compression the GNS3 GUI offers.
func TestExportIsReadByPythonZipfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	testenv.RequireTools(t, "python3")
	dir := fixtureProject(t)
	for _, c := range []string{"none", "zip", "bzip2", "lzma"} {
		t.Run(c, func(t *testing.T) {
			comp, err := archive.ParseCompression(c)
			if err != nil {
				t.Fatal(err)
			}
			_, data, _ := export(t, dir, archive.ExportOptions{Compression: comp})
			file := filepath.Join(t.TempDir(), "lab.gns3project")
			os.WriteFile(file, data, 0o644)
			out, err := exec.Command("python3", "-c", `
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
bad = z.testzip()
assert bad is None, bad
p = json.loads(z.read("project.gns3"))
print(p["name"], z.getinfo("README.txt").compress_type, z.read("project-files/vpcs/bbbbbbbb-2222-4222-8222-222222222222/startup.vpc").decode())
`, file).CombinedOutput()
			if err != nil {
				t.Fatalf("python3 zipfile: %v\n%s", err, out)
			}
			want := map[string]string{"none": "0", "zip": "8", "bzip2": "12", "lzma": "14"}[c]
			if got := strings.TrimSpace(string(out)); got != "lab "+want+" ip 10.0.0.1/24" {
				t.Errorf("python3 read %q", got)
			}
		})
	}
}

// TestPythonMadeArchivesAreRead reads archives Python's zipfile writes (as
// GNS3 exports them) in each compression, symlinks refused.
func TestPythonMadeArchivesAreRead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	testenv.RequireTools(t, "python3")
	for _, c := range []string{"ZIP_STORED", "ZIP_DEFLATED", "ZIP_BZIP2", "ZIP_LZMA"} {
		t.Run(c, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "gns3.gns3project")
			out, err := exec.Command("python3", "-c", `
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.`+c+`) as z:
    z.writestr("project.gns3", sys.argv[2])
    z.writestr("project-files/vpcs/n1/startup.vpc", "ip 10.0.0.9/24\n" * 100)
`, file, projectGNS3).CombinedOutput()
			if err != nil {
				t.Fatalf("python3: %v\n%s", err, out)
			}
			f, _ := os.Open(file)
			defer f.Close()
			info, _ := f.Stat()
			zr, err := archive.Open(f, info.Size())
			if err != nil {
				t.Fatal(err)
			}
			target := t.TempDir()
			if err := archive.Extract(zr, target, archive.Limits{}, nil); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(filepath.Join(target, "project-files/vpcs/n1/startup.vpc"))
			if string(data) != strings.Repeat("ip 10.0.0.9/24\n", 100) {
				t.Errorf("startup.vpc %q", data)
			}
		})
	}
}

// TestExportStreams checks that a large file goes out while it is read:
// the writer sees the zip grow in pieces, and the export allocates a
// small fraction of what it writes (nothing is built whole in memory).
func TestExportStreams(t *testing.T) {
	dir := fixtureProject(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16*8) // 32 MiB, random enough not to matter
	os.WriteFile(filepath.Join(dir, "project-files", "qemu", "big.img"), big, 0o644)
	pf, _ := os.ReadFile(filepath.Join(dir, "lab.gns3"))
	big = nil
	for _, c := range []archive.Compression{archive.Store, archive.Deflate} {
		w := &maxWrite{}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := archive.Export(w, dir, pf, archive.ExportOptions{Compression: c}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if c == archive.Store && w.total < 32<<20 || w.max > 1<<20 {
			t.Errorf("method %d: wrote %d bytes, at most %d at once: want the 32 MiB file in pieces of at most 1 MiB", c, w.total, w.max)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("method %d: the export allocated %d bytes for a 32 MiB file", c, alloc)
		}
	}
}

type maxWrite struct{ total, max int64 }

func (m *maxWrite) Write(p []byte) (int, error) {
	m.total += int64(len(p))
	m.max = max(m.max, int64(len(p)))
	return len(p), nil
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]archive.Compression{"": archive.Deflate, "ZIP": archive.Deflate, "none": archive.Store, "bzip2": archive.Bzip2, "LZMA": archive.LZMA} {
		if got, err := archive.ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := archive.ParseCompression("gzip"); err == nil {
		t.Errorf("gzip accepted")
	}
}
