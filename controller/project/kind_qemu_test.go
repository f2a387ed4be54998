package project

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestQemuPortNamesFollowGNS3sFormatRules(t *testing.T) {
	first := "mgmt0"
	cases := []struct {
		name   string
		n      Node
		want   []string
		shorts []string
	}{
		{name: "default format", n: Node{PortNameFormat: "Ethernet{0}", Properties: map[string]any{"adapters": 3.0}},
			want: []string{"Ethernet0", "Ethernet1", "Ethernet2"}, shorts: []string{"e0", "e1", "e2"}},
		{name: "segments of two", n: Node{PortNameFormat: "Gi{1}/{0}", PortSegmentSize: 2, Properties: map[string]any{"adapters": 3.0}},
			want: []string{"Gi0/0", "Gi0/1", "Gi1/0"}, shorts: []string{"Gi0/0", "Gi0/1", "Gi1/0"}},
		{name: "first port name takes adapter 0 only", n: Node{PortNameFormat: "Ethernet{0}", FirstPortName: &first, Properties: map[string]any{"adapters": 2.0}},
			want: []string{"mgmt0", "Ethernet0"}, shorts: []string{"mgmt0", "e0"}},
		{name: "port and adapter placeholders", n: Node{PortNameFormat: "p{port1}-a{adapter}", Properties: map[string]any{"adapters": 2.0}},
			want: []string{"p1-a0", "p2-a1"}, shorts: []string{"p1-a0", "p2-a1"}},
		{name: "custom adapter name and type", n: Node{PortNameFormat: "Ethernet{0}", Properties: map[string]any{"adapters": 2.0, "adapter_type": "e1000"},
			CustomAdapters: []json.RawMessage{json.RawMessage(`{"adapter_number": 1, "port_name": "uplink", "adapter_type": "virtio-net-pci"}`)}},
			want: []string{"Ethernet0", "uplink"}, shorts: []string{"e0", "uplink"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := qemuAdapters(&c.n)
			if err != nil {
				t.Fatal(err)
			}
			var names, shorts []string
			for _, a := range got {
				names, shorts = append(names, a.Name), append(shorts, a.ShortName)
			}
			if !slices.Equal(names, c.want) || !slices.Equal(shorts, c.shorts) {
				t.Fatalf("names %v short %v, want %v %v", names, shorts, c.want, c.shorts)
			}
		})
	}
	if _, err := qemuAdapters(&Node{PortNameFormat: "eth{nope}", Properties: map[string]any{"adapters": 1.0}}); err == nil {
		t.Fatal("an unknown placeholder was accepted")
	}
}

func TestQemuCheckRefusesWhatGNS3Refuses(t *testing.T) {
	ok := func() map[string]any { p := map[string]any{}; qemuDefaults(p); return p }
	if err := qemuCheck(&Node{Properties: ok()}); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for name, change := range map[string]map[string]any{
		"unknown member":      {"bogus": 1.0},
		"ram out of range":    {"ram": 0.0},
		"bad boot priority":   {"boot_priority": "z"},
		"image leaves folder": {"hda_disk_image": "../../etc/shadow"},
		"legacy networking":   {"legacy_networking": true},
		"cdrom and hdc":       {"cdrom_image": "a.iso", "hdc_disk_image": "b.qcow2"},
		"bad mac":             {"mac_address": "0c:00"},
		"adapter type option": {"adapter_type": "e1000,romfile=/etc/passwd"},
	} {
		p := ok()
		for k, v := range change {
			p[k] = v
		}
		if err := qemuCheck(&Node{Properties: p}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
