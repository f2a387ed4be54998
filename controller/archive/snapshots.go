package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/labtap/labtap/internal/atomicfile"
)

// Snapshot files live in a project's snapshots/ directory:
// <snapshot_id>.gns3snapshot (an uncompressed export, snapshots included
// never) and snapshots.conf, a JSON array of the snapshot objects, as GNS3
// 2.2 keeps them. GNS3 names the file after the snapshot's name, which can
// leave the directory (bug 3.1.6); labtap names it after the id, and reads
// a GNS3-made file name only when it stays in snapshots/.

// SnapshotsDir is the snapshots directory's name in a project directory.
const SnapshotsDir = "snapshots"

// SnapshotsConf is the snapshot list's file name in SnapshotsDir.
const SnapshotsConf = "snapshots.conf"

// SnapshotExt ends a snapshot file's name.
const SnapshotExt = ".gns3snapshot"

// Snapshot is a snapshot object, as GNS3 answers and stores it.
type Snapshot struct {
	CreatedAt   int64  `json:"created_at"`
	Description string `json:"description"`
	Filename    string `json:"filename"`
	Name        string `json:"name"`
	ProjectID   string `json:"project_id"`
	SnapshotID  string `json:"snapshot_id"`
}

// Describe is GNS3's generated description of a snapshot.
func Describe(name string, at time.Time) string {
	at = at.UTC()
	return "Snapshot '" + name + "' taken on " + at.Format("2006-01-02") + " at " + at.Format("15:04:05")
}

// ErrSnapshotsConf reports a snapshots.conf that cannot be read.
var ErrSnapshotsConf = errors.New("Could not read snapshot configuration file")

// ReadSnapshots lists the snapshots of the project in dir whose files are
// there. Entries whose file name would leave snapshots/ or whose file is
// missing are left out.
func ReadSnapshots(dir string) ([]Snapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, SnapshotsDir, SnapshotsConf))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ErrSnapshotsConf
	}
	var list []Snapshot
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, ErrSnapshotsConf
		}
	}
	out := list[:0]
	for _, s := range list {
		if SnapshotPath(dir, s) == "" || s.SnapshotID == "" {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// SnapshotPath is where a snapshot's file is, "" if its file name would
// leave snapshots/ or names no regular file.
func SnapshotPath(dir string, s Snapshot) string {
	name := s.Filename
	if name == "" || name != filepath.Base(name) || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." {
		return ""
	}
	p := filepath.Join(dir, SnapshotsDir, name)
	info, err := os.Lstat(p)
	if err != nil || !info.Mode().IsRegular() {
		return ""
	}
	return p
}

// WriteSnapshots writes snapshots.conf atomically.
func WriteSnapshots(dir string, list []Snapshot) error {
	if list == nil {
		list = []Snapshot{}
	}
	data, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, SnapshotsDir, SnapshotsConf), data, 0o644)
}
