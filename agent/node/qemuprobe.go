package node

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// QemuRuns reports whether a qemu-system binary in PATH runs here
// (answers -version). It finds out once per process.
var QemuRuns = sync.OnceValue(func() bool {
	for _, b := range QemuBinaries() {
		if _, err := QemuVersion(context.Background(), b); err == nil {
			return true
		}
	}
	return false
})

// QemuVersion runs bin -version and returns its version number.
func QemuVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "-version").Output()
	if err != nil {
		return "", err
	}
	return versionIn(bin, out)
}

// QemuImgVersion runs img --version (qemu-img has no -version, which
// QEMU itself takes) and returns its version number.
func QemuImgVersion(ctx context.Context, img string) (string, error) {
	out, err := exec.CommandContext(ctx, img, "--version").Output()
	if err != nil {
		return "", err
	}
	return versionIn(img, out)
}

// versionIn finds the number after "version" in bin's version output.
func versionIn(bin string, out []byte) (string, error) {
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("%s: no version in %q", bin, out)
}
