package host

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/labtap/labtap/proto"
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

// The agent applies dockerpolicy's rule itself, for a controller that did not
// (a remote compute's agent has its own --docker-allow-unsafe).
func TestSecurityAgentRefusesUnsafeDockerNodesWithoutItsFlag(t *testing.T) {
	spec := func(props string) proto.NodeSpec {
		return proto.NodeSpec{NodeID: "5e68cbc0-9ddd-4139-a8c4-f0dc40879bb3", Name: "R1", NodeType: "docker",
			Properties: json.RawMessage(props), Adapters: []proto.AdapterSpec{{MACAddress: "02:42:00:00:00:01"}}}
	}
	for _, tc := range []struct {
		props  string
		code   proto.Code // without the flag; "" is accepted
		unsafe proto.Code // with it
	}{
		{`{"image":"img"}`, "", ""},
		{`{"image":"img","cap_add":["NET_ADMIN","SYS_NICE"]}`, "", ""},
		{`{"image":"img","cap_add":["SYS_MODULE"]}`, proto.CodeForbidden, ""},
		{`{"image":"img","cap_add":["sys_admin"]}`, proto.CodeForbidden, ""},
		{`{"image":"img","privileged":true}`, proto.CodeForbidden, ""},
		{`{"image":"img","cap_add":["NOPE"]}`, proto.CodeInvalid, proto.CodeInvalid},
		{`{"image":"img","extra_volumes":["/proc/x"]}`, proto.CodeConflict, proto.CodeConflict},
		{`{"image":"img","sysctls":{"kernel.core_pattern":"|/x"}}`, proto.CodeInvalid, proto.CodeInvalid},
	} {
		for _, unsafe := range []bool{false, true} {
			h := New(Config{DataDir: t.TempDir(), NoDocker: true, DockerUnsafe: unsafe})
			_, err := h.kinds.dockerConfig("p", spec(tc.props), t.TempDir())
			h.Close()
			want := tc.code
			if unsafe {
				want = tc.unsafe
			}
			var pe *proto.Error
			switch {
			case want == "" && err != nil:
				t.Errorf("%s (flag %v): %v", tc.props, unsafe, err)
			case want != "" && (!errors.As(err, &pe) || pe.Code != want):
				t.Errorf("%s (flag %v): %v, want code %s", tc.props, unsafe, err, want)
			}
		}
	}
}
