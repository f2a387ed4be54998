package proto

import (
	"slices"
	"testing"
)

func TestAdapterMACs(t *testing.T) {
	cases := []struct {
		name, typ, id, base string
		count               int
		want                []string
		fails               bool
	}{
		{name: "docker default from the node id", typ: "docker", id: "fea5c9d0-d7b5-4c1e-9d65-0c5a5e5f1b2a", count: 2,
			want: []string{"02:42:a5:c9:d0:00", "02:42:a5:c9:d0:01"}},
		{name: "qemu default from the node id", typ: "qemu", id: "3b479c97-064a-4c1e-9d65-0c5a5e5f1b2a", count: 2,
			want: []string{"0c:47:9c:97:00:00", "0c:47:9c:97:00:01"}},
		{name: "explicit base carries across bytes", typ: "qemu", id: "3b479c97-0", base: "0C:00:00:00:00:FF", count: 2,
			want: []string{"0c:00:00:00:00:ff", "0c:00:00:00:01:00"}},
		{name: "last address fits", typ: "qemu", id: "3b479c97-0", base: "ff:ff:ff:ff:ff:fe", count: 2,
			want: []string{"ff:ff:ff:ff:ff:fe", "ff:ff:ff:ff:ff:ff"}},
		{name: "overflow refused", typ: "qemu", id: "3b479c97-0", base: "ff:ff:ff:ff:ff:fe", count: 3, fails: true},
		{name: "bad base refused", typ: "qemu", id: "3b479c97-0", base: "0c:00", count: 1, fails: true},
		{name: "type without default refused", typ: "vpcs", id: "3b479c97-0", count: 1, fails: true},
		{name: "no adapters", typ: "qemu", id: "3b479c97-0", count: 0, want: []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := AdapterMACs(c.typ, c.id, c.base, c.count)
			if c.fails {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
