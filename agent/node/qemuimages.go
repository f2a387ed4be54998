package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/labtap/labtap/agent/imagesum"
)

// A QEMU node's images: the files its properties name, all inside the
// agent's images folder, and their md5 sums (GNS3's <image>_md5sum
// members).

// qemuImages is the images folder a node's image properties are names
// in.
type qemuImages string

// qemuImageProps are the properties naming image files, with their md5
// sum members (<name>_md5sum).
var qemuImageProps = []string{"hda_disk_image", "hdb_disk_image", "hdc_disk_image", "hdd_disk_image", "cdrom_image", "bios_image", "initrd", "kernel_image"}

func (p QemuProps) imageProp(name string) string {
	switch name {
	case "hda_disk_image":
		return p.HDA
	case "hdb_disk_image":
		return p.HDB
	case "hdc_disk_image":
		return p.HDC
	case "hdd_disk_image":
		return p.HDD
	case "cdrom_image":
		return p.CDROM
	case "bios_image":
		return p.BIOS
	case "initrd":
		return p.Initrd
	case "kernel_image":
		return p.Kernel
	}
	return ""
}

// rel returns name's path relative to the images folder: a name
// relative to it, or an absolute path inside it. Anything else is
// refused (the image's property names it in the error).
func (im qemuImages) rel(prop, name string) (string, error) {
	if len(name) > 4096 || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%s is outside the images folder", prop)
	}
	rel := name
	if filepath.IsAbs(name) {
		dir, err := filepath.Abs(string(im))
		if err != nil {
			return "", err
		}
		r, err := filepath.Rel(dir, filepath.Clean(name))
		if err != nil {
			return "", fmt.Errorf("%s %s is outside the images folder", prop, name)
		}
		rel = r
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s %s is outside the images folder", prop, name)
	}
	return rel, nil
}

// checkNames refuses image properties that name files outside the
// images folder; the files need not exist yet.
func (im qemuImages) checkNames(p QemuProps) error {
	for _, k := range qemuImageProps {
		if name := p.imageProp(k); name != "" {
			if _, err := im.rel(k, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// path resolves an image property inside the images folder (a name
// relative to it, or an absolute path inside it) through an os.Root, so
// that neither ".." nor a symbolic link leads out, and returns the
// image's real path. A missing file is GNS3's ImageMissingError message.
func (im qemuImages) path(name string) (string, error) {
	rel, err := im.rel("image", name)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(string(im))
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	defer root.Close()
	st, err := root.Stat(rel)
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	// QEMU opens the image by name: give it the real path, which the
	// root just showed to be inside the folder, and check it is the same
	// file.
	realDir, err1 := filepath.EvalSymlinks(dir)
	real, err2 := filepath.EvalSymlinks(filepath.Join(dir, rel))
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	if r, err := filepath.Rel(realDir, real); err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("image %s is outside the images folder", name)
	}
	if rst, err := os.Stat(real); err != nil || !os.SameFile(st, rst) {
		return "", fmt.Errorf("The image %s is missing", name)
	}
	return real, nil
}

// md5Wait is how long a node's creation or update waits for the md5 of
// an image not hashed yet; a sum not known by then is null.
const md5Wait = 2 * time.Second

// md5s returns the <image>_md5sum members of p: the md5 of each image
// file set, null when none is set, the file is missing, or its sum is not
// known within md5Wait (a large image being hashed in the background, or
// one too large to hash: imagesum). sums nil leaves them all null.
func (im qemuImages) md5s(p QemuProps, sums *imagesum.Sums) map[string]any {
	out := make(map[string]any, len(qemuImageProps))
	ctx, cancel := context.WithTimeout(context.Background(), md5Wait)
	defer cancel()
	for _, k := range qemuImageProps {
		out[k+"_md5sum"] = nil
		name := p.imageProp(k)
		if name == "" || sums == nil {
			continue
		}
		path, err := im.path(name)
		if err != nil {
			continue
		}
		if sum, err := sums.Sum(ctx, path); err == nil {
			out[k+"_md5sum"] = sum
		}
	}
	return out
}
