package project

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// TypeQemu is GNS3's node type of QEMU virtual machines.
const TypeQemu = "qemu"

// qemuKind is the qemu entry of kinds.
var qemuKind = &kind{
	Type:             TypeQemu,
	ports:            adapterPorts,
	adapters:         qemuAdapters,
	suspendable:      true,
	templateDefaults: qemuTemplateDefaults,
	defaults:         qemuDefaults,
	check:            qemuCheck,
}

// qemuTemplateDefaults are GNS3 2.2's defaults of a new QEMU template.
func qemuTemplateDefaults() map[string]any {
	t := map[string]any{
		"qemu_path": "", "usage": "", "platform": "", "linked_clone": true, "ram": 256, "cpus": 1,
		"adapters": 1, "adapter_type": "e1000", "mac_address": "", "first_port_name": "",
		"port_name_format": "Ethernet{0}", "port_segment_size": 0, "console_type": "telnet",
		"console_auto_start": false, "boot_priority": "c", "cdrom_image": "", "initrd": "",
		"kernel_image": "", "bios_image": "", "kernel_command_line": "", "legacy_networking": false,
		"replicate_network_connection_state": true, "tpm": false, "uefi": false,
		"create_config_disk": false, "on_close": "power_off", "cpu_throttling": 0,
		"process_priority": "normal", "options": "", "custom_adapters": []any{},
		"category": "guest", "default_name_format": "{name}-{0}", "symbol": ":/symbols/qemu_guest.svg",
	}
	for _, d := range []string{"hda", "hdb", "hdc", "hdd"} {
		t[d+"_disk_image"] = ""
		t[d+"_disk_interface"] = "none"
	}
	return t
}

// qemuNodeDefaults are the properties of a QEMU node that were not given
// (GNS3 2.2's); md5 sums are null until a file is set.
func qemuNodeDefaults() map[string]any {
	d := map[string]any{
		"adapter_type": "e1000", "adapters": 1, "bios_image": "", "boot_priority": "c",
		"cdrom_image": "", "cpu_throttling": 0, "cpus": 1, "create_config_disk": false,
		"initrd": "", "kernel_command_line": "", "kernel_image": "", "legacy_networking": false,
		"linked_clone": true, "on_close": "power_off", "options": "", "platform": "",
		"process_priority": "low", "qemu_path": "", "ram": 256, "replicate_network_connection_state": true,
		"tpm": false, "uefi": false, "usage": "",
	}
	for _, img := range qemuImages {
		d[img] = ""
		d[img+"_md5sum"] = nil
	}
	for _, disk := range []string{"hda", "hdb", "hdc", "hdd"} {
		d[disk+"_disk_interface"] = "none"
	}
	return d
}

// qemuImages are the properties naming image files.
var qemuImages = []string{"hda_disk_image", "hdb_disk_image", "hdc_disk_image", "hdd_disk_image", "cdrom_image", "bios_image", "initrd", "kernel_image"}

func qemuDefaults(props map[string]any) {
	for k, v := range qemuNodeDefaults() {
		if cur, given := props[k]; !given || cur == nil && v != nil {
			props[k] = v
		}
	}
}

var (
	qemuEnums = map[string][]string{
		"boot_priority":    {"c", "d", "n", "cn", "cd", "dn", "dc", "nc", "nd"},
		"on_close":         {"power_off", "shutdown_signal", "save_vm_state"},
		"process_priority": {"realtime", "very high", "high", "normal", "low", "very low"},
		"platform": {"", "aarch64", "alpha", "arm", "cris", "i386", "lm32", "m68k", "microblaze", "microblazeel",
			"mips", "mips64", "mips64el", "mipsel", "moxie", "or32", "ppc", "ppc64", "ppcemb", "s390x", "sh4",
			"sh4eb", "sparc", "sparc64", "tricore", "unicore32", "x86_64", "xtensa", "xtensaeb"},
	}
	qemuInterfaces = []string{"ide", "sata", "nvme", "scsi", "sd", "mtd", "floppy", "pflash", "virtio", "none"}
	qemuInts       = map[string][2]int{"ram": {1, 1 << 20}, "cpus": {1, 255}, "adapters": {0, 275}, "cpu_throttling": {0, 800}}
	qemuBools      = []string{"linked_clone", "legacy_networking", "replicate_network_connection_state", "tpm", "uefi", "create_config_disk"}
	// qemuStrings are free strings, bounded.
	qemuStrings = []string{"qemu_path", "adapter_type", "kernel_command_line", "options", "usage", "mac_address"}
	macRE       = regexp.MustCompile(`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`)
	// qemuReadOnly are computed members a client may send back unchanged.
	qemuReadOnly = []string{"save_vm_state", "hda_disk_image_md5sum", "hdb_disk_image_md5sum", "hdc_disk_image_md5sum",
		"hdd_disk_image_md5sum", "cdrom_image_md5sum", "bios_image_md5sum", "initrd_md5sum", "kernel_image_md5sum"}
)

// maxPropString bounds the strings of properties.
const maxPropString = 4096

// qemuCheck validates a QEMU node's properties: types, ranges, enums,
// image names that stay in the images folder; unknown members are
// refused (GNS3's schema has additionalProperties false).
func qemuCheck(n *Node) error {
	p := n.Properties
	known := maps.Clone(qemuNodeDefaults())
	known["mac_address"] = nil
	for k := range p {
		_, ok := known[k]
		if !ok && !contains(qemuReadOnly, k) {
			return errorf(ErrInvalid, "Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	for k, r := range qemuInts {
		if _, err := integer(p, k, r[0], r[1], false); err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
	}
	for _, k := range qemuBools {
		if v, ok := p[k]; ok {
			if _, isBool := v.(bool); !isBool {
				return errorf(ErrInvalid, "%s must be a boolean", k)
			}
		}
	}
	for _, k := range append(append([]string{}, qemuStrings...), qemuImages...) {
		v, ok := p[k]
		if !ok || v == nil {
			continue
		}
		s, isStr := v.(string)
		if !isStr || len(s) > maxPropString {
			return errorf(ErrInvalid, "%s must be a string of at most %d bytes", k, maxPropString)
		}
	}
	for k, vals := range qemuEnums {
		if s, _ := p[k].(string); !contains(vals, s) {
			return errorf(ErrInvalid, "%s must be one of %s", k, strings.Join(vals, ", "))
		}
	}
	for _, d := range []string{"hda", "hdb", "hdc", "hdd"} {
		if s, _ := p[d+"_disk_interface"].(string); !contains(qemuInterfaces, s) {
			return errorf(ErrInvalid, "%s_disk_interface must be one of %s", d, strings.Join(qemuInterfaces, ", "))
		}
	}
	for _, k := range qemuImages {
		s, _ := p[k].(string)
		if s != "" && !path.IsAbs(s) && (strings.HasPrefix(path.Clean(s), "..") || strings.ContainsRune(s, 0)) {
			return errorf(ErrInvalid, "%s %q leaves the images folder", k, s)
		}
	}
	if m, _ := p["mac_address"].(string); m != "" && !macRE.MatchString(m) {
		return errorf(ErrInvalid, "mac_address %q is not a MAC address", m)
	}
	if at, _ := p["adapter_type"].(string); at == "" || strings.ContainsAny(at, ", =") {
		return errorf(ErrInvalid, "adapter_type %q is not a NIC model", at)
	}
	if b, _ := p["legacy_networking"].(bool); b {
		return errorf(ErrConflict, "Qemu version 2.9.0 and later doesn't support legacy networking mode")
	}
	if c, _ := p["cdrom_image"].(string); c != "" {
		if h, _ := p["hdc_disk_image"].(string); h != "" {
			return errorf(ErrConflict, "You cannot use a disk image on hdc disk and a CDROM image at the same time")
		}
	}
	if u, _ := p["uefi"].(bool); u {
		if b, _ := p["bios_image"].(string); b != "" {
			return errorf(ErrConflict, "Cannot use a bios image and the UEFI boot mode at the same time")
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// customAdapter is one entry of a node's custom_adapters.
type customAdapter struct {
	AdapterNumber int    `json:"adapter_number"`
	PortName      string `json:"port_name"`
	AdapterType   string `json:"adapter_type"`
	MACAddress    string `json:"mac_address"`
}

// qemuAdapters names a QEMU node's adapters:
// port_name_format with {0} the interface number in the segment, {1} the
// segment, first_port_name for adapter 0, custom_adapters overriding name,
// type and MAC.
func qemuAdapters(n *Node) ([]Adapter, error) {
	count, err := integer(n.Properties, "adapters", 0, 275, false)
	if err != nil {
		return nil, errorf(ErrInvalid, "%v", err)
	}
	if _, given := n.Properties["adapters"]; !given {
		count = 1
	}
	typ, _ := n.Properties["adapter_type"].(string)
	if typ == "" {
		typ = "e1000"
	}
	custom := map[int]customAdapter{}
	for _, raw := range n.CustomAdapters {
		var c customAdapter
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, errorf(ErrInvalid, "custom_adapters: %v", err)
		}
		if c.MACAddress != "" && !macRE.MatchString(c.MACAddress) {
			return nil, errorf(ErrInvalid, "custom_adapters: mac_address %q is not a MAC address", c.MACAddress)
		}
		if strings.ContainsAny(c.AdapterType, ", =") {
			return nil, errorf(ErrInvalid, "custom_adapters: adapter_type %q is not a NIC model", c.AdapterType)
		}
		custom[c.AdapterNumber] = c
	}
	format := n.PortNameFormat
	if format == "" {
		format = DefaultPortNameFormat
	}
	out := make([]Adapter, count)
	iface, segment := 0, 0
	for i := range count {
		var name string
		if i == 0 && n.FirstPortName != nil && *n.FirstPortName != "" {
			name = *n.FirstPortName
		} else {
			if name, err = formatPortName(format, iface, segment, i); err != nil {
				return nil, err
			}
			iface++
			if n.PortSegmentSize > 0 && iface%n.PortSegmentSize == 0 {
				segment++
				iface = 0
			}
		}
		a := Adapter{Name: name, AdapterType: typ}
		if c, ok := custom[i]; ok {
			if c.PortName != "" {
				a.Name = c.PortName
			}
			if c.AdapterType != "" {
				a.AdapterType = c.AdapterType
			}
			a.MACAddress = strings.ToLower(c.MACAddress)
		}
		a.ShortName = a.Name
		if rest, ok := strings.CutPrefix(a.Name, "Ethernet"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				a.ShortName = "e" + rest
			}
		}
		out[i] = a
	}
	return out, nil
}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// formatPortName fills GNS3's port name placeholders: {0} interface, {1}
// segment, {adapter}, {port0}..{port8} (interface+i), {segment0}..
// {segment8} (segment+i). Anything else is a 409 as in GNS3.
func formatPortName(format string, iface, segment, adapter int) (string, error) {
	var bad string
	out := placeholderRE.ReplaceAllStringFunc(format, func(ph string) string {
		key := ph[1 : len(ph)-1]
		switch {
		case key == "0":
			return strconv.Itoa(iface)
		case key == "1":
			return strconv.Itoa(segment)
		case key == "adapter":
			return strconv.Itoa(adapter)
		case len(key) == 5 && strings.HasPrefix(key, "port") && key[4] >= '0' && key[4] <= '8':
			return strconv.Itoa(iface + int(key[4]-'0'))
		case len(key) == 8 && strings.HasPrefix(key, "segment") && key[7] >= '0' && key[7] <= '8':
			return strconv.Itoa(segment + int(key[7]-'0'))
		}
		bad = ph
		return ph
	})
	if bad != "" || strings.Count(out, "{") != strings.Count(out, "}") {
		return "", errorf(ErrConflict, "Invalid port name format %s: %s", format, fmt.Sprintf("unknown placeholder %s", bad))
	}
	return out, nil
}

// DiskResizer is a Computes that can grow a QEMU node's disks.
type DiskResizer interface {
	ResizeDisk(ctx context.Context, computeID, projectID, nodeID, drive string, extendMB int) error
}

// maxDiskExtendMB bounds one resize_disk: 2 TiB.
const maxDiskExtendMB = 2 << 20

// ResizeDisk grows a disk of a stopped QEMU node by extendMB (GNS3's
// resize_disk): the node's own disk on its compute, never the base image.
func (s *Nodes) ResizeDisk(ctx context.Context, projectID, nodeID, drive string, extendMB int) error {
	n, err := s.Get(projectID, nodeID)
	if err != nil {
		return err
	}
	if n.Type != TypeQemu {
		return errorf(ErrConflict, "%s nodes have no disks to resize", n.Type)
	}
	if !contains([]string{"hda", "hdb", "hdc", "hdd"}, drive) {
		return errorf(ErrInvalid, "drive_name must be hda, hdb, hdc or hdd")
	}
	if extendMB < 1 || extendMB > maxDiskExtendMB {
		return errorf(ErrInvalid, "extend must be from 1 to %d MB", maxDiskExtendMB)
	}
	if n.Status != Stopped {
		return errorf(ErrConflict, "Cannot resize %s while the VM is running", drive)
	}
	dr, ok := s.core.cfg.Computes.(DiskResizer)
	if !ok {
		return errorf(ErrConflict, "This controller cannot resize disks")
	}
	return dr.ResizeDisk(ctx, n.ComputeID, projectID, nodeID, drive, extendMB)
}
