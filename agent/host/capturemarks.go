package host

import (
	"os"
	"strings"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/captures"
)

// Captures made whole again after the agent itself died.

// Capture files are marked while they are written: "<name>.writing" holds
// nothing and is removed when the capture ends cleanly. A marker found when
// a project opens means the agent died while writing: the file is cut back
// to its last whole record, so every reader sees a valid capture.
const writingSuffix = ".writing"

// markWriting marks a capture file as being written, durably (dir is
// root's folder, opened, for its sync): the capture writes no record
// before it returns (captures.RingHooks.Created). A mark that cannot be
// made is skipped, as before: a crash may then leave the file's last
// record torn, unrepaired.
func (o *Captures) markWriting(root *os.Root, dir *os.File, name string) {
	if o.hooks.marking != nil {
		o.hooks.marking(name)
	}
	f, err := root.Create(name + writingSuffix)
	if err != nil {
		return
	}
	f.Close()
	_ = dir.Sync()
}

// unmarkWriting removes the mark of a capture that ended cleanly.
func unmarkWriting(root *os.Root, name string) {
	_ = root.Remove(name + writingSuffix)
}

// repairCaptures repairs the captures a dead agent left marked in the
// captures folder of a project being opened. It holds only the project's
// nameMu, which nothing else waits for until the project is opened.
func (o *Captures) repairCaptures(p *project) {
	p.caps.nameMu.Lock()
	defer p.caps.nameMu.Unlock()
	root, err := p.caps.rootLocked()
	if err != nil {
		o.log.Error("captures not repaired: their folder cannot be opened or made durable", "err", err)
		return
	}
	entries, err := os.ReadDir(root.Name())
	if err != nil {
		o.log.Error("captures not repaired: their folder cannot be read", "err", err)
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), writingSuffix)
		if !ok || !capspec.ValidFileName(name) {
			continue
		}
		if o.hooks.repairing != nil {
			o.hooks.repairing()
		}
		cut, err := captures.Repair(root, name)
		if err != nil {
			o.log.Warn("repair a capture left by a crash", "project", p.id, "file", name, "err", err)
			continue
		}
		unmarkWriting(root, name)
		o.log.Info("capture left by a crash repaired", "project", p.id, "file", name, "bytes_cut", cut)
	}
}
