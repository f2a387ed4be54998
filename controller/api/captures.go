package api

import (
	"context"
	"io"
	"mime"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/netguard"
)

// captureRoutes answer a link's capture routes.
type captureRoutes struct {
	resource
	// serverCtx is the server's lifetime (Config.Context): streams end
	// with it.
	serverCtx context.Context
}

// startCapture takes the capture vocabulary's Spec as its body (it may be
// empty, or {}): the schema, made from the vocabulary, and Spec.Check are
// the API edge's checks.
func (h captureRoutes) startCapture(c *fiber.Ctx) error {
	var req capspec.Spec
	if err := h.decode(c, "capture_start", &req); err != nil {
		return err
	}
	if err := req.Check(false); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	}
	l, err := h.projects.Captures.Start(c.UserContext(), c.Params("project_id"), c.Params("link_id"), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

func (h captureRoutes) stopCapture(c *fiber.Ctx) error {
	l, err := h.projects.Captures.Stop(c.UserContext(), c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(linkFrom(l))
}

// pcapContentType is the media type of a capture stream.
const pcapContentType = "application/vnd.tcpdump.pcap"

// pcapngContentType is the media type of a pcapng capture.
const pcapngContentType = "application/x-pcapng"

// pcap relays the capture from the agent that writes it: the file from
// its first byte, then every record as it is written, in chunks flushed at
// once, and a proper end of the body when the capture stops (GNS3 drops the
// connection instead). `curl -sN URL | wireshark -k -i -` shows it live.
func (h captureRoutes) pcap(c *fiber.Ctx) error {
	// The stream lives as long as the server, not as long as a request
	// deadline: Fiber reads it after this handler returns.
	ctx, cancel := context.WithCancel(h.serverCtx)
	body, err := h.projects.Captures.Stream(ctx, c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		cancel()
		return err
	}
	// A client that goes away is noticed at once, not at the next frame
	// (which may never come): its relay from the agent and the agent's
	// file handle are released. The watch reads the connection, so it
	// closes after the stream; the body owns the watch and ends it.
	c.Context().SetConnectionClose()
	unwatch, _ := netguard.WatchGone(c.Context().Conn(), cancel)
	body = &cancelOnClose{ReadCloser: body, cancel: cancel, unwatch: unwatch}
	c.Set(fiber.HeaderContentType, pcapContentType)
	c.Set(fiber.HeaderCacheControl, "no-store")
	// Size -1: chunked, each read flushed; fasthttp closes body when done.
	c.Context().SetBodyStream(body, -1)
	return nil
}

// captureFile sends the file a link's running capture writes, as it is now
// (for a ring, the file being written): up to its last whole record, so a
// valid capture on its own, with its length and its name as the download's
// file name. The capture goes on; /pcap is the live stream. Once the
// capture stopped, it sends its (last) file whole, from whichever compute
// holds it.
func (h captureRoutes) captureFile(c *fiber.Ctx) error {
	ctx, cancel := context.WithCancel(h.serverCtx)
	f, err := h.projects.Captures.File(ctx, c.Params("project_id"), c.Params("link_id"))
	if err != nil {
		cancel()
		return err
	}
	return sendCaptureFile(c, f, cancel)
}

// listFiles lists every capture file of a project on every compute:
// running, stopped and ring files, oldest first.
func (h captureRoutes) listFiles(c *fiber.Ctx) error {
	list, err := h.projects.Captures.Files(c.UserContext(), c.Params("project_id"))
	if err != nil {
		return err
	}
	return c.JSON(list)
}

// downloadFile sends one capture file of a project, by compute and name,
// relayed from the compute that holds it: a stopped file whole, a running
// one up to its last whole record.
func (h captureRoutes) downloadFile(c *fiber.Ctx) error {
	ctx, cancel := context.WithCancel(h.serverCtx)
	f, err := h.projects.Captures.OpenFile(ctx, c.Params("project_id"), c.Params("compute_id"), c.Params("file_name"))
	if err != nil {
		cancel()
		return err
	}
	return sendCaptureFile(c, f, cancel)
}

// deleteFile removes a stopped capture file; a running one is a 409.
func (h captureRoutes) deleteFile(c *fiber.Ctx) error {
	if err := h.projects.Captures.DeleteFile(c.UserContext(), c.Params("project_id"), c.Params("compute_id"), c.Params("file_name")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// sendCaptureFile sends a capture file as a download, its length and name
// said; cancel ends the relay once fasthttp closes the body.
func sendCaptureFile(c *fiber.Ctx, f project.CaptureFile, cancel context.CancelFunc) error {
	ctype := pcapContentType
	if strings.HasSuffix(f.Name, ".pcapng") {
		ctype = pcapngContentType
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": f.Name}))
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Context().SetBodyStream(&cancelOnClose{ReadCloser: f.Body, cancel: cancel}, int(f.Size))
	return nil
}

// cancelOnClose ends a stream's context when fasthttp closes its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel  context.CancelFunc
	unwatch func() // ends a watch of the client's departure, if any
}

func (b *cancelOnClose) Close() error {
	if b.unwatch != nil {
		b.unwatch()
	}
	b.cancel()
	return b.ReadCloser.Close()
}
