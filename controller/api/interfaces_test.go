package api_test

import (
	"encoding/json"
	"testing"
)

// The GUI's cloud node dialog lists the compute host's interfaces (GNS3
// answers them; labtap answered [] and the dialog stayed empty): here the
// real agent state lists this host's, loopback included, in GNS3's shape.
func TestComputeHostInterfacesAreListedForTheCloudDialog(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, path := range []string{"/v2/computes/local/network/interfaces", "/v2/compute/network/interfaces"} {
		r := s.do("GET", path, nil)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", path, r.status, r.raw)
		}
		var list []map[string]any
		if err := json.Unmarshal(r.raw, &list); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, r.raw)
		}
		var lo map[string]any
		for i, e := range list {
			if len(e) != 7 || e["id"] != e["name"] {
				t.Errorf("GET %s: entry %v, want GNS3's id, name, ip_address, netmask, mac_address, type, special", path, e)
			}
			if i > 0 && list[i-1]["name"].(string) >= e["name"].(string) {
				t.Errorf("GET %s: not sorted by name: %v before %v", path, list[i-1]["name"], e["name"])
			}
			if e["name"] == "lo" {
				lo = e
			}
		}
		if lo == nil || lo["ip_address"] != "127.0.0.1" || lo["netmask"] != "255.0.0.0" || lo["special"] != true || lo["type"] != "ethernet" {
			t.Fatalf("GET %s: loopback %v in %s", path, lo, r.raw)
		}
	}
	s.must("GET", "/v2/computes/ghost/network/interfaces", nil, 404, "/v2/computes/{compute_id}/network/interfaces")
}
