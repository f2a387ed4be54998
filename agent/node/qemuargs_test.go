package node

import (
	"slices"
	"strings"
	"testing"
)

func TestQemuOptionsRefuseHostPathsAndNetworks(t *testing.T) {
	for _, bad := range []string{
		"-drive file=/etc/passwd", "--drive file=x", "-hda x", "-netdev user,id=n", "-nic user", "-net user",
		"-chardev socket,id=c,path=/tmp/x", "-serial tcp::4444,server", "-monitor stdio", "-qmp unix:/tmp/q",
		"-kernel /etc/passwd", "-object memory-backend-file,id=m,mem-path=/tmp", "-device e1000,netdev=x",
		"-device virtio-serial,chardev=c", "-display vnc=0.0.0.0:1", "-loadvm x", "-incoming tcp:0:4444",
		"-D /tmp/log", "-pidfile /tmp/p", "-readconfig /etc/x", "-plugin x.so", "-vnc :1",
	} {
		if _, err := QemuOptions(bad, nil); err == nil || !strings.Contains(err.Error(), "Forbidden additional option") {
			t.Errorf("%q: %v, want Forbidden additional option", bad, err)
		}
	}
	got, err := QemuOptions(`-cpu host -machine accel=tcg,usb=on -no-kvm -name "%vm-name%"`, map[string]string{"%vm-name%": "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-cpu", "host", "-machine", "usb=on", "-name", "r1"}; !slices.Equal(got, want) {
		t.Fatalf("options %q, want %q", got, want)
	}
}

// Options the list above let through that still reach the host: -set
// rewrites the agent's own chardev or drives, floppies and the boot splash
// read host files, machine properties read (kernel=, dtb=) or write
// (dumpdtb=) host paths, and devices pass host hardware or folders to the
// guest (usb-host, vfio, vhost-vsock, usb-mtp's rootdir=, evdev=).
func TestQemuOptionsRefuseTheOtherWaysToTheHost(t *testing.T) {
	for _, bad := range []string{
		"-set chardev.con0.path=/tmp/evil", "-fda /etc/shadow", "-fdb /etc/shadow", "-boot splash=/etc/shadow",
		"-machine pc,kernel=/etc/shadow", "-M virt,dtb=/etc/shadow", "-machine virt,dumpdtb=/tmp/evil",
		"-machine pc,initrd=/etc/shadow", "-machine virt,firmware=/etc/shadow",
		"-device usb-host,hostbus=1,hostaddr=2", "-device vfio-pci,host=01:00.0", "-device vhost-vsock-pci,guest-cid=3",
		"-device usb-mtp,rootdir=/", "-device virtio-input-host-pci,evdev=/dev/input/event0",
		"-device guest-loader,addr=0x1000,kernel=/etc/shadow",
		`-device '{"driver":"e1000","romfile":"/etc/shadow"}'`, `-device ' {"driver":"usb-mtp","rootdir":"/"}'`,
		`-device '{"driver":"loader","file":"/etc/shadow","addr":"0x1000"}'`, "-semihosting",
		"-device u2f-passthru,hidraw=/dev/hidraw0", "-display egl-headless,rendernode=/dev/dri/renderD128",
	} {
		if _, err := QemuOptions(bad, nil); err == nil || !strings.Contains(err.Error(), "Forbidden additional option") {
			t.Errorf("%q: %v, want Forbidden additional option", bad, err)
		}
	}
	if _, err := QemuOptions("-boot order=dc,menu=on -device e1000,mac=0c:00:00:00:00:01 -machine q35,usb=on", nil); err != nil {
		t.Fatalf("ordinary options refused: %v", err)
	}
}
