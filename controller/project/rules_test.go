package project

import (
	"errors"
	"testing"
)

func TestAllocateName(t *testing.T) {
	tests := []struct {
		name, requested string
		taken           []string
		want            string
	}{
		{"free name kept", "PC1", nil, "PC1"},
		{"spaces removed", "PC 1", nil, "PC1"},
		{"taken name with number gets the next free number", "R1", []string{"R1"}, "R2"},
		{"taken name without number gets a number", "R", []string{"R"}, "R1"},
		{"first free number, not max+1", "R1", []string{"R1", "R3"}, "R2"},
		{"template takes the first free number", "PC{0}", []string{"PC1", "PC2"}, "PC3"},
		{"id template", "SW{id}", nil, "SW1"},
		{"name inside template", "{name}-{0}", nil, "Node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := allocateName(tt.requested, func(n string) bool {
				for _, x := range tt.taken {
					if x == n {
						return true
					}
				}
				return false
			})
			if err != nil || got != tt.want {
				t.Fatalf("allocateName(%q) = %q, %v; want %q", tt.requested, got, err, tt.want)
			}
		})
	}
	if _, err := allocateName("PC{0}{", func(string) bool { return false }); !errors.Is(err, ErrConflict) {
		t.Fatalf("malformed template: %v, want a conflict", err)
	}
	if _, err := allocateName("PC{0}{x}", func(string) bool { return false }); !errors.Is(err, ErrConflict) {
		t.Fatalf("unknown placeholder: %v, want a conflict", err)
	}
	if _, err := allocateName("   ", func(string) bool { return false }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("blank name: %v, want invalid", err)
	}
}

func TestCaptureSideFollowsGNS3Rules(t *testing.T) {
	vpcs := func(compute, status string) *Node { return &Node{Type: "vpcs", ComputeID: compute, Status: status} }
	sw := func(compute, status string) *Node {
		return &Node{Type: "ethernet_switch", ComputeID: compute, Status: status}
	}
	tests := []struct {
		name  string
		nodes []*Node
		want  int
	}{
		{"nothing started", []*Node{vpcs("local", Stopped), vpcs("local", Stopped)}, -1},
		{"only the second started", []*Node{vpcs("local", Stopped), vpcs("local", Started)}, 1},
		{"both started: first wins", []*Node{vpcs("local", Started), vpcs("local", Started)}, 0},
		{"local beats remote", []*Node{vpcs("r1", Started), vpcs("local", Started)}, 1},
		{"always-running beats local", []*Node{vpcs("local", Started), sw("r1", Started)}, 1},
		{"local always-running beats remote always-running", []*Node{sw("r1", Started), sw("local", Started)}, 1},
		{"a stopped switch does not count", []*Node{vpcs("r1", Started), sw("local", Stopped)}, 0},
		{"suspended is not started", []*Node{vpcs("local", Suspended), vpcs("r1", Started)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := captureSide(tt.nodes); got != tt.want {
				t.Fatalf("captureSide = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDefaultCaptureNameKeepsOnlySafeCharacters(t *testing.T) {
	got := defaultCaptureName(capturePort{"Hello@", 0, 4}, capturePort{"w0.rld", 1, 3}, ".pcap")
	if want := "Hello_0-4_to_w0rld_1-3.pcap"; got != want {
		t.Fatalf("defaultCaptureName = %q, want %q", got, want)
	}
}

func TestWithinComparesPathsNotStrings(t *testing.T) {
	root := "/data/projects"
	tests := []struct {
		path string
		want bool
	}{
		{"/data/projects/abc", true},
		{"/data/projects/abc/def", true},
		{"/data/projects", true},
		{"/data/projects-evil", false},
		{"/data/projects/../victim", false},
		{"/data/projects/abc/../../victim", false},
		{"/etc", false},
		{"/data/projects/..hidden", true}, // a name starting with two dots is inside
	}
	for _, tt := range tests {
		if got := within(root, tt.path); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", root, tt.path, got, tt.want)
		}
	}
}

func TestFileNameNeverLeavesTheProjectDirectory(t *testing.T) {
	tests := map[string]string{
		"lab":           "lab.gns3",
		"../../etc/x":   "etcx.gns3",
		"/abs/path":     "abspath.gns3",
		`..\win`:        "win.gns3",
		"...":           "project.gns3",
		"My Lab (v2)":   "My Lab (v2).gns3",
		"a\x00b":        "ab.gns3",
		".hidden-start": "hidden-start.gns3",
	}
	for in, want := range tests {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}
