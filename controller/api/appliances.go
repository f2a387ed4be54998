package api

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/symbols"
)

// The appliance catalogue of GET /v2/appliances: GNS3 appliance files
// (registry version 4, the format GNS3 2.2's "New template" wizard reads)
// for what labtap's own scripts build on a compute, so the wizard installs
// templates whose nodes start:
//
//   - labtap/frr:bookworm and labtap/host:bookworm, docker images made by
//     scripts/node-images;
//   - the tiny QEMU guest of scripts/tiny-guest (vmlinuz, initrd.img).
//
// Nothing is fetched: update=yes answers the same list.

//go:embed appliances/*.gns3a
var applianceFS embed.FS

// applianceEmulators are the emulator members of an appliance, each the
// node type a compute must run for it to be listed.
var applianceEmulators = []string{"docker", "qemu", "iou", "dynamips"}

// applianceImageWait bounds how long a listing waits for a compute's QEMU
// image list (and its md5 sums).
const applianceImageWait = 5 * time.Second

// catalogueEntry is one appliance file, parsed.
type catalogueEntry struct {
	file     string
	emulator string         // its emulator member
	doc      map[string]any // the file's JSON object
}

// catalogue is the embedded catalogue, sorted by file name.
var catalogue = mustLoadCatalogue(applianceFS)

// mustLoadCatalogue parses the embedded appliance files; a malformed one
// is a build mistake the tests catch.
func mustLoadCatalogue(fsys fs.FS) []catalogueEntry {
	c, err := loadCatalogue(fsys)
	if err != nil {
		panic(err)
	}
	return c
}

func loadCatalogue(fsys fs.FS) ([]catalogueEntry, error) {
	files, err := fs.Glob(fsys, "appliances/*.gns3a")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	out := make([]catalogueEntry, 0, len(files))
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("appliance %s: %w", f, err)
		}
		e := catalogueEntry{file: path.Base(f), doc: doc}
		for _, em := range applianceEmulators {
			if _, ok := doc[em]; ok {
				if e.emulator != "" {
					return nil, fmt.Errorf("appliance %s: both %s and %s", f, e.emulator, em)
				}
				e.emulator = em
			}
		}
		if e.emulator == "" {
			return nil, fmt.Errorf("appliance %s: no emulator member", f)
		}
		out = append(out, e)
	}
	return out, nil
}

// listAppliances answers GET /v2/appliances as GNS3 2.2 does: each
// appliance's object plus builtin: true, its symbol the theme's default
// for its category (symbol_theme; an unknown theme is Classic, where GNS3
// answered 404). Only the appliances some connected compute can run are
// listed: their emulator is one of its node types; a QEMU appliance also
// needs its image files on such a compute (local first), whose md5 sums
// and sizes it is given, since the wizard finds images by md5 sum.
func (a *API) listAppliances(c *fiber.Ctx) error {
	themes := symbols.DefaultSymbols()
	roles, ok := themes[c.Query("symbol_theme")]
	if !ok {
		roles = themes["Classic"]
	}
	runs := map[string][]string{} // node type → connected computes, local first
	for _, cp := range a.computes.List() {
		if !cp.Connected {
			continue
		}
		for _, t := range cp.NodeTypes {
			if cp.ID == localCompute {
				runs[t] = append([]string{cp.ID}, runs[t]...)
			} else {
				runs[t] = append(runs[t], cp.ID)
			}
		}
	}
	out := []map[string]any{}
	for _, e := range catalogue {
		if len(runs[e.emulator]) == 0 {
			continue
		}
		doc := cloneJSON(e.doc)
		doc["builtin"] = true
		if s, _ := doc["symbol"].(string); s == "" || strings.HasPrefix(s, symbols.BuiltinPrefix) {
			doc["symbol"] = roles[symbolRole(doc, e.emulator)]
		}
		if images, _ := doc["images"].([]any); len(images) > 0 {
			if !a.sumImages(c.UserContext(), e.emulator, runs[e.emulator], images) {
				continue
			}
		}
		out = append(out, doc)
	}
	return c.JSON(out)
}

// symbolRole is the default_symbols role GNS3 draws an appliance's
// category with.
func symbolRole(doc map[string]any, emulator string) string {
	switch cat, _ := doc["category"].(string); cat {
	case "guest":
		if emulator == "docker" {
			return "docker_guest"
		}
		return "qemu_guest"
	default:
		return cat
	}
}

// sumImages gives each of an appliance's images the md5sum and filesize
// of the file of that name on the first of computes that holds them all:
// false when none does (or the compute could not say in time).
func (a *API) sumImages(ctx context.Context, emulator string, computes []string, images []any) bool {
	q := a.cfg.Agents
	if q == nil {
		return false
	}
	for _, id := range computes {
		wait, cancel := context.WithTimeout(ctx, applianceImageWait)
		list, err := q.Images(wait, id, emulator)
		cancel()
		if err != nil {
			a.log.Debug("appliances: images of compute", "compute", id, "err", err)
			continue
		}
		found := 0
		for _, im := range images {
			m, _ := im.(map[string]any)
			name, _ := m["filename"].(string)
			for _, f := range list {
				if f.Path == name && f.MD5Sum != "" {
					m["md5sum"], m["filesize"] = f.MD5Sum, f.FileSize
					found++
					break
				}
			}
		}
		if found == len(images) {
			return true
		}
	}
	return false
}

// cloneJSON copies a decoded JSON value deeply.
func cloneJSON(m map[string]any) map[string]any {
	out := maps.Clone(m)
	for k, v := range out {
		switch x := v.(type) {
		case map[string]any:
			out[k] = cloneJSON(x)
		case []any:
			l := slices.Clone(x)
			for i, y := range l {
				if ym, ok := y.(map[string]any); ok {
					l[i] = cloneJSON(ym)
				}
			}
			out[k] = l
		}
	}
	return out
}
