// Package symbols is the controller's icon library: built-in SVGs embedded
// in the binary, the user's uploaded symbols in the data directory, ids,
// themes, the GNS3 fallback chain, and image dimensions.
//
// Ids are GNS3's: a built-in symbol is
// ":/symbols/<theme dirs>/<file>", e.g. ":/symbols/classic/router.svg"; an
// uploaded one is its path inside the user directory, e.g. "linux.svg".
// Ids reach this package already percent-decoded.
package symbols

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labtap/labtap/internal/atomicfile"
)

//go:generate go run ./internal/gen -out builtin

// builtinFiles holds the built-in symbols, drawn by package
// internal/icons. They are committed, so a build needs no go generate.
//
//go:embed builtin
var builtinFiles embed.FS

const (
	// BuiltinPrefix starts the id of every built-in symbol.
	BuiltinPrefix = ":/symbols/"
	// CustomTheme is the theme of every uploaded symbol.
	CustomTheme = "Custom symbols"
	// MaxSize is the largest symbol Save accepts, in bytes.
	MaxSize = 10 << 20
	// DefaultWidth and DefaultHeight are the size of the last resort of
	// the fallback chain, the classic computer: what GNS3 gives nodes.
	DefaultWidth, DefaultHeight = 65, 59

	// classicPrefix is where the fallback chain looks for a base name.
	classicPrefix = BuiltinPrefix + "classic/"
	// fallbackID is the last resort of the fallback chain.
	fallbackID = classicPrefix + "computer.svg"
	// builtinRoot is the directory of builtinFiles that ids map into.
	builtinRoot = "builtin"
)

// Errors of Save and Dimensions; match them with errors.Is.
var (
	// ErrTooLarge: the upload is over MaxSize bytes.
	ErrTooLarge = errors.New("symbol too large")
	// ErrNotImage: the upload is not an SVG, PNG, JPEG or GIF image.
	ErrNotImage = errors.New("not an SVG, PNG, JPEG or GIF image")
	// ErrInvalidName: the id's base name cannot name a file (empty, ".",
	// "..", or hidden).
	ErrInvalidName = errors.New("invalid symbol name")
	// ErrNoDirectory: the library has no user directory to save into.
	ErrNoDirectory = errors.New("no symbols directory")
	// ErrInvalidImage: the symbol's header is not a valid image, so it has
	// no size.
	ErrInvalidImage = errors.New("not a valid image")
)

// Symbol is one entry of the symbol list.
type Symbol struct {
	// ID is what clients put in a node's "symbol".
	ID string
	// Filename is the file name alone.
	Filename string
	// Builtin tells an embedded symbol from an uploaded one.
	Builtin bool
	// Theme is "Classic", "Affinity-circle-blue", ... or CustomTheme.
	Theme string
}

// File is an opened symbol. The caller reads it and closes it.
type File struct {
	io.ReadCloser
	// ID is the symbol served: the id asked for, or where the fallback
	// chain led.
	ID string
	// Name is the file name, whose extension gives the content type.
	Name string
	// Size is the length in bytes.
	Size int64
	// ModTime is when an uploaded file last changed; zero for built-ins.
	ModTime time.Time

	src source
}

// Library serves the built-in symbols and the user's. It is safe for
// concurrent use.
type Library struct {
	dir     string // user symbols; "" for none
	log     *slog.Logger
	builtin []Symbol          // sorted by theme, then id
	paths   map[string]string // built-in id → path in builtinFiles

	mu    sync.Mutex // guards sizes
	sizes map[source]size
}

// source is where a symbol's bytes live.
type source struct {
	builtin bool
	path    string // in builtinFiles, or slash-separated inside dir
}

// size is a cached width and height, valid while the file's modification
// time and length are those recorded.
type size struct {
	w, h   int
	mod    time.Time
	length int64
}

// New returns a library serving the built-in symbols and those in dir (the
// controller uses <data-dir>/symbols), which Save creates when it first
// needs it. An empty dir serves the built-in symbols only. A nil log
// discards.
func New(dir string, log *slog.Logger) *Library {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Library{dir: dir, log: log, paths: make(map[string]string), sizes: make(map[source]size)}
	// The embedded tree cannot fail to walk; a failure is a build defect.
	err := fs.WalkDir(builtinFiles, builtinRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, builtinRoot+"/")
		dir, name := path.Split(rel)
		if dir == "" || strings.HasPrefix(name, ".") {
			return nil // GNS3 lists neither root files nor hidden ones
		}
		id := BuiltinPrefix + rel
		l.paths[id] = p
		l.builtin = append(l.builtin, Symbol{ID: id, Filename: name, Builtin: true, Theme: theme(dir)})
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("symbols: embedded files: %v", err))
	}
	sortSymbols(l.builtin)
	return l
}

// theme names a built-in directory as GNS3 does: "affinity/circle/blue/"
// becomes "Affinity-circle-blue".
func theme(dir string) string {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSuffix(dir, "/"), "/", "-"))
	return strings.ToUpper(t[:1]) + t[1:]
}

func sortSymbols(s []Symbol) {
	slices.SortFunc(s, func(a, b Symbol) int {
		if c := strings.Compare(a.Theme, b.Theme); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// List returns every symbol, sorted by theme, then id: the built-in ones
// and every file in the user directory (at any depth) whose path has no
// part starting with ".". The caller owns the slice.
func (l *Library) List() ([]Symbol, error) {
	out := slices.Clone(l.builtin)
	custom, err := l.listCustom()
	if err != nil {
		return nil, err
	}
	out = append(out, custom...)
	sortSymbols(out)
	return out, nil
}

func (l *Library) listCustom() ([]Symbol, error) {
	root, err := l.openRoot()
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoDirectory) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var out []Symbol
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil && p != "." {
			// One unreadable folder must not hide every other symbol
			// (GNS3's walk ignores such errors too).
			l.log.Warn("symbols folder unreadable", "path", p, "err", err)
			return nil
		}
		if err != nil || p == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, Symbol{ID: p, Filename: d.Name(), Theme: CustomTheme})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list symbols in %s: %w", l.dir, err)
	}
	return out, nil
}

func (l *Library) openRoot() (*os.Root, error) {
	if l.dir == "" {
		return nil, ErrNoDirectory
	}
	return os.OpenRoot(l.dir)
}

// Open opens the symbol id, following GNS3's fallback chain when id names no symbol: the classic symbol of the same base name
// (so ":/symbols/computer.svg", the default of every node, is the classic
// computer), then the classic computer. Open fails only if even that
// cannot be read.
func (l *Library) Open(id string) (*File, error) {
	chain := []string{id}
	if base := baseName(id); base != "" {
		chain = append(chain, classicPrefix+base)
	}
	chain = append(chain, fallbackID)
	for i, cand := range chain {
		if i > 0 && cand == chain[i-1] {
			continue
		}
		f, err := l.openExact(cand)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				l.log.Warn("symbol unreadable", "symbol", cand, "err", err)
			}
			continue
		}
		switch {
		case i == 0:
		case cand == fallbackID && baseName(id) != baseName(fallbackID):
			// An id that names nothing: GNS3 answers with the default
			// picture rather than 404 and clients rely on it, so only log.
			l.log.Warn("unknown symbol, serving the default", "symbol", id, "served", cand)
		default:
			// Expected for GNS3's short ids, ":/symbols/computer.svg" first.
			l.log.Debug("symbol resolved by base name", "symbol", id, "served", cand)
		}
		return f, nil
	}
	return nil, fmt.Errorf("open symbol %s: %w", id, fs.ErrNotExist)
}

// baseName is the last element of id, "/" and "\" both separating (ids
// from Windows clients may carry either).
func baseName(id string) string {
	return id[strings.LastIndexAny(id, `/\`)+1:]
}

// openExact opens id without any fallback.
func (l *Library) openExact(id string) (*File, error) {
	if p, ok := l.paths[id]; ok {
		f, err := builtinFiles.Open(p)
		if err != nil {
			return nil, err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return &File{ReadCloser: f, ID: id, Name: info.Name(), Size: info.Size(), src: source{builtin: true, path: p}}, nil
	}
	if !customPath(id) {
		return nil, fs.ErrNotExist
	}
	root, err := l.openRoot()
	if errors.Is(err, ErrNoDirectory) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	defer root.Close() // an open file outlives its root
	// The root refuses any path, symbolic links included, that leads out
	// of the directory; customPath already refused "..", absolute paths
	// and backslashes.
	f, err := root.Open(id)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{ReadCloser: f, ID: id, Name: info.Name(), Size: info.Size(), ModTime: info.ModTime(), src: source{path: id}}, nil
}

// customPath reports whether id can name a file in the user directory: a
// relative, clean, slash-separated path with no hidden part and no
// backslash (a separator on Windows, a trap everywhere).
func customPath(id string) bool {
	if !fs.ValidPath(id) || id == "." || strings.ContainsAny(id, "\\\x00") {
		return false
	}
	for part := range strings.SplitSeq(id, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// Save stores an uploaded symbol read from r under the base name of id in
// the user directory (GNS3 flattens ids: "a/b/c.svg" and "../../c.svg"
// both become "c.svg"), replacing any file of that name. The content must
// be an SVG, PNG, JPEG or GIF image of at most MaxSize bytes. It is
// written to a hidden temporary file and renamed into place only once
// complete and checked, so a failed or refused upload leaves nothing
// behind and a reader never sees half a file.
func (l *Library) Save(id string, r io.Reader) error {
	name := baseName(id)
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsRune(name, 0) || len(name) > 255 {
		return fmt.Errorf("save symbol %q: %w", id, ErrInvalidName)
	}
	if l.dir == "" {
		return fmt.Errorf("save symbol %s: %w", name, ErrNoDirectory)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	defer root.Close()
	// Hidden while it is written: List skips names starting with ".".
	f, err := atomicfile.CreateIn(root, name, 0o644)
	if err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	defer f.Abort() // nothing once committed
	n, err := io.Copy(f, io.LimitReader(r, MaxSize+1))
	if err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	if n > MaxSize {
		return fmt.Errorf("save symbol %s: over %d bytes: %w", name, MaxSize, ErrTooLarge)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	format, _, _, err := decodeSize(f)
	if format == "" || (err != nil && format != formatSVG) {
		// An SVG whose size cannot be worked out is still a picture
		// clients can draw; a raster image with a broken header is not.
		return fmt.Errorf("save symbol %s: %w", name, ErrNotImage)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("save symbol %s: %w", name, err)
	}
	// GNS3 keeps serving the old size after an upload (its bug 17): forget
	// it, and every size, since unknown ids that fell back before may now
	// resolve to this file.
	l.mu.Lock()
	clear(l.sizes)
	l.mu.Unlock()
	return nil
}

// Dimensions returns the width and height of the symbol id, resolved as
// Open does, in pixels. A file of another format than
// SVG, PNG, JPEG or GIF measures 0×0; a header that cannot be read is
// ErrInvalidImage.
func (l *Library) Dimensions(id string) (width, height int, err error) {
	f, err := l.Open(id)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	l.mu.Lock()
	s, ok := l.sizes[f.src]
	l.mu.Unlock()
	if ok && s.mod.Equal(f.ModTime) && s.length == f.Size {
		return s.w, s.h, nil
	}
	_, w, h, err := decodeSize(f)
	if err != nil {
		return 0, 0, fmt.Errorf("symbol %s: %w", f.ID, err)
	}
	l.mu.Lock()
	l.sizes[f.src] = size{w: w, h: h, mod: f.ModTime, length: f.Size}
	l.mu.Unlock()
	return w, h, nil
}

// Size returns the width and height a node drawn with the symbol id gets:
// its Dimensions, or DefaultWidth×DefaultHeight when those are unknown or
// zero. It suits project.Config.Symbols.
func (l *Library) Size(id string) (width, height int) {
	w, h, err := l.Dimensions(id)
	if err != nil || w <= 0 || h <= 0 {
		if err != nil {
			l.log.Warn("symbol has no size, using the default", "symbol", id, "err", err)
		}
		return DefaultWidth, DefaultHeight
	}
	return w, h
}
