package node

import (
	"errors"
	"strings"
	"testing"
)

func TestChooseAccel(t *testing.T) {
	hangs := errors.New("KVM self-test: vCPU did not halt within 1s")
	for _, c := range []struct {
		name, setting, options string
		kvm                    error
		want                   string
		warns                  bool
		asks                   bool // whether the self-test is consulted
	}{
		{"auto with a working KVM", "auto", "", nil, "kvm", false, true},
		{"auto where KVM hangs", "auto", "", hangs, "tcg", true, true},
		{"empty setting is auto", "", "", hangs, "tcg", true, true},
		{"tcg asked", "tcg", "", nil, "tcg", false, false},
		{"kvm asked, though it hangs", "kvm", "", hangs, "kvm", false, false},
		{"options accel=tcg", "auto", "-machine accel=tcg", nil, "tcg", false, false},
		{"options -no-kvm beat kvm", "kvm", "-no-kvm", nil, "tcg", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			accel, warning := chooseAccel("r1", c.setting, c.options, func() error { asked = true; return c.kvm })
			if accel != c.want || (warning != "") != c.warns || asked != c.asks {
				t.Fatalf("chooseAccel = %q, %q (self-test asked: %v), want %q, warning %v, asked %v", accel, warning, asked, c.want, c.warns, c.asks)
			}
			if c.warns && (!strings.HasPrefix(warning, "r1 runs without KVM") || !strings.Contains(warning, c.kvm.Error())) {
				t.Errorf("warning %q does not name the VM and say why", warning)
			}
		})
	}
}
