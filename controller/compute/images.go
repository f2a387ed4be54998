package compute

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// The image and QEMU wizard types are the agents' own.
type (
	Image            = proto.Image
	QemuBinary       = proto.QemuBinary
	QemuCapabilities = proto.QemuCapabilities
)

// Images lists a compute's images of a node type.
func (a *Agents) Images(ctx context.Context, computeID, nodeType string) ([]Image, error) {
	out := []Image{}
	err := a.do(ctx, computeID, "GET", proto.ImagesPath(nodeType), nil, &out)
	return out, err
}

// UploadImage streams an image to a compute (not retried: a body cannot
// be replayed); size is the body's length, -1 when unknown.
func (a *Agents) UploadImage(ctx context.Context, computeID, nodeType, path string, body io.Reader, size int64) error {
	t, err := a.reg.target(computeID)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, t.url+proto.ImagePath(nodeType, path), body)
	if err != nil {
		return &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("Could not write image: %s is forbidden", path), Err: err}
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if t.secret != "" {
		req.Header.Set(proto.SecretHeader, t.secret)
	}
	resp, err := a.client.streams.Do(req)
	if err != nil {
		return &project.Error{Kind: project.ErrConflict, Err: err,
			Msg: fmt.Sprintf("Cannot connect to compute '%s' with request PUT %s", t.id, req.URL.Path)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return agentError(t, resp.StatusCode, data)
	}
	return nil
}

// QemuBinaries lists a compute's QEMU executables; archs keeps those whose
// name ends with one of them.
func (a *Agents) QemuBinaries(ctx context.Context, computeID string, archs []string) ([]QemuBinary, error) {
	path := proto.QemuBinariesPath
	if len(archs) > 0 {
		path += "?archs=" + url.QueryEscape(strings.Join(archs, ","))
	}
	out := []QemuBinary{}
	err := a.do(ctx, computeID, "GET", path, nil, &out)
	return out, err
}

// QemuImgBinaries lists a compute's qemu-img executables.
func (a *Agents) QemuImgBinaries(ctx context.Context, computeID string) ([]QemuBinary, error) {
	out := []QemuBinary{}
	err := a.do(ctx, computeID, "GET", proto.QemuImgBinariesPath, nil, &out)
	return out, err
}

// QemuCapabilities reports what a compute's QEMU can do (KVM).
func (a *Agents) QemuCapabilities(ctx context.Context, computeID string) (QemuCapabilities, error) {
	out := QemuCapabilities{KVM: []string{}}
	err := a.do(ctx, computeID, "GET", proto.QemuCapabilitiesPath, nil, &out)
	return out, err
}

// OpenImage streams an image back from a compute; the caller closes it.
// size is its length, -1 when unknown.
func (a *Agents) OpenImage(ctx context.Context, computeID, nodeType, path string) (io.ReadCloser, int64, error) {
	t, err := a.reg.target(computeID)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+proto.ImagePath(nodeType, path), nil)
	if err != nil {
		return nil, 0, &project.Error{Kind: project.ErrForbidden, Msg: fmt.Sprintf("Image %s is forbidden", path), Err: err}
	}
	if t.secret != "" {
		req.Header.Set(proto.SecretHeader, t.secret)
	}
	resp, err := a.client.streams.Do(req)
	if err != nil {
		return nil, 0, &project.Error{Kind: project.ErrConflict, Err: err,
			Msg: fmt.Sprintf("Cannot connect to compute '%s' with request GET %s", t.id, req.URL.Path)}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, 0, agentError(t, resp.StatusCode, data)
	}
	return resp.Body, resp.ContentLength, nil
}

// CreateQemuImg has a compute make a disk image with qemu-img create.
func (a *Agents) CreateQemuImg(ctx context.Context, computeID string, c proto.QemuImgCreate) error {
	return a.do(ctx, computeID, "POST", proto.QemuImgPath, c, nil)
}

// ResizeQemuImg has a compute grow a disk image with qemu-img resize.
func (a *Agents) ResizeQemuImg(ctx context.Context, computeID string, c proto.QemuImgResize) error {
	return a.do(ctx, computeID, "PUT", proto.QemuImgPath, c, nil)
}

// ResizeDisk grows a disk of a stopped QEMU node.
func (a *Agents) ResizeDisk(ctx context.Context, computeID, projectID, nodeID, drive string, extendMB int) error {
	return a.do(ctx, computeID, "POST", proto.ResizeDiskPath(projectID, nodeID), proto.ResizeDisk{DriveName: drive, Extend: extendMB}, nil)
}

// Statistics are a compute host's figures (GNS3's compute statistics).
type Statistics = proto.Statistics

// Statistics asks a compute for its host's figures.
func (a *Agents) Statistics(ctx context.Context, computeID string) (Statistics, error) {
	var out Statistics
	err := a.do(ctx, computeID, "GET", proto.StatisticsPath, nil, &out)
	return out, err
}

// DialConsole connects to a started node's telnet console through its
// agent: the connection carries the console's bytes both ways until
// closed, or until ctx ends.
func (a *Agents) DialConsole(ctx context.Context, computeID, projectID, nodeID string) (io.ReadWriteCloser, error) {
	t, err := a.reg.target(computeID)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+proto.ConsolePath(projectID, nodeID), nil)
	if err != nil {
		return nil, &project.Error{Kind: project.ErrInvalid, Msg: "Invalid node", Err: err}
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto.ConsoleUpgrade)
	t.authorize(req.Header)
	resp, err := a.client.streams.Do(req)
	if err != nil {
		return nil, &project.Error{Kind: project.ErrConflict, Err: err,
			Msg: fmt.Sprintf("Cannot connect to compute '%s' with request GET %s", t.id, req.URL.Path)}
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, agentError(t, resp.StatusCode, data)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, &project.Error{Kind: project.ErrConflict, Msg: "The agent did not switch to the console"}
	}
	return rwc, nil
}
