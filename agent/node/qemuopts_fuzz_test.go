package node

import (
	"strings"
	"testing"
)

// FuzzQemuOptions: whatever options pass are allowed options, each
// followed by its value when it takes one, and no value holds a path, a
// JSON object or QEMU's doubled-comma escape.
func FuzzQemuOptions(f *testing.F) {
	for _, s := range []string{
		"-cpu host -smp 2 -m 512M", "-device e1000,mac=0c:00:00:00:00:01,romfile=", "-icount shift=auto,rr=record,rrfile=/x",
		"-global driver=e1000,property=romfile,value=/etc/shadow", "-machine type=q35,accel=tcg", `-name "a b"`, "-boot order=c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := QemuOptions(in, map[string]string{"%vm-name%": "r1"})
		if err != nil {
			return
		}
		for i := 0; i < len(out); i++ {
			opt, ok := qemuAllowed[strings.TrimPrefix(strings.TrimPrefix(out[i], "-"), "-")]
			if !ok || !strings.HasPrefix(out[i], "-") {
				t.Fatalf("%q passed with %q, not an allowed option", in, out[i])
			}
			if !opt.arg {
				continue
			}
			i++
			if i == len(out) {
				t.Fatalf("%q passed with %q lacking its value", in, out[i-1])
			}
			if v := out[i]; strings.ContainsAny(v, "/{\"'\\") || strings.Contains(v, ",,") {
				t.Fatalf("%q passed with value %q", in, v)
			}
		}
	})
}
