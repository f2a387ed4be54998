package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// copiedMark is the file whose presence in a persistent directory says it
// holds the image's content already: GNS3's name, so a project made by
// GNS3 (or by an older labtap, whose init wrote it) keeps what its nodes
// wrote.
const copiedMark = ".gns3_perms"

// seedVolumes gives each persistent directory of the node that has not had
// it yet a copy of what the image holds at its path, keeping every file
// that is there already (the user's, or /etc/network/interfaces), then
// marks it. The Engine binds these directories over their paths, which
// hides the image's content there: GNS3's init copies it from inside the
// container and mounts the directory itself, which takes CAP_SYS_ADMIN;
// here the agent copies it from outside, through a container of the image
// that is created and never started, and the node holds no such
// capability. A directory whose copy fails is left unmarked, to be tried
// again at the next container, and the node goes on.
func (c *Container) seedVolumes(ctx context.Context, image string, vols []string) error {
	root, err := os.OpenRoot(c.cfg.Dir)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer root.Close()
	var todo []string
	for _, v := range vols {
		if _, err := root.Lstat(filepath.Join(strings.TrimPrefix(v, "/"), copiedMark)); errors.Is(err, fs.ErrNotExist) {
			todo = append(todo, v)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	cr, err := c.e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Entrypoint: []string{"/labtap-never-started"},
			Labels: map[string]string{LabelProject: c.cfg.ProjectID, LabelCompute: c.cfg.ComputeID}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return engineError(err)
	}
	defer func() {
		_, _ = c.e.cli.ContainerRemove(context.WithoutCancel(ctx), cr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	for _, v := range todo {
		if err := c.seed(ctx, root, cr.ID, v); err != nil {
			c.log.Warn("persistent volume: copy the image's content", "volume", v, "err", err)
			continue
		}
		if err := root.WriteFile(filepath.Join(strings.TrimPrefix(v, "/"), copiedMark), nil, 0o644); err != nil {
			c.log.Warn("persistent volume: mark it seeded", "volume", v, "err", err)
		}
	}
	return nil
}

// seed copies what container id's image holds at v into v's directory
// under root; nothing when the image has no v.
func (c *Container) seed(ctx context.Context, root *os.Root, id, v string) error {
	res, err := c.e.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: v + "/."})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return engineError(err)
	}
	defer res.Content.Close()
	dst, err := root.OpenRoot(strings.TrimPrefix(v, "/"))
	if err != nil {
		return err
	}
	defer dst.Close()
	return untar(dst, res.Content)
}

// untar writes a tar stream's directories, regular files, symbolic and
// hard links under root with their modes and owners, leaving every name
// that exists already; devices, sockets and fifos are not kept. root
// keeps every entry inside it, whatever its name or links say.
func untar(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue // the directory itself
		}
		if _, err := root.Lstat(name); err == nil {
			continue
		}
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.Mkdir(name, mode.Perm())
		case tar.TypeReg:
			err = writeFrom(root, name, mode.Perm(), tr)
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
		case tar.TypeLink:
			err = root.Link(strings.TrimPrefix(path.Clean("/"+h.Linkname), "/"), name)
		default:
			continue
		}
		if err != nil {
			return err
		}
		_ = root.Lchown(name, h.Uid, h.Gid)
		if h.Typeflag != tar.TypeSymlink {
			_ = root.Chmod(name, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
	}
}

func writeFrom(root *os.Root, name string, perm fs.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
