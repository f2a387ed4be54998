package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/atomicfile"
)

// settingsStore keeps the controller settings GNS3 clients edit but labtap
// does not use (the GNS3 VM's, the IOU license), so a client's Preferences
// page loads and saves: one JSON file, written atomically.
type settingsStore struct {
	mu     sync.Mutex
	path   string // "" keeps them in memory
	values map[string]map[string]any
	broken error // the file could not be read: never written over
}

// settingsRoutes answer the GNS3 VM and IOU license settings routes.
type settingsRoutes struct {
	resource
	settings *settingsStore
}

func newSettingsStore(path string) *settingsStore {
	s := &settingsStore{path: path, values: map[string]map[string]any{}}
	if path == "" {
		return s
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &s.values)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.broken = fmt.Errorf("%s: %w", path, err)
	}
	return s
}

// get returns a section: its defaults with what was stored over them.
func (s *settingsStore) get(section string, defaults map[string]any) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(defaults)
	maps.Copy(out, s.values[section])
	return out
}

// merge stores members over a section and returns the whole section.
func (s *settingsStore) merge(section string, defaults, update map[string]any) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, &project.Error{Kind: project.ErrConflict, Msg: "The settings file cannot be read; fix or remove it first", Err: s.broken}
	}
	next := maps.Clone(s.values)
	sec := maps.Clone(next[section])
	if sec == nil {
		sec = map[string]any{}
	}
	maps.Copy(sec, update)
	next[section] = sec
	if s.path != "" {
		data, err := json.MarshalIndent(next, "", "    ")
		if err != nil {
			return nil, err
		}
		if err := atomicfile.Write(s.path, data, 0o600); err != nil {
			return nil, &project.Error{Kind: project.ErrConflict, Msg: "Could not save the settings", Err: err}
		}
	}
	s.values = next
	out := maps.Clone(defaults)
	maps.Copy(out, sec)
	return out, nil
}

// gns3VMDefaults are GNS3 2.2's (observed).
func gns3VMDefaults() map[string]any {
	return map[string]any{"allocate_vcpus_ram": true, "enable": false, "engine": "vmware", "headless": false,
		"port": 80, "ram": 2048, "vcpus": 1, "vmname": nil, "when_exit": "stop"}
}

func iouLicenseDefaults() map[string]any {
	return map[string]any{"iourc_content": "", "license_check": true}
}

func (h settingsRoutes) getGNS3VM(c *fiber.Ctx) error {
	return c.JSON(h.settings.get("gns3vm", gns3VMDefaults()))
}

// putGNS3VM stores GNS3 VM settings (validated and merged: GNS3 replaced
// them whole, and its next PUT crashed). labtap runs no GNS3 VM.
func (h settingsRoutes) putGNS3VM(c *fiber.Ctx) error {
	var req map[string]any
	if err := h.decode(c, "gns3vm", &req); err != nil {
		return err
	}
	if req["enable"] == true {
		return &project.Error{Kind: project.ErrConflict, Msg: "labtap does not run a GNS3 VM"}
	}
	out, err := h.settings.merge("gns3vm", gns3VMDefaults(), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

// gns3VMEngines are the engines GNS3 knows; each lists no VM here.
var gns3VMEngines = []string{"vmware", "virtualbox", "hyper-v", "remote"}

func (h settingsRoutes) gns3VMEngineVMs(c *fiber.Ctx) error {
	engine := c.Params("engine")
	for _, e := range gns3VMEngines {
		if e == engine {
			return c.JSON([]any{})
		}
	}
	return &project.Error{Kind: project.ErrNotFound, Msg: "Unknown GNS3 VM engine " + engine}
}

func (h settingsRoutes) getIOULicense(c *fiber.Ctx) error {
	return c.JSON(h.settings.get("iou_license", iouLicenseDefaults()))
}

func (h settingsRoutes) putIOULicense(c *fiber.Ctx) error {
	var req map[string]any
	if err := h.decode(c, "iou_license", &req); err != nil {
		return err
	}
	out, err := h.settings.merge("iou_license", iouLicenseDefaults(), req)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

// emptyList answers the listings a client's dialog opens with, for
// emulators labtap does not run: [] instead of an error toast.
func emptyList(c *fiber.Ctx) error { return c.JSON([]any{}) }

// computeEmptyList is emptyList for one compute: 404 if it is unknown.
func (a *API) computeEmptyList(c *fiber.Ctx) error {
	if _, ok := a.computes.Get(c.Params("compute_id")); !ok {
		return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + c.Params("compute_id") + " doesn't exist"}
	}
	return c.JSON([]any{})
}

// notRunHere answers an upload or action of an emulator labtap does not
// run: 409 saying so. An image upload's body (IOU and Dynamips images are
// tens of MiB: boundBody leaves it to the handler, see isImageUpload)
// is left unread, so the connection closes after the answer.
func notRunHere(emulator string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Context().SetConnectionClose()
		return &project.Error{Kind: project.ErrConflict, Msg: emulator + " is not supported by this server"}
	}
}

// computeNotRunHere is notRunHere for one compute: 404 if it is unknown.
func (a *API) computeNotRunHere(emulator string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if _, ok := a.computes.Get(c.Params("compute_id")); !ok {
			return &project.Error{Kind: project.ErrNotFound, Msg: "Compute ID " + c.Params("compute_id") + " doesn't exist"}
		}
		return notRunHere(emulator)(c)
	}
}

// statistics answers the web UI's system status: one entry per connected
// compute, from what its agent reports (missing values are 0).
func (a *API) statistics(c *fiber.Ctx) error {
	src := a.cfg.Agents
	if src == nil {
		return c.JSON([]fiber.Map{})
	}
	var list []compute.Compute
	for _, cp := range a.computes.List() {
		if cp.Connected {
			list = append(list, cp)
		}
	}
	// Asked all at once, each for a few seconds at most: a compute that
	// does not answer is left out (GNS3 logs it and does the same).
	ctx, cancel := context.WithTimeout(c.UserContext(), statisticsTimeout)
	defer cancel()
	got := make([]*compute.Statistics, len(list))
	var wg sync.WaitGroup
	for i, cp := range list {
		wg.Go(func() {
			st, err := src.Statistics(ctx, cp.ID)
			if err != nil {
				a.log.Warn("statistics: compute left out", "compute", cp.ID, "err", err)
				return
			}
			got[i] = &st
		})
	}
	wg.Wait()
	out := []fiber.Map{}
	for i, cp := range list {
		if got[i] != nil {
			out = append(out, fiber.Map{"compute_id": cp.ID, "compute_name": cp.Name, "statistics": got[i]})
		}
	}
	return c.JSON(out)
}

// statisticsTimeout bounds each compute's answer to GET /v2/statistics.
const statisticsTimeout = 5 * time.Second

// loadProject is GNS3's local-mode "open a .gns3 by path": labtap is never
// a GUI's own local server (GNS3 answers 403 with an empty body).
func (a *API) loadProject(c *fiber.Ctx) error {
	return &project.Error{Kind: project.ErrForbidden, Msg: "Loading a project by path is only possible on a local server"}
}
