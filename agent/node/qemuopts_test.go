package node

import (
	"slices"
	"strings"
	"testing"
)

// The options GNS3 appliances, the recipes and users' habits need pass
// the allowlist unchanged (bar the accelerator, which is the agent's).
func TestQemuOptionsAllowlistKeepsWhatAppliancesUse(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"cpu model with features", "-cpu host", "-cpu host"},
		{"cpu flags", "-cpu qemu64,+ssse3,+sse4.1,-vmx,kvm=off", "-cpu qemu64,+ssse3,+sse4.1,-vmx,kvm=off"},
		{"smp keys", "-smp cpus=2,sockets=1,cores=2,threads=1", "-smp cpus=2,sockets=1,cores=2,threads=1"},
		{"smp count", "-smp 4", "-smp 4"},
		{"memory forms", "-m 512M -m size=1G,slots=2,maxmem=4G", "-m 512M -m size=1G,slots=2,maxmem=4G"},
		{"machine type and keys", "-machine type=q35,usb=on,vmport=off,kernel_irqchip=on,smm=off", "-machine type=q35,usb=on,vmport=off,kernel_irqchip=on,smm=off"},
		{"machine accel is dropped", "-machine accel=tcg,usb=on -M pc", "-machine usb=on -M pc"},
		{"machine accel alone", "-machine accel=kvm", ""},
		{"nic with mac and rom off", "-device e1000,mac=0c:00:00:00:00:01,romfile=", "-device e1000,mac=0c:00:00:00:00:01,romfile="},
		{"virtio nic props", "-device virtio-net-pci,id=n1,bus=pci.0,addr=0x5,mq=on,vectors=10,speed=10000,duplex=full", "-device virtio-net-pci,id=n1,bus=pci.0,addr=0x5,mq=on,vectors=10,speed=10000,duplex=full"},
		{"driver= form", "-device driver=vmxnet3,mac=52:54:00:aa:bb:cc", "-device driver=vmxnet3,mac=52:54:00:aa:bb:cc"},
		{"usb tablet", "-usb -device usb-tablet -usbdevice tablet", "-usb -device usb-tablet -usbdevice tablet"},
		{"display and graphics", "-nographic -vga std -display none", "-nographic -vga std -display none"},
		{"rtc", "-rtc base=utc,clock=host,driftfix=slew", "-rtc base=utc,clock=host,driftfix=slew"},
		{"rtc date", "-rtc base=2006-06-17T16:01:21", "-rtc base=2006-06-17T16:01:21"},
		{"boot", "-boot order=dc,menu=on,splash-time=5000", "-boot order=dc,menu=on,splash-time=5000"},
		{"legacy boot letter", "-boot d", "-boot d"},
		{"flags", "-no-hpet -no-acpi -no-reboot -nodefaults -no-user-config", "-no-hpet -no-acpi -no-reboot -nodefaults -no-user-config"},
		{"gns3 accelerator words", "-enable-kvm -no-kvm -no-hax --no-hpet", "--no-hpet"},
		{"safe global", "-global PIIX4_PM.disable_s3=1 -global driver=e1000,property=romfile,value=", "-global PIIX4_PM.disable_s3=1 -global driver=e1000,property=romfile,value="},
		{"global autonegotiation", "-global virtio-net-pci.speed=1000", "-global virtio-net-pci.speed=1000"},
		{"serial and monitor off", "-serial none -monitor none -parallel none", "-serial none -monitor none -parallel none"},
		{"icount without a file", "-icount shift=auto,align=off,sleep=on", "-icount shift=auto,align=off,sleep=on"},
		{"keyboard", "-k en-us", "-k en-us"},
		{"smbios strings", "-smbios type=1,manufacturer=Cisco,product=ASAv,serial=9A1B2C3D", "-smbios type=1,manufacturer=Cisco,product=ASAv,serial=9A1B2C3D"},
		{"name substituted", `-name "%vm-name%"`, "-name r1"},
		{"uuid", "-uuid 5e1c0a11-0000-4000-8000-00000000e7ec", "-uuid 5e1c0a11-0000-4000-8000-00000000e7ec"},
		{"empty", "   ", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := QemuOptions(tt.in, map[string]string{"%vm-name%": "r1"})
			if err != nil {
				t.Fatalf("QemuOptions(%q): %v", tt.in, err)
			}
			if want := strings.Fields(tt.want); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("QemuOptions(%q) = %q, want %q", tt.in, got, want)
			}
		})
	}
}

// Each way an option reached the host is refused with GNS3's message,
// naming the option.
func TestSecurityQemuOptionsAllowlistRefusesHostFileForms(t *testing.T) {
	for _, bad := range []string{
		// holes a denylist missed
		"-icount shift=auto,rr=record,rrfile=/tmp/x", "-icount shift=auto,rr=replay,rrfile=/etc/shadow",
		"-icount rrsnapshot=x", "-global driver=e1000,property=romfile,value=/etc/shadow",
		"-global e1000.romfile=/etc/shadow", "-global cfi.pflash01.name=x", "-device e1000,romfile=/etc/shadow",
		"/etc/shadow", "disk.img", "-", "-m=64",
		// and every form the denylist had
		"-drive file=/etc/passwd", "--drive file=x", "-hda x", "-netdev user,id=n", "-nic user", "-net user",
		"-chardev socket,id=c,path=/tmp/x", "-serial tcp::4444,server", "-serial stdio", "-monitor stdio", "-qmp unix:/tmp/q",
		"-kernel /etc/passwd", "-object memory-backend-file,id=m,mem-path=/tmp", "-device e1000,netdev=x",
		"-device virtio-serial,chardev=c", "-display vnc=0.0.0.0:1", "-loadvm x", "-incoming tcp:0:4444",
		"-D /tmp/log", "-pidfile /tmp/p", "-readconfig /etc/x", "-plugin x.so", "-vnc :1",
		"-set chardev.con0.path=/tmp/evil", "-fda /etc/shadow", "-fdb /etc/shadow", "-boot splash=/etc/shadow",
		"-machine pc,kernel=/etc/shadow", "-M virt,dtb=/etc/shadow", "-machine virt,dumpdtb=/tmp/evil",
		"-machine pc,initrd=/etc/shadow", "-machine virt,firmware=/etc/shadow", "-machine pc,memory-backend=m",
		"-device usb-host,hostbus=1,hostaddr=2", "-device vfio-pci,host=01:00.0", "-device vhost-vsock-pci,guest-cid=3",
		"-device usb-mtp,rootdir=/", "-device virtio-input-host-pci,evdev=/dev/input/event0",
		"-device guest-loader,addr=0x1000,kernel=/etc/shadow", "-device loader,file=/etc/shadow",
		`-device '{"driver":"e1000","romfile":"/etc/shadow"}'`, `-device ' {"driver":"usb-mtp","rootdir":"/"}'`,
		"-semihosting", "-device u2f-passthru,hidraw=/dev/hidraw0", "-display egl-headless,rendernode=/dev/dri/renderD128",
		"-smbios file=/etc/shadow", "-smbios type=11,path=/etc/shadow", "-accel kvm", "-L /", "-bios /etc/shadow",
		"-cpu host,model-id=/etc/shadow", "-device e1000,id=a,,romfile=/etc/shadow", "-name x,process=/a",
		"-m", "-device", "-k ../../etc/shadow", "-usbdevice disk:/etc/shadow", "-option-rom /etc/shadow",
		"-device e1000,mac=0c:00:00:00:00:01,bootindex=1,x-evil=1", "-uuid ../x",
		"-rtc base=/etc/shadow", "-smp cpus=100000", "-m 99999999G",
	} {
		if _, err := QemuOptions(bad, nil); err == nil || !strings.Contains(err.Error(), "Forbidden additional option") {
			t.Errorf("%q: %v, want Forbidden additional option", bad, err)
		}
	}
	// A substitution cannot add members: a VM name with a comma is one
	// value, and refused where it would split.
	if _, err := QemuOptions("-device e1000,id=%vm-name%", map[string]string{"%vm-name%": "x,romfile=/etc/shadow"}); err == nil {
		t.Error("a VM name with ,romfile= became a -device member")
	}
}
