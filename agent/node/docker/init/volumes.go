package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	volumesRoot = "/gns3volumes"
	// copiedMark is the file whose presence says a volume holds the
	// image's content already: GNS3's name, so a project made by GNS3
	// keeps what its nodes wrote.
	copiedMark = ".gns3_perms"
	ifupTime   = 30 * time.Second
)

// volumes mounts each persistent directory of the node over its path: on
// the first start its directory gets a copy of what the image has there
// (files the user put there before are kept), then it is bind-mounted, so
// what the node writes there lands in the node's directory and outlives
// the container.
func volumes(list string) {
	if list == "" {
		return
	}
	for v := range strings.SplitSeq(list, ":") {
		if !strings.HasPrefix(v, "/") || v == "/" {
			continue
		}
		src := volumesRoot + v
		if _, err := os.Stat(src); err != nil {
			continue // not bound: the agent gave no such volume
		}
		if err := os.MkdirAll(v, 0o755); err != nil {
			warn("volume %s: %v", v, err)
			continue
		}
		if _, err := os.Lstat(filepath.Join(src, copiedMark)); errors.Is(err, fs.ErrNotExist) {
			if err := copyTree(v, src); err != nil {
				warn("volume %s: copy the image's content: %v", v, err)
			}
			if err := os.WriteFile(filepath.Join(src, copiedMark), nil, 0o644); err != nil {
				warn("volume %s: %v", v, err)
			}
		}
		if err := unix.Mount(src, v, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			warn("volume %s: mount: %v (the container needs CAP_SYS_ADMIN; its content stays in %s)", v, err, src)
		}
	}
}

// copyTree copies the tree at from into to, keeping modes, owners and
// symbolic links, and leaving every file that is in to already.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		if _, err := os.Lstat(dst); err == nil {
			return nil // the user's, or the volume's own directory
		}
		switch {
		case d.IsDir():
			err = os.Mkdir(dst, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			var target string
			if target, err = os.Readlink(p); err == nil {
				err = os.Symlink(target, dst)
			}
		case d.Type().IsRegular():
			err = copyFile(p, dst, info.Mode().Perm())
		default:
			return nil // devices, sockets, fifos: not kept
		}
		if err != nil {
			return err
		}
		if st != nil {
			_ = os.Lchown(dst, int(st.Uid), int(st.Gid))
		}
		if d.Type()&fs.ModeSymlink == 0 {
			_ = os.Chmod(dst, info.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
		return nil
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ifup brings up what /etc/network/interfaces configures, as GNS3's init
// does, with the image's own ifup (ifupdown takes "address a.b.c.d/len";
// BusyBox's wants a netmask line). An image without ifup is left alone,
// with a word on the console when the file configures something.
func ifup() {
	data, err := os.ReadFile("/etc/network/interfaces")
	if err != nil {
		return
	}
	bin, err := exec.LookPath("ifup")
	if err != nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				warn("/etc/network/interfaces configures interfaces but this image has no ifup")
				return
			}
		}
		return
	}
	_ = os.MkdirAll("/run/network", 0o755) // ifupdown's state
	ctx, cancel := context.WithTimeout(context.Background(), ifupTime)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-a", "-f")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		warn("ifup -a: %v", err)
	}
}

func warn(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "labtap init: "+format+"\r\n", a...)
}
