package node

import (
	"context"
	"time"
)

// The images' md5 sums a QEMU node reports (GNS3's <image>_md5sum
// members), from the agent's imagesum.Sums.

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

// md5Wait is how long a node's creation or update waits for the md5 of
// an image not hashed yet; a sum not known by then is null.
const md5Wait = 2 * time.Second

// imageMD5s returns the <image>_md5sum members: the md5 of each image
// file set, null when none is set, the file is missing, or its sum is not
// known within md5Wait (a large image being hashed in the background, or
// one too large to hash: imagesum).
func (q *Qemu) imageMD5s() map[string]any {
	out := make(map[string]any, len(qemuImageProps))
	ctx, cancel := context.WithTimeout(context.Background(), md5Wait)
	defer cancel()
	for _, k := range qemuImageProps {
		out[k+"_md5sum"] = nil
		name := q.cfg.Props.imageProp(k)
		if name == "" || q.cfg.ImageSums == nil {
			continue
		}
		path, err := q.image(name)
		if err != nil {
			continue
		}
		if sum, err := q.cfg.ImageSums.Sum(ctx, path); err == nil {
			out[k+"_md5sum"] = sum
		}
	}
	return out
}
