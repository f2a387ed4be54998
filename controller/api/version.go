package api

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/project"
)

// guiAgent is the User-Agent of a GNS3 GUI of a 2.2 release (a 2.1 GUI
// keeps templates itself and a 3.x GUI speaks /v3: those get the
// configured version, which they refuse).
var guiAgent = regexp.MustCompile(`^GNS3 QT Client v(2\.2\.\d+[.+a-z0-9-]*)$`)

func (a *API) version(c *fiber.Ctx) error {
	// "local" stays false: it is GNS3's --local mode, which labtap has not.
	v := a.cfg.Version
	ua := c.Get(fiber.HeaderUserAgent)
	if m := guiAgent.FindStringSubmatch(ua); m != nil && !a.cfg.PinVersion {
		v = m[1] // its own version, exactly: no mismatch warning either
	}
	if strings.HasPrefix(ua, "GNS3 QT Client") {
		a.log.Info("GNS3 GUI connecting", "client", ua, "answered", v, "remote", c.IP())
	}
	return c.JSON(versionJSON{Version: v})
}

func (a *API) checkVersion(c *fiber.Ctx) error {
	var req struct {
		Version string `json:"version"`
	}
	if err := a.decode(c, "version_check", &req); err != nil {
		return err
	}
	if req.Version != a.cfg.Version {
		return &project.Error{Kind: project.ErrConflict,
			Msg: fmt.Sprintf("Client version %s is not the same as server version %s", req.Version, a.cfg.Version)}
	}
	return c.JSON(fiber.Map{"version": a.cfg.Version})
}
