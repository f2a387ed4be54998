package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// QemuBinaries lists the qemu-system-* executables in PATH, each once
// (by real path), in PATH order: the compute's /qemu/binaries, and the
// only programs a node's qemu_path may name.
func QemuBinaries() []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue // the working directory is no place for QEMU
		}
		matches, _ := filepath.Glob(filepath.Join(dir, "qemu-system-*"))
		for _, m := range matches {
			real, err := filepath.EvalSymlinks(m)
			if err != nil || seen[real] {
				continue
			}
			if st, err := os.Stat(real); err != nil || st.Mode()&0o111 == 0 || !st.Mode().IsRegular() {
				continue
			}
			seen[real] = true
			out = append(out, m)
		}
	}
	return out
}

// resolveQemuBinary finds the QEMU executable: qemu_path, or
// qemu-system-<platform> (x86_64 when neither is set). It must be one of
// QemuBinaries, named by its file name or by a path to the same file
// (a path to no file at all, from a project made on another host, counts
// as its file name): any other program would run as the agent's user.
func resolveQemuBinary(props QemuProps) (string, error) {
	p := props.QemuPath
	if p == "" {
		plat := props.Platform
		if plat == "" {
			plat = "x86_64"
		}
		name := "qemu-system-" + plat
		for _, b := range QemuBinaries() {
			if filepath.Base(b) == name {
				return b, nil
			}
		}
		return "", fmt.Errorf("QEMU binary path %s is not found in the path", name)
	}
	if len(p) > 4096 || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("qemu_path is not a QEMU binary of this compute")
	}
	real := ""
	if strings.Contains(p, "/") {
		r, err := filepath.EvalSymlinks(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// A project made on another host names its QEMU there: use
			// the binary of the same name here, as a bare name would.
			p = filepath.Base(p)
		case err != nil:
			return "", fmt.Errorf("qemu_path %s is not one of this compute's QEMU binaries (see /qemu/binaries)", p)
		default:
			real = r
		}
	}
	for _, b := range QemuBinaries() {
		if real == "" && filepath.Base(b) == p {
			return b, nil
		}
		if rb, err := filepath.EvalSymlinks(b); err == nil && real != "" && rb == real {
			return b, nil
		}
	}
	return "", fmt.Errorf("qemu_path %s is not one of this compute's QEMU binaries (see /qemu/binaries)", p)
}
