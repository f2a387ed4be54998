// Package docker runs GNS3 "docker" nodes: one container per node, driven
// through the Docker Engine's API with its official Go client, each adapter
// a veth pair whose container end is eth<n> inside the container's network
// namespace and whose host end the agent relays with an AF_PACKET socket
// (GNS3's docker node type, see docs/nodes.md). The container's TTY is the node's
// telnet console, through the Engine's attach stream.
//
// Containers are labelled as labtap's (LabelNode, LabelProject,
// LabelCompute) and named labtap-<node id>: an agent finds its own after a
// restart and never touches a container without its labels.
package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// Labels every container of labtap's carries.
const (
	LabelProject = "labtap.project_id"
	LabelNode    = "labtap.node_id"
	LabelCompute = "labtap.compute_id"
)

// Engine is a connection to the Docker Engine, shared by an agent's docker
// nodes.
type Engine struct {
	cli        *client.Client
	APIVersion string // negotiated
}

// Connect reaches the Engine the environment names (DOCKER_HOST, else the
// local socket), negotiates the API version and refuses an Engine older
// than API 1.40 (Docker 19.03), as GNS3 does.
func Connect(ctx context.Context) (*Engine, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true, ForceNegotiate: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker: the Docker Engine does not answer: %w", err)
	}
	return &Engine{cli: cli, APIVersion: cli.ClientVersion()}, nil
}

// Close closes the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// Images returns the tags of the Engine's images, "<none>:<none>" left out,
// sorted (GET /v2/computes/{id}/docker/images).
func (e *Engine) Images(ctx context.Context) ([]string, error) {
	res, err := e.cli.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		return nil, engineError(err)
	}
	var tags []string
	for _, im := range res.Items {
		for _, t := range im.RepoTags {
			if t != "<none>:<none>" {
				tags = append(tags, t)
			}
		}
	}
	slices.Sort(tags)
	return slices.Compact(tags), nil
}

// RemoveProject removes every container of a project that this compute
// made and that is not running: those a killed agent left behind. Running
// ones are adopted by their nodes when the project's nodes are created
// again (an agent restart), or removed then.
func (e *Engine) RemoveProject(ctx context.Context, computeID, projectID string, running bool) (int, error) {
	f := make(client.Filters).Add("label", LabelProject+"="+projectID, LabelCompute+"="+computeID)
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, engineError(err)
	}
	n := 0
	for _, c := range res.Items {
		if c.Labels[LabelProject] != projectID || c.Labels[LabelCompute] != computeID {
			continue // belt and braces: never anyone else's
		}
		if !running && (c.State == "running" || c.State == "paused") {
			continue
		}
		if _, err := e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return n, engineError(err)
		}
		n++
	}
	return n, nil
}

// ErrImageMissing is the error of a node whose image the Engine lacks.
type ErrImageMissing struct{ Image string }

func (e *ErrImageMissing) Error() string {
	return fmt.Sprintf("The image %s is missing: this agent pulls nothing from a registry; build it "+
		"(scripts/node-images builds labtap/frr:bookworm and labtap/host:bookworm) or load it with `docker load`", e.Image)
}

// engineError is an Engine failure as GNS3 words it, with the Engine's
// message only.
func engineError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := strings.TrimSpace(err.Error())
	msg = strings.TrimPrefix(msg, "Error response from daemon: ")
	return fmt.Errorf("Docker has returned an error: %s", msg)
}

// CheckPrivileges tells whether this process can plumb containers: open
// their network namespaces (CAP_SYS_PTRACE or root's ownership), enter them
// (CAP_SYS_ADMIN), make and configure veths (CAP_NET_ADMIN) and read them
// with AF_PACKET (CAP_NET_RAW). nil when it can.
func CheckPrivileges() error {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("docker nodes need root: cannot read this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_NET_RAW, "CAP_NET_RAW"}, {unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}, {unix.CAP_SYS_PTRACE, "CAP_SYS_PTRACE"}} {
		if data[c.bit/32].Effective&(1<<(c.bit%32)) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("docker nodes need root or the capabilities %s (missing: %s): they are not offered by this agent",
			"CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN, CAP_SYS_PTRACE", strings.Join(missing, ", "))
	}
	return nil
}
