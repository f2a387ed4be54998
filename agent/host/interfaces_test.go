package host

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/labtap/labtap/internal/testenv"
	"github.com/labtap/labtap/proto"
)

// TestHostInterfacesListsANamespacesLinks lists the interfaces of a
// network namespace of the test's own, holding a veth pair (one end with
// an address, the other named as a container's veth) and a TAP device:
// never a real interface.
// errNoNetns is a test's failure to make a network namespace.
var errNoNetns = errors.New("no network namespace")

func TestHostInterfacesListsANamespacesLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a network namespace")
	}
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", "network namespaces need root")
	}
	type result struct {
		list []proto.HostInterface
		mac  string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// netns.New moves this thread into the new namespace; it stays
		// locked and ends with the goroutine, never running others.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err != nil {
			done <- result{err: fmt.Errorf("%w: %w", errNoNetns, err)}
			return
		}
		defer ns.Close()
		nl, err := netlink.NewHandleAt(ns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nl.Close()
		la := netlink.NewLinkAttrs()
		la.Name = "lab0"
		if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "veth9"}); err != nil {
			done <- result{err: err}
			return
		}
		lab0, err := nl.LinkByName("lab0")
		if err == nil {
			err = nl.AddrAdd(lab0, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 0, 2, 1), Mask: net.CIDRMask(24, 32)}})
		}
		if err == nil {
			tap := netlink.NewLinkAttrs()
			tap.Name = "lt0123456789ab"
			err = nl.LinkAdd(&netlink.Tuntap{LinkAttrs: tap, Mode: netlink.TUNTAP_MODE_TAP})
		}
		if err != nil {
			done <- result{err: err}
			return
		}
		list, err := hostInterfaces(nl)
		done <- result{list, lab0.Attrs().HardwareAddr.String(), err}
	}()
	r := <-done
	if errors.Is(r.err, errNoNetns) {
		// A container without CAP_SYS_ADMIN (CI's, fresh-test's) makes none.
		testenv.SkipOrFail(t, "LABTAP_REQUIRE_NETNS", fmt.Sprintf("cannot make a network namespace here: %v", r.err))
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []proto.HostInterface{
		{ID: "lab0", Name: "lab0", IPAddress: "192.0.2.1", Netmask: "255.255.255.0", MACAddress: r.mac, Type: "ethernet"},
		{ID: "lo", Name: "lo", Type: "ethernet", Special: true},
		{ID: "lt0123456789ab", Name: "lt0123456789ab", Type: "tap", Special: true},
		{ID: "veth9", Name: "veth9", Type: "ethernet", Special: true},
	}
	if len(r.list) != len(want) {
		t.Fatalf("listed %+v, want %+v", r.list, want)
	}
	for i, w := range want {
		got := r.list[i]
		if w.Name != "lab0" {
			w.MACAddress = got.MACAddress // made by the kernel
		}
		if got != w {
			t.Errorf("interface %d: %+v, want %+v", i, got, w)
		}
	}
}
