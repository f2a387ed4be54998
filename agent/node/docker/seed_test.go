package docker

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestUntarKeepsWhatIsThereAndStaysInside(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "interfaces"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	file := func(name, body string, mode int64) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755})
	file("./interfaces", "image's", 0o644)
	tw.WriteHeader(&tar.Header{Name: "./if-up.d/", Typeflag: tar.TypeDir, Mode: 0o750})
	file("./if-up.d/hook", "#!/bin/sh\n", 0o4755)
	tw.WriteHeader(&tar.Header{Name: "./abs", Typeflag: tar.TypeSymlink, Linkname: outside})
	file("./abs/escaped", "x", 0o644) // through the symbolic link: refused
	tw.Close()

	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	err = untar(root, &b)
	if err == nil {
		t.Fatal("a file through a symbolic link out of the volume was written")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "interfaces")); string(got) != "mine" {
		t.Fatalf("interfaces = %q: the user's file was replaced", got)
	}
	st, err := os.Stat(filepath.Join(dir, "if-up.d", "hook"))
	if err != nil || st.Mode()&os.ModeSetuid == 0 || st.Mode().Perm() != 0o755 {
		t.Fatalf("hook: %v %v", st, err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "abs")); l != outside {
		t.Fatalf("symbolic link %q", l)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside: %v", entries)
	}
}
