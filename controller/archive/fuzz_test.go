package archive

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func zipOf(f *testing.F, files map[string]string) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for name, body := range files {
		fw, err := w.Create(name)
		if err != nil {
			f.Fatal(err)
		}
		fw.Write([]byte(body))
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// FuzzExtract unpacks hostile archives with small limits: whatever is
// accepted lands inside the target directory as regular files and
// directories only, within the byte budget, and Extract never panics.
func FuzzExtract(f *testing.F) {
	f.Add(zipOf(f, map[string]string{ProjectFile: `{"name":"p"}`, "project-files/vpcs/x/startup.vpc": "ip dhcp"}))
	f.Add(zipOf(f, map[string]string{ProjectFile: "{}", "../escape": "x"}))
	f.Add(zipOf(f, map[string]string{ProjectFile: "{}", "a": "file", "a/b": "inside a file"}))
	f.Add(zipOf(f, map[string]string{ProjectFile: "{}", "dir/": "", "dir/f": strings.Repeat("z", 4096)}))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	lim := Limits{Entries: 64, Size: 1 << 20, Ratio: 200}
	f.Fuzz(func(t *testing.T, data []byte) {
		zr, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if err := Check(zr, lim); err != nil {
			return
		}
		_, _ = ReadProjectFile(zr)
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = Extract(zr, dir, lim, nil) // on error dir holds part: still only inside it
		var total int64
		err = filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == parent {
				return nil
			}
			if p != dir && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
				t.Errorf("%s written outside the target directory", p)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if !info.Mode().IsRegular() && !info.IsDir() {
				t.Errorf("%s is %v, not a regular file or a directory", p, info.Mode().Type())
			}
			if info.Mode().IsRegular() {
				if info.Mode().Perm()&0o111 != 0 {
					t.Errorf("%s is executable", p)
				}
				total += info.Size()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if total > lim.Size {
			t.Fatalf("unpacked %d bytes, over the budget of %d", total, lim.Size)
		}
	})
}
