package host

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/proto"
)

// qemu/img makes and grows disks in the images folder and as a QEMU
// node's hd?_disk file only: never a project's files, its captures, the
// projects folder, a link out, or a preallocated disk larger than the
// free space.
func TestSecurityQemuImgPathsAndSizesAreBounded(t *testing.T) {
	testenv.RequireTools(t, "qemu-img")
	data := t.TempDir()
	im := &Images{dataDir: data, log: slog.New(slog.DiscardHandler)}
	project := filepath.Join(data, "projects", "5e1c0a11-0000-4000-8000-00000000e7ec")
	os.MkdirAll(filepath.Join(project, "project-files", "captures"), 0o755)
	gns3 := filepath.Join(project, "lab.gns3")
	os.WriteFile(gns3, []byte("{}"), 0o644)
	outside := t.TempDir()
	os.MkdirAll(im.ImagesDir(TypeQemu), 0o755)
	os.Symlink(outside, filepath.Join(im.ImagesDir(TypeQemu), "out"))
	node := filepath.Join(project, "project-files", "qemu", "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d")

	forbidden := func(err error) bool {
		pe, ok := errors.AsType[*proto.Error](err)
		return ok && pe.Code == proto.CodeForbidden
	}
	for _, p := range []string{
		gns3, filepath.Join(project, "project-files", "captures", "x.qcow2"), filepath.Join(data, "projects", "x.qcow2"),
		filepath.Join(project, "x.qcow2"), filepath.Join(node, "notes.txt"), filepath.Join(project, "project-files", "qemu", "n1", "hda_disk.qcow2"),
		filepath.Join(data, "projects", "no-such-project", "project-files", "qemu", "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d", "hda_disk.qcow2"),
		"../x.qcow2", "out/x.qcow2", "/etc/x.qcow2",
	} {
		if err := im.ResizeQemuImg(t.Context(), proto.QemuImgResize{Path: p, Extend: 1}); !forbidden(err) {
			t.Errorf("resize %s: %v, want forbidden", p, err)
		}
		if err := im.CreateQemuImg(t.Context(), proto.QemuImgCreate{Path: p, Format: "qcow2", Size: 1}); !forbidden(err) {
			t.Errorf("create %s: %v, want forbidden", p, err)
		}
	}
	if got, _ := os.ReadFile(gns3); string(got) != "{}" {
		t.Errorf("the project file became %d bytes", len(got))
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a disk was made through a link out of the images folder")
	}
	err := im.CreateQemuImg(t.Context(), proto.QemuImgCreate{Path: "huge.raw", Format: "raw", Size: MaxDiskMB, Preallocation: "full"})
	if pe, ok := errors.AsType[*proto.Error](err); !ok || pe.Code != proto.CodeInvalid {
		t.Errorf("a 2 TiB preallocated disk: %v, want invalid", err)
	}
	for _, p := range []string{"disk.qcow2", filepath.Join(im.ImagesDir(TypeQemu), "sub", "disk.qcow2"), filepath.Join(node, "hdb_disk.qcow2")} {
		if err := im.CreateQemuImg(t.Context(), proto.QemuImgCreate{Path: p, Format: "qcow2", Size: 1}); err != nil {
			t.Errorf("create %s: %v", p, err)
		}
		if err := im.ResizeQemuImg(t.Context(), proto.QemuImgResize{Path: p, Extend: 1}); err != nil {
			t.Errorf("resize %s: %v", p, err)
		}
	}
}
