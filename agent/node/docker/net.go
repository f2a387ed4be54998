package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Interface sizes: the host end takes the largest frame a veth
// carries, so the container's own MTU alone decides, as on a real NIC.
const (
	hostMTU      = 65535
	containerMTU = 1500
)

// HostEndName is the name of adapter n's host end: "lt" and 12 hex digits of
// a hash of the ids, under the kernel's 15 bytes and the same after an
// agent restart, so the agent finds the veths of running containers.
func HostEndName(projectID, nodeID string, adapter int) string {
	sum := sha256.Sum256([]byte(projectID + "/" + nodeID + "/" + strconv.Itoa(adapter)))
	return "lt" + hex.EncodeToString(sum[:6])
}

// plumb gives the container whose network namespace is ns the interface
// eth<adapter> with mac, the peer of a new veth whose host end is host, and
// returns the host end's ifindex. The peer is born inside the namespace
// with its name and MAC (one RTM_NEWLINK: never a moment with the wrong
// MAC). A leftover host end of the same name (an agent that crashed) is
// deleted first.
func plumb(ns netns.NsHandle, host string, adapter int, mac net.HardwareAddr, alt string) (int, error) {
	peer := "eth" + strconv.Itoa(adapter)
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU = host, hostMTU
	veth := &netlink.Veth{LinkAttrs: la, PeerName: peer, PeerNamespace: netlink.NsFd(int(ns)), PeerHardwareAddr: mac, PeerMTU: containerMTU}
	err := netlink.LinkAdd(veth)
	if errors.Is(err, unix.EEXIST) {
		if old, lerr := netlink.LinkByName(host); lerr == nil {
			_ = netlink.LinkDel(old)
		}
		err = netlink.LinkAdd(veth)
	}
	if err != nil {
		return 0, fmt.Errorf("create the veth pair %s–%s: %w", host, peer, err)
	}
	link, err := netlink.LinkByName(host)
	if err != nil {
		return 0, fmt.Errorf("veth %s: %w", host, err)
	}
	if alt != "" {
		_ = netlink.LinkAddAltName(link, alt) // for people reading `ip link`; old kernels lack altnames
	}
	// Silent host end: no IPv6 router solicitations or MLD reports into the
	// lab, before it is up.
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+host+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("veth %s: disable IPv6: %w", host, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return 0, fmt.Errorf("veth %s: up: %w", host, err)
	}
	if err := setupInside(ns, peer); err != nil {
		return 0, err
	}
	return link.Attrs().Index, nil
}

// loUp brings the loopback interface of the network namespace ns up: the
// agent does it from outside, so a node without CAP_NET_ADMIN has it too.
func loUp(ns netns.NsHandle) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("enter the container's network namespace: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo in the container: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo in the container: up: %w", err)
	}
	return nil
}

// setupInside brings the container end up and turns its TX checksum
// offload off, so every frame leaves the veth with its checksums complete:
// the relay and the capture never see a TCP checksum the kernel meant to
// fill in later (without this, BGP never comes up across the relay: spec
// 3.7.2, verified). Turning it off also turns TSO off, so no frame larger
// than the MTU reaches the host end.
func setupInside(ns netns.NsHandle, ifname string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("enter the container's network namespace: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("%s in the container: %w", ifname, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s in the container: up: %w", ifname, err)
	}
	return inNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return ethtoolSet(fd, ifname, unix.ETHTOOL_STXCSUM, 0)
	})
}

// inNetns runs f on a thread of its own inside ns; the thread is locked and
// ends with its goroutine, so it never runs anything else in the wrong
// namespace, whatever happens.
func inNetns(ns netns.NsHandle, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := netns.Set(ns); err != nil {
			done <- fmt.Errorf("enter the container's network namespace: %w", err)
			return
		}
		done <- f()
	}()
	return <-done
}

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with its union holding a pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtoolSet(fd int, ifname string, cmd, value uint32) error {
	v := ethtoolValue{cmd: cmd, data: value}
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&v)
	if errno != 0 {
		return fmt.Errorf("%s: ethtool %#x: %w", ifname, cmd, errno)
	}
	return nil
}

// ethtoolGet reads an ethtool_value setting of ifname (tests check the
// offload is off).
func ethtoolGet(fd int, ifname string, cmd uint32) (uint32, error) {
	v := ethtoolValue{cmd: cmd}
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&v)
	if errno != 0 {
		return 0, errno
	}
	return v.data, nil
}

// adopt finds the host end of a veth plumbed by an earlier agent process
// into a container that still runs, and checks that its peer is the
// container's eth<adapter>; it returns the host end's ifindex, or false
// when the pair is not (all) there.
func adopt(ns netns.NsHandle, host string, adapter int) (int, bool) {
	l, err := netlink.LinkByName(host)
	if err != nil {
		return 0, false
	}
	veth, ok := l.(*netlink.Veth)
	if !ok {
		return 0, false
	}
	peerIndex, err := netlink.VethPeerIndex(veth)
	if err != nil {
		return 0, false
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, false
	}
	defer h.Close()
	in, err := h.LinkByName("eth" + strconv.Itoa(adapter))
	if err != nil || in.Attrs().Index != peerIndex {
		return 0, false
	}
	return l.Attrs().Index, true
}

// removeHostEnd deletes a host end that is still there (its container
// gone, or being replaced); the kernel deletes the pair.
func removeHostEnd(host string) {
	if l, err := netlink.LinkByName(host); err == nil {
		_ = netlink.LinkDel(l)
	}
}

func syscallSocket() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}

func closeFd(fd int) { unix.Close(fd) }
