package dockerpolicy

import (
	"errors"
	"strings"
	"testing"
)

func TestSecurityCheckRefusesUnsafeCapabilitiesAndPrivilegedWithoutTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name       string
		r          Request
		confined   error // want without the flag
		unsafeFlag error // want with it
	}{
		{"default", Request{}, nil, nil},
		{"allowed", Request{CapAdd: []string{"NET_ADMIN", "cap_net_raw", "SYS_NICE", "IPC_LOCK", "CHOWN"}}, nil, nil},
		{"none", Request{CapAdd: []string{}}, nil, nil},
		{"sys_admin", Request{CapAdd: []string{"SYS_ADMIN"}}, ErrUnsafe, nil},
		{"sys_module", Request{CapAdd: []string{"NET_ADMIN", "CAP_SYS_MODULE"}}, ErrUnsafe, nil},
		{"rawio", Request{CapAdd: []string{"sys_rawio"}}, ErrUnsafe, nil},
		{"dac_read_search", Request{CapAdd: []string{"DAC_READ_SEARCH"}}, ErrUnsafe, nil},
		{"ptrace", Request{CapAdd: []string{"SYS_PTRACE"}}, ErrUnsafe, nil},
		{"all", Request{CapAdd: []string{"ALL"}}, ErrUnsafe, nil},
		{"privileged", Request{Privileged: true}, ErrUnsafe, nil},
		{"typo", Request{CapAdd: []string{"NET_ADMN"}}, ErrInvalid, ErrInvalid},
		{"empty name", Request{CapAdd: []string{""}}, ErrInvalid, ErrInvalid},
		{"long name", Request{CapAdd: []string{strings.Repeat("A", 1000)}}, ErrInvalid, ErrInvalid},
		{"too many", Request{CapAdd: make([]string, MaxCapAdd+1)}, ErrInvalid, ErrInvalid},
		{"proc volume", Request{ExtraVolumes: []string{"/proc/sys"}}, ErrVolume, ErrVolume},
		{"sys volume", Request{ExtraVolumes: []string{"/sys"}}, ErrVolume, ErrVolume},
		{"good volume", Request{ExtraVolumes: []string{"/data/", "/etc/frr"}}, nil, nil},
		{"net sysctls", Request{Sysctls: map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.disable_ipv6": "1"}}, nil, nil},
		{"kernel sysctl", Request{Sysctls: map[string]string{"kernel.core_pattern": "|/x"}}, ErrInvalid, ErrInvalid},
		{"net path trick", Request{Sysctls: map[string]string{"net/../kernel/core_pattern": "1"}}, ErrInvalid, ErrInvalid},
		{"net dots", Request{Sysctls: map[string]string{"net..ipv4": "1"}}, ErrInvalid, ErrInvalid},
		{"sysctl value", Request{Sysctls: map[string]string{"net.ipv4.ip_forward": "1\n"}}, ErrInvalid, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Node = "R1"
			for _, c := range []struct {
				p    Policy
				want error
			}{{Policy{}, tc.confined}, {Policy{Unsafe: true}, tc.unsafeFlag}} {
				err := c.p.Check(tc.r)
				if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
					t.Fatalf("%+v: %v, want %v", c.p, err, c.want)
				}
				if errors.Is(err, ErrUnsafe) && (!strings.Contains(err.Error(), Flag) || !strings.Contains(err.Error(), "R1")) {
					t.Fatalf("message %q names neither the flag nor the node", err)
				}
			}
		})
	}
}

func TestUnsafeNamesWhatNeedsTheFlag(t *testing.T) {
	got := Unsafe(Request{Privileged: true, CapAdd: []string{"NET_ADMIN", "cap_sys_admin", "SYS_ADMIN", "bogus"}})
	if strings.Join(got, ",") != "privileged,SYS_ADMIN" {
		t.Fatalf("Unsafe = %v", got)
	}
}

func TestEveryAllowedCapabilityIsKnown(t *testing.T) {
	for c := range Allowed {
		if _, err := Capability(c); err != nil {
			t.Error(err)
		}
	}
	for _, c := range DefaultCapAdd {
		if Allowed[c] == "" {
			t.Errorf("default %s is not allowed", c)
		}
	}
}
