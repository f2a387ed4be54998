package node

import (
	"errors"
	"fmt"
	"path/filepath"
)

// A QEMU node's UEFI boot (the uefi property): OVMF's firmware.

// ovmfFiles are the OVMF firmware pairs searched, code and variables.
var ovmfFiles = [][2]string{{"OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"}, {"OVMF_CODE.fd", "OVMF_VARS.fd"}}

// ovmfDirs are where OVMF is looked for after the images folder.
var ovmfDirs = []string{"/usr/share/OVMF", "/usr/share/edk2/ovmf", "/usr/share/qemu"}

// uefiArgs gives the UEFI firmware as GNS3 does: OVMF's code read-only
// (looked for in imagesDir, then ovmfDirs) and a copy of its variables in
// the node's folder dir (made once, kept across starts), both as pflash.
func uefiArgs(imagesDir, dir string) ([]string, error) {
	dirs := append([]string{imagesDir}, ovmfDirs...)
	for _, pair := range ovmfFiles {
		for _, d := range dirs {
			code, vars := filepath.Join(d, pair[0]), filepath.Join(d, pair[1])
			if !isFile(code) || !isFile(vars) {
				continue
			}
			nodeVars := filepath.Join(dir, "OVMF_VARS.fd")
			if !isFile(nodeVars) {
				if err := copyFile(vars, nodeVars); err != nil {
					return nil, fmt.Errorf("Cannot copy the UEFI variables %s: %v", vars, err)
				}
			}
			return []string{
				"-drive", "if=pflash,format=raw,readonly=on,file=" + commas(code),
				"-drive", "if=pflash,format=raw,file=" + commas(nodeVars),
			}, nil
		}
	}
	return nil, errors.New("The UEFI boot mode needs OVMF (OVMF_CODE_4M.fd and OVMF_VARS_4M.fd): install the ovmf package or put them in the images folder")
}
