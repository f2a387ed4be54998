package kvm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestCheckHere runs the self-test on this machine and says what it
// found: it must end by its deadline, whatever KVM does. (How fast a
// passing self-test is depends on the machine's load: no test holds it to
// a time.)
func TestCheckHere(t *testing.T) {
	start := time.Now()
	err := Check(Device, DefaultTimeout)
	took := time.Since(start)
	t.Logf("%s: %v in %v", Device, err, took)
	if took > DefaultTimeout+10*time.Second { // a liveness bound, not a measure
		t.Errorf("Check took %v: its deadline of %v did not end it", took, DefaultTimeout)
	}
}

func TestCheckFailsFastWithoutKVM(t *testing.T) {
	notKVM := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(notKVM, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dev string
		want      error
	}{
		{"no device", filepath.Join(t.TempDir(), "absent"), fs.ErrNotExist},
		{"not a KVM device", notKVM, syscall.ENOTTY},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := Check(c.dev, DefaultTimeout)
			if runtime.GOARCH != "amd64" {
				c.want = ErrUnsupported
			}
			if !errors.Is(err, c.want) {
				t.Errorf("Check(%s) = %v, want %v", c.dev, err, c.want)
			}
			if took := time.Since(start); took > 100*time.Millisecond {
				t.Errorf("took %v", took)
			}
		})
	}
}

// requireKVM skips where /dev/kvm does not open; these tests need a KVM
// that runs a vCPU at all, however slowly.
func requireKVM(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the self-test's guest code is x86")
	}
	f, err := os.OpenFile(Device, os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no KVM: %v", err)
	}
	f.Close()
}

// TestCheckStopsAVCPUThatNeverHalts: a guest that spins for ever (jmp $)
// is taken out of KVM_RUN at the deadline.
func TestCheckStopsAVCPUThatNeverHalts(t *testing.T) {
	requireKVM(t)
	start := time.Now()
	err := check(Device, []byte{0xEB, 0xFE}, 100*time.Millisecond)
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("check = %v, want ErrTimeout", err)
	}
	if took > 600*time.Millisecond {
		t.Errorf("took %v to stop the vCPU", took)
	}
	// And the next check still works: the thread was let go cleanly.
	if err := check(Device, []byte{0xB0, probeValue, 0xE6, probePort, 0xF4}, DefaultTimeout); err != nil {
		t.Errorf("a short program after the timeout: %v", err)
	}
}

// TestCheckReadsTheGuestsWork: the vCPU must write 42 to port 0x10 and
// then halt; any other ending is a failure that says what it saw.
func TestCheckReadsTheGuestsWork(t *testing.T) {
	requireKVM(t)
	for _, c := range []struct {
		name string
		code []byte
		ok   bool
	}{
		{"out 42 then hlt", []byte{0xB0, probeValue, 0xE6, probePort, 0xF4}, true},
		{"wrong value", []byte{0xB0, 41, 0xE6, probePort, 0xF4}, false},
		{"wrong port", []byte{0xB0, probeValue, 0xE6, 0x11, 0xF4}, false},
		{"hlt before out", []byte{0xF4}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := check(Device, c.code, DefaultTimeout)
			if (err == nil) != c.ok {
				t.Errorf("check = %v, want ok %v", err, c.ok)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}
