package node

import (
	"path/filepath"
	"syscall"

	"github.com/labtap/labtap/internal/sandbox"
)

// sandboxSpec is what QEMU and its helpers (swtpm, cpulimit) may reach:
// they write only the node's folder and the private runtime folder of its
// sockets, and read the images folder and the images its properties name
// (an absolute path names one anywhere: the agent is local). Backing files,
// options and firmware paths that lead elsewhere find nothing there.
func (s qemuSetup) sandboxSpec(accel string) sandbox.Spec {
	readable := []string{s.cfg.ImagesDir}
	pr := s.cfg.Props
	for _, name := range []string{pr.HDA, pr.HDB, pr.HDC, pr.HDD, pr.CDROM, pr.BIOS, pr.Initrd, pr.Kernel} {
		if filepath.IsAbs(name) {
			readable = append(readable, name)
		}
	}
	var devices []string
	if accel == "kvm" {
		devices = append(devices, "/dev/kvm")
	}
	return sandbox.Spec{
		Dir:       s.cfg.Dir,
		Writable:  []string{s.cfg.RuntimeDir},
		Readable:  readable,
		Devices:   devices,
		Pdeathsig: syscall.SIGKILL,
	}
}
