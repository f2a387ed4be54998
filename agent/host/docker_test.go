package host

import (
	"slices"
	"strings"
	"testing"
)

func TestAnAgentWithoutDockerSaysWhyAndDoesNotOfferIt(t *testing.T) {
	h := New(Config{DataDir: t.TempDir(), NoDocker: true})
	defer h.Close()
	info := h.Info()
	if slices.Contains(info.NodeTypes, "docker") {
		t.Fatalf("node types %v offer docker", info.NodeTypes)
	}
	if why := info.Unavailable["docker"]; !strings.Contains(why, "turned off") {
		t.Fatalf("unavailable %v", info.Unavailable)
	}
}
