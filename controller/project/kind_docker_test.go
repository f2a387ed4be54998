package project

import (
	"errors"
	"testing"
)

func TestSecurityControllerRefusesTheExtraVolumesTheAgentRefuses(t *testing.T) {
	for _, v := range []string{"/proc/x", "/proc", "/sys/fs/cgroup", "/dev/shm", "/labtap/init", "/gns3volumes/etc", "/a:b", "/", "data", "/x/../etc"} {
		n := &Node{Name: "n", Type: TypeDocker, Properties: map[string]any{"image": "img", "extra_volumes": []any{v}}}
		if err := checkDocker(n); !errors.Is(err, ErrConflict) {
			t.Errorf("extra volume %q: %v, want a conflict", v, err)
		}
	}
	n := &Node{Name: "n", Type: TypeDocker, Properties: map[string]any{"image": "img", "extra_volumes": []any{"/data/", "/etc/frr"}}}
	if err := checkDocker(n); err != nil {
		t.Fatalf("good volumes refused: %v", err)
	}
}
