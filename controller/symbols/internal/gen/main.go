// The gen command writes labtap's built-in symbols (package icons) into a
// directory, replacing what was there. Package symbols runs it through
// go generate and embeds the result.
//
// Usage:
//
//	gen -out DIR [-sheet FILE.svg [-only PREFIX] [-scale N]]
//
// -sheet also writes the icons on one page, for review: rasterise it
// (rsvg-convert FILE.svg -o FILE.png) and look. -only keeps the icons whose
// path starts with PREFIX (e.g. "classic/"), -scale enlarges them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/labtap/labtap/controller/symbols/internal/icons"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the symbols into (required)")
	sheet := fs.String("sheet", "", "also write a review sheet of the icons to this SVG file")
	only := fs.String("only", "", "put on the sheet only the icons whose path starts with this")
	scale := fs.Float64("scale", 1, "draw the icons on the sheet at this scale")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	files := icons.Generate()
	if err := write(*out, files); err != nil {
		return err
	}
	if *sheet != "" {
		var names []string
		for _, n := range icons.Names() {
			if strings.HasPrefix(n, *only) {
				names = append(names, n)
			}
		}
		return os.WriteFile(*sheet, icons.Sheet(files, names, 8, 96**scale, *scale), 0o644)
	}
	return nil
}

// write makes dir hold exactly files: stale SVGs (an icon renamed or
// dropped) are removed, so the embedded set is always what icons draws.
func write(dir string, files map[string][]byte) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".svg") {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if _, keep := files[filepath.ToSlash(rel)]; !keep {
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
