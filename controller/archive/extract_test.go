package archive_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/archive"
)

// entry is one member of a hand-made zip: any name, any mode.
type entry struct {
	name string
	mode fs.FileMode
	data string
	unix uint32 // a raw Unix mode, written as is (a link named "x/")
}

func makeZip(t *testing.T, entries ...entry) *zip.Reader {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h.SetMode(mode)
		if e.unix != 0 {
			h.ExternalAttrs = e.unix << 16
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := archive.Open(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// tree lists every path under dir with its kind, size and link target.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, p+" error "+err.Error())
			return nil
		}
		info, _ := d.Info()
		line := p + " " + info.Mode().String()
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			line += " -> " + target
		} else if !d.IsDir() {
			data, _ := os.ReadFile(p)
			line += " " + string(data)
		}
		out = append(out, line)
		return nil
	})
	return out
}

const projectGNS3 = `{"name": "p", "project_id": "5d8c6f2e-3b7a-4c1d-9e0f-1a2b3c4d5e6f", "revision": 9, "type": "topology", "topology": {"nodes": [], "links": []}}`

// TestExtractRefusesEveryEntryThatCouldLeaveTheProject is the zip-slip
// corpus (names that leave the directory, links and special files, bombs): each archive is refused
// whole, and nothing outside the target directory changes (a victim file
// beside it stays as it was; no link, file or directory appears).
func TestExtractRefusesEveryEntryThatCouldLeaveTheProject(t *testing.T) {
	pf := entry{name: "project.gns3", data: projectGNS3}
	corpus := []struct {
		name    string
		entries []entry
	}{
		{"dot-dot", []entry{pf, {name: "../victim", data: "owned"}}},
		{"dot-dot inside", []entry{pf, {name: "project-files/../../victim", data: "owned"}}},
		{"dot-dot directory", []entry{pf, {name: "../evil/", mode: fs.ModeDir | 0o755}}},
		{"absolute", []entry{pf, {name: "/tmp/labtap-zipslip-absolute", data: "owned"}}},
		{"drive letter", []entry{pf, {name: "C:/victim", data: "owned"}}},
		{"drive letter relative", []entry{pf, {name: "C:victim", data: "owned"}}},
		{"backslash dot-dot", []entry{pf, {name: `..\victim`, data: "owned"}}},
		{"NUL in name", []entry{pf, {name: "a\x00b", data: "x"}}},
		{"empty component", []entry{pf, {name: "a//b", data: "x"}}},
		{"dot component", []entry{pf, {name: "./a", data: "x"}}},
		// GNS3 2.2.59 planted this one (observed): a symlink entry named
		// ../x deleted and replaced a file outside the project.
		{"symlink out", []entry{pf, {name: "../victim", mode: fs.ModeSymlink | 0o777, data: "/etc/hostname"}}},
		{"symlink inside to anywhere", []entry{pf, {name: "project-files/qemu/disk.qcow2", mode: fs.ModeSymlink | 0o777, data: "/etc/shadow"}}},
		{"symlink then file through it", []entry{pf, {name: "link", mode: fs.ModeSymlink | 0o777, data: ".."}, {name: "link/victim", data: "owned"}}},
		{"symlink directory entry", []entry{pf, {name: "dir/", unix: 0o120777, data: ".."}}},
		{"character device", []entry{pf, {name: "dev", mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}}},
		{"block device", []entry{pf, {name: "blk", mode: fs.ModeDevice | 0o666}}},
		{"FIFO", []entry{pf, {name: "fifo", mode: fs.ModeNamedPipe | 0o644}}},
		{"socket", []entry{pf, {name: "sock", mode: fs.ModeSocket | 0o644}}},
		{"duplicate name", []entry{pf, {name: "README.txt", data: "a"}, {name: "README.txt", data: "b"}}},
		{"two project files", []entry{pf, pf}},
		{"file then directory of that name", []entry{pf, {name: "a", data: "x"}, {name: "a/b", data: "y"}}},
		{"directory then file of that name", []entry{pf, {name: "a/b", data: "y"}, {name: "a", data: "x"}}},
		{"no project file", []entry{{name: "README.txt", data: "x"}}},
	}
	for _, tt := range corpus {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			victim := filepath.Join(parent, "victim")
			os.WriteFile(victim, []byte("original"), 0o644)
			target := filepath.Join(parent, "target")
			os.Mkdir(target, 0o755)
			before := tree(t, parent)
			err := archive.Extract(makeZip(t, tt.entries...), target, archive.Limits{}, nil)
			var ae *archive.Error
			if !errors.As(err, &ae) {
				t.Fatalf("Extract = %v, want a refusal", err)
			}
			if strings.Contains(ae.Msg, parent) {
				t.Errorf("message %q names a server path", ae.Msg)
			}
			if after := tree(t, parent); !slices.Equal(before, after) {
				t.Errorf("the archive changed files:\nbefore %q\nafter  %q", before, after)
			}
			if _, err := os.Lstat("/tmp/labtap-zipslip-absolute"); err == nil {
				os.Remove("/tmp/labtap-zipslip-absolute")
				t.Errorf("an absolute entry was written")
			}
		})
	}
}

func TestExtractHoldsItsLimits(t *testing.T) {
	zeros := strings.Repeat("\x00", 4<<20) // deflates about 1000:1
	pf := entry{name: "project.gns3", data: projectGNS3}
	tests := []struct {
		name    string
		lim     archive.Limits
		entries []entry
	}{
		{"too many entries", archive.Limits{Entries: 2}, []entry{pf, {name: "a", data: "1"}, {name: "b", data: "2"}}},
		{"too many bytes", archive.Limits{Size: 100}, []entry{pf, {name: "a", data: strings.Repeat("x", 200)}}},
		{"compression ratio (zip bomb)", archive.Limits{Ratio: 200}, []entry{pf, {name: "bomb", data: zeros}}},
		// Entries of 1 MiB and less are not checked one by one: a bomb of
		// many of them (80 MiB from some 80 KiB here; 20 GiB, the size
		// limit, from 20 MB) is checked on their whole.
		{"compression ratio of many small entries", archive.Limits{Ratio: 200}, func() []entry {
			es := []entry{pf}
			for i := range 80 {
				es = append(es, entry{name: fmt.Sprintf("bomb%02d", i), data: zeros[:1<<20]})
			}
			return es
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := t.TempDir()
			err := archive.Extract(makeZip(t, tt.entries...), target, tt.lim, nil)
			if !errors.Is(err, archive.ErrTooLarge) {
				t.Fatalf("Extract = %v, want ErrTooLarge", err)
			}
			if got := tree(t, target); len(got) != 1 {
				t.Errorf("a refused archive wrote %q", got)
			}
		})
	}
}

func TestExtractWritesRegularFilesAndDirectories(t *testing.T) {
	target := t.TempDir()
	zr := makeZip(t,
		entry{name: "project.gns3", data: projectGNS3},
		entry{name: "README.txt", data: "hello"},
		entry{name: "project-files/vpcs/n1/startup.vpc", data: "ip 10.0.0.1/24"},
		entry{name: "empty/", mode: fs.ModeDir | 0o700},
		entry{name: "run.sh", mode: 0o4755, data: "#!/bin/sh"}, // setuid and exec bits dropped
	)
	if err := archive.Extract(zr, target, archive.Limits{}, func(name string) bool { return name == "project.gns3" }); err != nil {
		t.Fatal(err)
	}
	want := []string{
		target + " drwxr-xr-x",
		target + "/README.txt -rw-r--r-- hello",
		target + "/empty drwxr-xr-x",
		target + "/project-files drwxr-xr-x",
		target + "/project-files/vpcs drwxr-xr-x",
		target + "/project-files/vpcs/n1 drwxr-xr-x",
		target + "/project-files/vpcs/n1/startup.vpc -rw-r--r-- ip 10.0.0.1/24",
		target + "/run.sh -rw-r--r-- #!/bin/sh",
	}
	if got := tree(t, target); !slices.Equal(got, want) {
		t.Errorf("extracted:\n%q\nwant\n%q", got, want)
	}
}
