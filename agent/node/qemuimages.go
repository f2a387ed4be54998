package node

import (
	"crypto/md5"
	"encoding/hex"
	"io"
	"os"
	"strings"
)

// The images' md5 sums a QEMU node reports (GNS3's <image>_md5sum
// members), cached beside each image as GNS3 does.

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

// imageMD5s returns the <image>_md5sum members: the md5 of each image
// file set, null when none is set or the file is missing (GNS3).
func (q *Qemu) imageMD5s() map[string]any {
	out := make(map[string]any, len(qemuImageProps))
	for _, k := range qemuImageProps {
		out[k+"_md5sum"] = nil
		name := q.cfg.Props.imageProp(k)
		if name == "" {
			continue
		}
		path, err := q.image(name)
		if err != nil {
			continue
		}
		if sum, err := FileMD5(path); err == nil {
			out[k+"_md5sum"] = sum
		}
	}
	return out
}

// FileMD5 returns a file's md5 (hex), from its cache <file>.md5sum when
// the cache is not older than the file (GNS3's cache format: 32 hex
// digits), else computed and cached.
func FileMD5(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	cache := path + ".md5sum"
	if st, err := os.Stat(cache); err == nil && !st.ModTime().Before(info.ModTime()) {
		if b, err := os.ReadFile(cache); err == nil {
			if s := strings.TrimSpace(string(b)); len(s) == 32 {
				return s, nil
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	m := md5.New()
	if _, err := io.Copy(m, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(m.Sum(nil))
	_ = os.WriteFile(cache, []byte(sum), 0o644) // a cache: failing to write it costs time only
	return sum, nil
}
