package node

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/shlex"
)

// A QEMU node's options property comes from API users, and QEMU runs as
// the agent's user: any option or member that names a host file, socket,
// device or monitor reaches the host. So options are parsed into an
// allowlist: each option is known, each member of its value is a known
// key, and each value is checked against its kind (number, size, on/off,
// enumeration, identifier). A value can never be a path: no kind allows
// "/". What is not listed here is refused; to allow more, add the option
// or the key with the narrowest kind that fits it.

// qemuOpt is one allowed option: whether it takes an argument, and how
// the argument is checked. check returns the argument to pass on ("" with
// drop to leave the option out).
type qemuOpt struct {
	arg   bool
	check func(v string) (out string, drop bool, err error)
}

// Kinds of values. None of them allows "/", "," or a quote.
var (
	reIdent  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)
	reNumber = regexp.MustCompile(`^(0|[1-9][0-9]{0,9}|0x[0-9a-fA-F]{1,8})$`)
	reSize   = regexp.MustCompile(`^[0-9]{1,7}[kKmMgGtT]?[bB]?$`)
	reMAC    = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)
	rePCI    = regexp.MustCompile(`^(0x)?[0-9a-fA-F]{1,2}(\.[0-7])?$`)
	reBoot   = regexp.MustCompile(`^[a-p]{1,16}$`)
	reDate   = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2})?$`)
	reUUID   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	reKeymap = regexp.MustCompile(`^[a-z]{2}(-[a-z]{2,3})?$`)
	reText   = regexp.MustCompile(`^[A-Za-z0-9 _.:+-]{1,64}$`)
	reCPU    = regexp.MustCompile(`^[+-]?[A-Za-z0-9][A-Za-z0-9_.-]{0,63}(=[A-Za-z0-9_.-]{1,64})?$`)
)

// valueKind checks one value; it returns a description of what was
// wanted when v is not one.
type valueKind func(v string) (ok bool, want string)

func kindRe(re *regexp.Regexp, want string) valueKind {
	return func(v string) (bool, string) { return re.MatchString(v), want }
}

func kindEnum(values ...string) valueKind {
	return func(v string) (bool, string) { return slices.Contains(values, v), strings.Join(values, ", ") }
}

// kindCount is a number from 0 to max.
func kindCount(max int) valueKind {
	return func(v string) (bool, string) {
		n, err := strconv.ParseUint(v, 0, 32)
		return err == nil && int(n) <= max && reNumber.MatchString(v), fmt.Sprintf("a number up to %d", max)
	}
}

// kindSize is a memory size up to 4 TiB.
func kindSize(v string) (bool, string) {
	const want = "a size such as 512M or 2G, at most 4T"
	if !reSize.MatchString(v) {
		return false, want
	}
	num := strings.TrimRight(v, "kKmMgGtTbB")
	n, _ := strconv.ParseUint(num, 10, 64)
	shift := map[byte]uint{'k': 10, 'm': 20, 'g': 30, 't': 40}
	unit := uint(20) // a bare number is MiB
	if rest := strings.ToLower(strings.TrimPrefix(v, num)); rest != "" && rest != "b" {
		unit = shift[rest[0]]
	} else if rest == "b" {
		unit = 0
	}
	return n<<unit <= 4<<40 && n < 1<<32, want
}

var (
	onOff     = kindEnum("on", "off", "true", "false", "yes", "no", "0", "1")
	onOffAuto = kindEnum("on", "off", "auto", "true", "false", "yes", "no", "0", "1")
	ident     = kindRe(reIdent, "a name of letters, digits, _ . + -")
	text      = kindRe(reText, "up to 64 letters, digits, spaces and _ . : + -")
	empty     = func(v string) (bool, string) { return v == "", "empty (no option ROM)" }
)

// qemuDevices are the -device drivers options may add: NICs, USB and
// input devices, displays, buses and bridges, watchdogs, balloons. None
// reads a host file, opens a host device or a backend by itself.
var qemuDevices = []string{
	"e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "igb", "rtl8139", "pcnet", "ne2k_pci", "ne2k_isa",
	"i82550", "i82551", "i82557a", "i82557b", "i82557c", "i82558a", "i82558b", "i82559a", "i82559b", "i82559c", "i82559er",
	"i82562", "i82801", "tulip", "vmxnet3", "virtio-net-pci", "virtio-net-pci-transitional", "virtio-net-pci-non-transitional",
	"virtio-net-device", "usb-tablet", "usb-mouse", "usb-kbd", "usb-ehci", "ich9-usb-ehci1", "ich9-usb-uhci1", "nec-usb-xhci",
	"qemu-xhci", "piix3-usb-uhci", "piix4-usb-uhci", "pci-ohci", "virtio-keyboard-pci", "virtio-mouse-pci", "virtio-tablet-pci",
	"VGA", "cirrus-vga", "vmware-svga", "bochs-display", "virtio-vga", "virtio-gpu-pci", "secondary-vga", "ramfb", "qxl-vga",
	"virtio-balloon-pci", "virtio-balloon", "i6300esb", "ib700", "pvpanic", "intel-iommu", "ahci", "virtio-scsi-pci",
	"lsi53c895a", "megasas", "pci-bridge", "pcie-root-port", "ioh3420", "x3130-upstream", "xio3130-downstream",
	"i82801b11-bridge", "pcie-pci-bridge", "virtio-rng-pci", "virtio-serial-pci", "isa-serial", "pci-serial", "sga",
}

// qemuGlobalDrivers are what -global may set besides the devices above:
// the chipset's power and timer devices.
var qemuGlobalDrivers = []string{"PIIX4_PM", "ICH9-LPC", "kvm-pit", "isa-pit", "mc146818rtc", "hpet", "isa-fdc", "fw_cfg"}

// qemuDeviceProps are the -device (and -global) properties options may
// set, by kind. romfile may only be empty (no option ROM); netdev,
// chardev, drive and every file or host name are absent.
var qemuDeviceProps = map[string]valueKind{
	"mac": kindRe(reMAC, "a MAC address"), "id": ident, "bus": ident, "addr": kindRe(rePCI, "a PCI slot such as 0x5 or 05.0"),
	"multifunction": onOff, "romfile": empty, "rombar": kindCount(1), "bootindex": kindCount(255),
	"speed": kindCount(1000000), "duplex": kindEnum("half", "full"), "mq": onOff, "vectors": kindCount(1024), "queues": kindCount(1024),
	"disable-legacy": onOffAuto, "disable-modern": onOff, "iommu_platform": onOff, "ats": onOff, "host_mtu": kindCount(65535),
	"mrg_rxbuf": onOff, "csum": onOff, "guest_csum": onOff, "gso": onOff, "guest_tso4": onOff, "guest_tso6": onOff,
	"guest_ecn": onOff, "guest_ufo": onOff, "host_tso4": onOff, "host_tso6": onOff, "host_ecn": onOff, "host_ufo": onOff,
	"ctrl_vq": onOff, "ctrl_rx": onOff, "ctrl_vlan": onOff, "status": onOff, "event_idx": onOff, "indirect_desc": onOff,
	"rx_queue_size": kindCount(4096), "tx_queue_size": kindCount(4096), "chassis": kindCount(255), "slot": kindCount(255),
	"port": kindCount(255), "autonegotiation": onOff, "mitigation": onOff, "vgamem_mb": kindCount(512), "ram_size_mb": kindCount(512),
	"vram_size_mb": kindCount(512), "xres": kindCount(16384), "yres": kindCount(16384), "max_outputs": kindCount(16),
	"edid": onOff, "migrate": onOff, "disable_s3": kindCount(1), "disable_s4": kindCount(1), "lost_tick_policy": ident,
	"num_queues": kindCount(1024), "max_ports": kindCount(31), "p2": kindCount(15), "p3": kindCount(15), "x-pcie-extcap-init": onOff,
	"msi": onOffAuto, "msix": onOff, "x-pcie-lnksta-dllla": onOff, "tx": kindEnum("timer", "bh"), "iobase": kindRe(reNumber, "a number"),
	"irq": kindCount(15), "index": kindCount(3), "compat_flags": kindRe(reNumber, "a number"), "driftfix": kindEnum("none", "slew"),
	"base_year": kindCount(3000), "timer": kindCount(1), "msi_vector": kindCount(1024), "caching-mode": onOff, "intremap": onOffAuto,
	"device-iotlb": onOff, "aw-bits": kindCount(64),
}

// qemuMachineKeys are the -machine members options may set (accel is
// dropped: the agent chooses the accelerator).
var qemuMachineKeys = map[string]valueKind{
	"type": ident, "usb": onOff, "vmport": onOffAuto, "kernel_irqchip": kindEnum("on", "off", "split"),
	"kernel-irqchip": kindEnum("on", "off", "split"), "smm": onOffAuto, "hpet": onOff, "graphics": onOff,
	"dump-guest-core": onOff, "mem-merge": onOff, "sata": onOff, "pit": onOff, "pic": onOff, "gic-version": ident,
	"highmem": onOff, "secure": onOff, "virtualization": onOff, "acpi": onOffAuto, "i8042": onOff, "smbus": onOff,
	"iommu": ident, "its": onOff, "max-ram-below-4g": kindSize, "suppress-vmdesc": onOff, "sata-ahci": onOff, "vmport-ext": onOff,
}

// qemuAllowed are the options the options property may use, without
// their leading dash (a leading "--" is read as "-", as QEMU does).
var qemuAllowed = map[string]qemuOpt{
	"nographic": {}, "no-hpet": {}, "no-acpi": {}, "no-reboot": {}, "no-shutdown": {}, "nodefaults": {},
	"no-user-config": {}, "usb": {}, "S": {},
	"cpu":       {arg: true, check: checkCPU},
	"smp":       {arg: true, check: members("cpus", map[string]valueKind{"cpus": kindCount(1024), "sockets": kindCount(1024), "cores": kindCount(1024), "threads": kindCount(1024), "dies": kindCount(1024), "clusters": kindCount(1024), "maxcpus": kindCount(1024), "books": kindCount(1024), "drawers": kindCount(1024)})},
	"m":         {arg: true, check: members("size", map[string]valueKind{"size": kindSize, "slots": kindCount(256), "maxmem": kindSize})},
	"machine":   {arg: true, check: checkMachine},
	"M":         {arg: true, check: checkMachine},
	"device":    {arg: true, check: checkDevice},
	"global":    {arg: true, check: checkGlobal},
	"vga":       {arg: true, check: enumArg("std", "cirrus", "vmware", "qxl", "virtio", "none", "tcx", "cg3")},
	"display":   {arg: true, check: enumArg("none")},
	"serial":    {arg: true, check: enumArg("none", "null")},
	"monitor":   {arg: true, check: enumArg("none")},
	"parallel":  {arg: true, check: enumArg("none")},
	"usbdevice": {arg: true, check: enumArg("tablet", "mouse", "keyboard")},
	"rtc": {arg: true, check: members("", map[string]valueKind{
		"base": func(v string) (bool, string) {
			return v == "utc" || v == "localtime" || reDate.MatchString(v), "utc, localtime or a date such as 2006-06-17T16:01:21"
		},
		"clock": kindEnum("host", "rt", "vm"), "driftfix": kindEnum("none", "slew")})},
	"boot": {arg: true, check: members("order", map[string]valueKind{"order": kindRe(reBoot, "drive letters"), "once": kindRe(reBoot, "drive letters"),
		"menu": onOff, "strict": onOff, "reboot-timeout": kindCount(65535), "splash-time": kindCount(65535)})},
	"icount": {arg: true, check: members("shift", map[string]valueKind{
		"shift": func(v string) (bool, string) {
			return v == "auto" || reNumber.MatchString(v) && len(v) <= 2, "auto or a number"
		},
		"align": onOff, "sleep": onOff})},
	"overcommit":      {arg: true, check: members("", map[string]valueKind{"mem-lock": onOff, "cpu-pm": onOff})},
	"msg":             {arg: true, check: members("", map[string]valueKind{"timestamp": onOff, "guest-name": onOff})},
	"watchdog-action": {arg: true, check: enumArg("reset", "shutdown", "poweroff", "inject-nmi", "pause", "debug", "none")},
	"k":               {arg: true, check: reArg(reKeymap, "a keyboard layout such as en-us")},
	"uuid":            {arg: true, check: reArg(reUUID, "a UUID")},
	"name":            {arg: true, check: members("guest", map[string]valueKind{"guest": text, "process": kindRe(reIdent, "a name"), "debug-threads": onOff})},
	"smbios": {arg: true, check: members("", map[string]valueKind{
		"type": kindEnum("0", "1", "2", "3", "4", "17"), "vendor": text, "version": text, "date": text, "release": text,
		"uefi": onOff, "manufacturer": text, "product": text, "serial": text, "uuid": kindRe(reUUID, "a UUID"), "sku": text,
		"family": text, "asset": text, "location": text, "part": text, "speed": kindCount(100000), "loc_pfx": text, "bank": text})},
}

func enumArg(values ...string) func(string) (string, bool, error) {
	return func(v string) (string, bool, error) {
		if !slices.Contains(values, v) {
			return "", false, fmt.Errorf("one of %s", strings.Join(values, ", "))
		}
		return v, false, nil
	}
}

func reArg(re *regexp.Regexp, want string) func(string) (string, bool, error) {
	return func(v string) (string, bool, error) {
		if !re.MatchString(v) {
			return "", false, fmt.Errorf("%s", want)
		}
		return v, false, nil
	}
}

// splitMembers splits key=value,… into members. A doubled comma (QEMU's
// escape) or an empty member is refused: no allowed value needs one.
func splitMembers(v string) ([]string, error) {
	if v == "" || strings.Contains(v, ",,") || strings.HasPrefix(v, ",") || strings.HasSuffix(v, ",") {
		return nil, fmt.Errorf("members separated by single commas")
	}
	if strings.ContainsAny(v, "{}\"'\\/") {
		return nil, fmt.Errorf("no paths, quotes or JSON")
	}
	return strings.Split(v, ","), nil
}

// members checks key=value,… against keys. The first member may be a
// bare value, read as the implied key (QEMU's implied_opt_name).
func members(implied string, keys map[string]valueKind) func(string) (string, bool, error) {
	return func(v string) (string, bool, error) {
		ms, err := splitMembers(v)
		if err != nil {
			return "", false, err
		}
		for i, m := range ms {
			k, val, ok := strings.Cut(m, "=")
			if !ok {
				if i > 0 || implied == "" {
					return "", false, fmt.Errorf("%q is not key=value", m)
				}
				k, val = implied, m
			}
			kind, known := keys[k]
			if !known {
				return "", false, fmt.Errorf("%s is not an allowed member", k)
			}
			if ok, want := kind(val); !ok {
				return "", false, fmt.Errorf("%s must be %s", k, want)
			}
		}
		return v, false, nil
	}
}

func checkCPU(v string) (string, bool, error) {
	ms, err := splitMembers(v)
	if err != nil {
		return "", false, err
	}
	for i, m := range ms {
		if i == 0 && !reIdent.MatchString(m) || !reCPU.MatchString(m) {
			return "", false, fmt.Errorf("a CPU model, then +flag, -flag or flag=value members")
		}
	}
	return v, false, nil
}

// checkMachine checks -machine and drops accel= (the agent's -accel
// decides); a value left empty drops the option.
func checkMachine(v string) (string, bool, error) {
	ms, err := splitMembers(v)
	if err != nil {
		return "", false, err
	}
	var keep []string
	for i, m := range ms {
		k, val, ok := strings.Cut(m, "=")
		switch {
		case !ok && i == 0:
			if !reIdent.MatchString(m) {
				return "", false, fmt.Errorf("a machine type name")
			}
		case k == "accel":
			continue
		case qemuMachineKeys[k] == nil:
			return "", false, fmt.Errorf("%s is not an allowed member", k)
		default:
			if ok, want := qemuMachineKeys[k](val); !ok {
				return "", false, fmt.Errorf("%s must be %s", k, want)
			}
		}
		keep = append(keep, m)
	}
	if len(keep) == 0 {
		return "", true, nil
	}
	return strings.Join(keep, ","), false, nil
}

func checkDevice(v string) (string, bool, error) {
	ms, err := splitMembers(v)
	if err != nil {
		return "", false, err
	}
	driver := strings.TrimPrefix(ms[0], "driver=")
	if !slices.Contains(qemuDevices, driver) {
		return "", false, fmt.Errorf("device %s is not an allowed driver", driver)
	}
	for _, m := range ms[1:] {
		k, val, _ := strings.Cut(m, "=")
		kind, known := qemuDeviceProps[k]
		if !known {
			return "", false, fmt.Errorf("%s is not an allowed property", k)
		}
		if ok, want := kind(val); !ok {
			return "", false, fmt.Errorf("%s must be %s", k, want)
		}
	}
	return v, false, nil
}

// checkGlobal checks -global driver.property=value and its
// driver=,property=,value= form.
func checkGlobal(v string) (string, bool, error) {
	var driver, prop, val string
	if strings.HasPrefix(v, "driver=") {
		ms, err := splitMembers(v)
		if err != nil {
			return "", false, err
		}
		seen := map[string]bool{}
		for _, m := range ms {
			k, x, _ := strings.Cut(m, "=")
			if seen[k] {
				return "", false, fmt.Errorf("%s given twice", k)
			}
			seen[k] = true
			switch k {
			case "driver":
				driver = x
			case "property":
				prop = x
			case "value":
				val = x
			default:
				return "", false, fmt.Errorf("driver=, property= and value=")
			}
		}
	} else {
		dp, x, ok := strings.Cut(v, "=")
		i := strings.LastIndex(dp, ".")
		if !ok || i < 0 || strings.ContainsAny(v, ",{}\"'\\/") {
			return "", false, fmt.Errorf("driver.property=value")
		}
		driver, prop, val = dp[:i], dp[i+1:], x
	}
	if !slices.Contains(qemuDevices, driver) && !slices.Contains(qemuGlobalDrivers, driver) {
		return "", false, fmt.Errorf("driver %s is not an allowed driver", driver)
	}
	kind, known := qemuDeviceProps[prop]
	if !known {
		return "", false, fmt.Errorf("%s is not an allowed property", prop)
	}
	if ok, want := kind(val); !ok {
		return "", false, fmt.Errorf("%s must be %s", prop, want)
	}
	return v, false, nil
}

// QemuOptions splits a QEMU node's options with shell rules, substitutes
// vars (%vm-name%, …) in each word, and checks every word against the
// allowlist: an option outside it, a bare word (QEMU's disk image) or a
// value of the wrong kind is refused with GNS3's message, naming the
// option. GNS3's -no-kvm, -no-hax and -enable-kvm, and -machine accel=,
// are dropped: the agent chooses the accelerator.
func QemuOptions(options string, vars map[string]string) ([]string, error) {
	if strings.TrimSpace(options) == "" {
		return nil, nil
	}
	if len(options) > 8192 {
		return nil, fmt.Errorf("Forbidden additional option: options longer than 8192 bytes")
	}
	words, err := shlex.Split(options)
	if err != nil {
		return nil, fmt.Errorf("Invalid options %q: %v", options, err)
	}
	for i := range words {
		for k, v := range vars {
			words[i] = strings.ReplaceAll(words[i], k, v)
		}
	}
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		name := strings.TrimPrefix(strings.TrimPrefix(w, "-"), "-")
		if !strings.HasPrefix(w, "-") || name == "" {
			return nil, fmt.Errorf("Forbidden additional option: %s (not an option: QEMU would open it as a disk image)", w)
		}
		switch name {
		case "no-kvm", "no-hax", "enable-kvm":
			continue
		}
		opt, ok := qemuAllowed[name]
		if !ok {
			return nil, fmt.Errorf("Forbidden additional option: %s (not among the options labtap allows)", w)
		}
		if !opt.arg {
			out = append(out, w)
			continue
		}
		if i+1 >= len(words) {
			return nil, fmt.Errorf("Forbidden additional option: %s needs a value", w)
		}
		i++
		v, drop, err := opt.check(words[i])
		if err != nil {
			return nil, fmt.Errorf("Forbidden additional option: %s %s (%v)", w, words[i], err)
		}
		if !drop {
			out = append(out, w, v)
		}
	}
	return out, nil
}
