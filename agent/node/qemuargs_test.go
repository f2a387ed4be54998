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
