package kvm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctls of the KVM API (linux/kvm.h) the self-test uses; _IO(0xAE, n)
// and, for those that carry a struct, _IOW/_IOR with its size.
const (
	kvmGetAPIVersion       = 0xAE00
	kvmCreateVM            = 0xAE01
	kvmGetVCPUMmapSize     = 0xAE04
	kvmCreateVCPU          = 0xAE41
	kvmSetUserMemoryRegion = 0x4020AE46 // _IOW, struct kvm_userspace_memory_region (32 bytes)
	kvmRun                 = 0xAE80
	kvmSetRegs             = 0x4090AE82 // _IOW, struct kvm_regs (144 bytes)
	kvmGetSregs            = 0x8138AE83 // _IOR, struct kvm_sregs (312 bytes)
	kvmSetSregs            = 0x4138AE84 // _IOW, struct kvm_sregs

	kvmAPIVersion = 12 // the only stable version there has been

	exitIO       = 2 // KVM_EXIT_IO
	exitHLT      = 5 // KVM_EXIT_HLT
	exitIntr     = 10
	ioOut        = 1 // kvm_run.io.direction: KVM_EXIT_IO_OUT
	probePort    = 0x10
	probeValue   = 42
	guestAddress = 0x1000 // where the page is in guest memory, and the code in it
)

// guestCode is the real-mode program: a loop of 2^20 turns, then
// mov al, 42; out 0x10, al; hlt.
var guestCode = []byte{
	0x66, 0xB9, 0x00, 0x00, 0x10, 0x00, // mov ecx, 0x100000
	0x66, 0x49, // l: dec ecx
	0x75, 0xFC, // jnz l
	0xB0, probeValue, // mov al, 42
	0xE6, probePort, // out 0x10, al
	0xF4, // hlt
}

// The offsets in struct kvm_run (the vCPU's shared page) the test reads.
const (
	runImmediateExit = 1  // __u8 immediate_exit
	runExitReason    = 8  // __u32 exit_reason
	runIODirection   = 32 // the exit's union: io.direction (__u8),
	runIOSize        = 33 // io.size (__u8),
	runIOPort        = 34 // io.port (__u16),
	runIOCount       = 36 // io.count (__u32),
	runIODataOffset  = 40 // io.data_offset (__u64), from the start of kvm_run
)

// userspaceMemoryRegion is struct kvm_userspace_memory_region.
type userspaceMemoryRegion struct {
	Slot, Flags                              uint32
	GuestPhysAddr, MemorySize, UserspaceAddr uint64
}

// regs is struct kvm_regs: rax ... r15, rip, rflags.
type regs struct {
	GP          [16]uint64
	RIP, RFlags uint64
}

// sregs is struct kvm_sregs; the test sets only the code segment, the
// first kvm_segment (base at 0, selector at 8).
type sregs [312]byte

func ioctl(fd int, req uintptr, arg uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
	if errno != 0 {
		return int(r), errno
	}
	return int(r), nil
}

// check runs code (real mode, at guestAddress) as Check describes.
func check(dev string, code []byte, timeout time.Duration) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	kvm := int(f.Fd())
	v, err := ioctl(kvm, kvmGetAPIVersion, 0)
	if err != nil {
		f.Close()
		return fmt.Errorf("KVM_GET_API_VERSION: %w", err)
	}
	if v != kvmAPIVersion {
		f.Close()
		return fmt.Errorf("KVM API version %d, want %d", v, kvmAPIVersion)
	}
	// The vCPU runs on a thread of its own, locked to it, so that a
	// signal to that thread takes it out of KVM_RUN at the deadline.
	type started struct{ tid int }
	tidc := make(chan started, 1)
	done := make(chan error, 1)
	var expired atomic.Bool
	var runPage atomic.Pointer[[]byte]
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer f.Close()
		tidc <- started{unix.Gettid()}
		done <- run(kvm, code, &expired, &runPage)
	}()
	tid := (<-tidc).tid
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	// The deadline: ask the vCPU to leave KVM_RUN (immediate_exit covers
	// a signal that comes before it enters), and signal its thread until
	// it does. SIGURG is the signal Go itself interrupts threads with: its
	// handler lets the thread go on, and KVM_RUN returns EINTR.
	expired.Store(true)
	giveUp := time.After(time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p := runPage.Load(); p != nil {
			atomic.StoreUint32((*uint32)(unsafe.Pointer(&(*p)[0])), 1<<(8*runImmediateExit))
		}
		_ = unix.Tgkill(unix.Getpid(), tid, unix.SIGURG)
		select {
		case err := <-done:
			if errors.Is(err, ErrTimeout) {
				return fmt.Errorf("%w within %v", ErrTimeout, timeout)
			}
			return err
		case <-giveUp:
			return fmt.Errorf("%w within %v, nor left KVM_RUN when signalled", ErrTimeout, timeout)
		case <-tick.C:
		}
	}
}

// run makes the VM and its vCPU on kvm, and runs code until it halts,
// fails, or expired is set. The vCPU's kvm_run page is published in
// runPage for the deadline's immediate_exit.
func run(kvm int, code []byte, expired *atomic.Bool, runPage *atomic.Pointer[[]byte]) error {
	vmfd, err := ioctl(kvm, kvmCreateVM, 0)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	defer unix.Close(vmfd)
	mem, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("guest memory: %w", err)
	}
	defer unix.Munmap(mem)
	copy(mem, code)
	region := userspaceMemoryRegion{
		GuestPhysAddr: guestAddress,
		MemorySize:    uint64(len(mem)),
		UserspaceAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))),
	}
	if _, err := ioctl(vmfd, kvmSetUserMemoryRegion, uintptr(unsafe.Pointer(&region))); err != nil {
		return fmt.Errorf("KVM_SET_USER_MEMORY_REGION: %w", err)
	}
	cpufd, err := ioctl(vmfd, kvmCreateVCPU, 0)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VCPU: %w", err)
	}
	defer unix.Close(cpufd)
	size, err := ioctl(kvm, kvmGetVCPUMmapSize, 0)
	if err != nil {
		return fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	if size < runIODataOffset+8 {
		return fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %d bytes", size)
	}
	page, err := unix.Mmap(cpufd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("vCPU page: %w", err)
	}
	defer unix.Munmap(page)
	// Real mode, code segment at 0: the vCPU starts at guestAddress.
	var s sregs
	if _, err := ioctl(cpufd, kvmGetSregs, uintptr(unsafe.Pointer(&s))); err != nil {
		return fmt.Errorf("KVM_GET_SREGS: %w", err)
	}
	binary.LittleEndian.PutUint64(s[0:], 0)  // cs.base
	binary.LittleEndian.PutUint16(s[12:], 0) // cs.selector
	if _, err := ioctl(cpufd, kvmSetSregs, uintptr(unsafe.Pointer(&s))); err != nil {
		return fmt.Errorf("KVM_SET_SREGS: %w", err)
	}
	r := regs{RIP: guestAddress, RFlags: 0x2} // bit 1 of RFLAGS is always set
	if _, err := ioctl(cpufd, kvmSetRegs, uintptr(unsafe.Pointer(&r))); err != nil {
		return fmt.Errorf("KVM_SET_REGS: %w", err)
	}
	runPage.Store(&page)
	defer runPage.Store(nil)
	wrote := false
	for exits := 0; exits < 16; { // the program exits twice: its out, its hlt
		if expired.Load() {
			return fmt.Errorf("%w", ErrTimeout)
		}
		if _, err := ioctl(cpufd, kvmRun, 0); err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue // a signal: the deadline, or another (checked above)
			}
			return fmt.Errorf("KVM_RUN: %w", err)
		}
		exits++
		switch reason := binary.LittleEndian.Uint32(page[runExitReason:]); reason {
		case exitIO:
			dir, sz := page[runIODirection], page[runIOSize]
			port := binary.LittleEndian.Uint16(page[runIOPort:])
			count := binary.LittleEndian.Uint32(page[runIOCount:])
			off := binary.LittleEndian.Uint64(page[runIODataOffset:])
			if dir != ioOut || sz != 1 || port != probePort || count != 1 || off >= uint64(len(page)) {
				return fmt.Errorf("vCPU exit: I/O direction %d size %d port %#x count %d, want out of 1 byte to %#x", dir, sz, port, count, probePort)
			}
			if got := page[off]; got != probeValue {
				return fmt.Errorf("vCPU wrote %d to port %#x, want %d", got, probePort, probeValue)
			}
			wrote = true
		case exitHLT:
			if !wrote {
				return errors.New("vCPU halted before its out instruction")
			}
			return nil
		case exitIntr:
			continue
		default:
			return fmt.Errorf("vCPU exit reason %d, want I/O then HLT", reason)
		}
	}
	return errors.New("vCPU did not halt after 16 exits")
}
