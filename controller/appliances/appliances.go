// Package appliances is labtap's appliance catalogue, what
// GET /v2/appliances lists: GNS3 appliance files (registry version 4, the
// format GNS3 2.2's "New template" wizard reads) for what labtap's own
// scripts build on a compute, so the wizard installs templates whose nodes
// start:
//
//   - labtap/frr:bookworm and labtap/host:bookworm, docker images made by
//     scripts/node-images;
//   - the tiny QEMU guest of scripts/tiny-guest (vmlinuz, initrd.img).
//
// The files are embedded; nothing is fetched.
package appliances

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/symbols"
)

//go:embed files/*.gns3a
var files embed.FS

// emulators are the emulator members of an appliance, each the node type
// a compute must run for the appliance to be listed.
var emulators = []string{"docker", "qemu", "iou", "dynamips"}

// localCompute is listed first among the computes that could hold an
// appliance's images.
const localCompute = "local"

// DefaultImageWait bounds how long a listing waits for one compute's
// image list (and its md5 sums).
const DefaultImageWait = 5 * time.Second

// Config is what a Catalogue reads.
type Config struct {
	// Computes lists the computes, with the node types they last reported;
	// nil: none, so nothing is listed.
	Computes func() []compute.Compute
	// Images lists a compute's images of a node type; nil: appliances
	// with images are never listed.
	Images func(ctx context.Context, computeID, nodeType string) ([]compute.Image, error)
	// ImageWait bounds each Images call; zero is DefaultImageWait.
	ImageWait time.Duration
	Logger    *slog.Logger
}

// entry is one appliance file, parsed.
type entry struct {
	emulator string         // its emulator member
	doc      map[string]any // the file's JSON object; never changed
}

// Catalogue lists the embedded appliances. It is safe for concurrent use.
type Catalogue struct {
	cfg     Config
	log     *slog.Logger
	entries []entry // by file name
}

// New parses the embedded appliance files.
func New(cfg Config) (*Catalogue, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ImageWait <= 0 {
		cfg.ImageWait = DefaultImageWait
	}
	entries, err := load(files)
	if err != nil {
		return nil, err
	}
	return &Catalogue{cfg: cfg, log: cfg.Logger, entries: entries}, nil
}

func load(fsys fs.FS) ([]entry, error) {
	names, err := fs.Glob(fsys, "files/*.gns3a")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]entry, 0, len(names))
	for _, f := range names {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("appliance %s: %w", path.Base(f), err)
		}
		e := entry{doc: doc}
		for _, em := range emulators {
			if _, ok := doc[em]; ok {
				if e.emulator != "" {
					return nil, fmt.Errorf("appliance %s: both %s and %s", path.Base(f), e.emulator, em)
				}
				e.emulator = em
			}
		}
		if e.emulator == "" {
			return nil, fmt.Errorf("appliance %s: no emulator member", path.Base(f))
		}
		out = append(out, e)
	}
	return out, nil
}

// List returns the appliances as GNS3 2.2 lists them: each appliance's
// object plus builtin: true, its symbol the default of theme for its
// category (an unknown theme is Classic, where GNS3 answered 404). Only
// the appliances some connected compute can run are listed: their
// emulator is one of its node types; one with images also needs its files
// on such a compute (local first), whose md5 sums and sizes it is given,
// since the wizard finds image files by md5 sum. The caller owns the
// result.
func (c *Catalogue) List(ctx context.Context, theme string) []map[string]any {
	themes := symbols.DefaultSymbols()
	roles, ok := themes[theme]
	if !ok {
		roles = themes["Classic"]
	}
	runs := map[string][]string{} // node type → connected computes, local first
	var computes []compute.Compute
	if c.cfg.Computes != nil {
		computes = c.cfg.Computes()
	}
	for _, cp := range computes {
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
	for _, e := range c.entries {
		if len(runs[e.emulator]) == 0 {
			continue
		}
		doc := cloneJSON(e.doc)
		doc["builtin"] = true
		if s, _ := doc["symbol"].(string); s == "" || strings.HasPrefix(s, symbols.BuiltinPrefix) {
			doc["symbol"] = roles[symbolRole(doc, e.emulator)]
		}
		if images, _ := doc["images"].([]any); len(images) > 0 && !c.sumImages(ctx, e.emulator, runs[e.emulator], images) {
			continue
		}
		out = append(out, doc)
	}
	return out
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
// false when none does (or none could say in time).
func (c *Catalogue) sumImages(ctx context.Context, emulator string, computes []string, images []any) bool {
	if c.cfg.Images == nil {
		return false
	}
	for _, id := range computes {
		wait, cancel := context.WithTimeout(ctx, c.cfg.ImageWait)
		list, err := c.cfg.Images(wait, id, emulator)
		cancel()
		if err != nil {
			c.log.Debug("appliance images: compute did not list them", "compute", id, "err", err)
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

// cloneJSON copies a decoded JSON object deeply.
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
