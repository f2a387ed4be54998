package host

import (
	"errors"
	"testing"

	"github.com/labtap/labtap/proto"
)

// Bad input is refused as invalid whatever the project: before the calls
// moved onto *project, the id and filter checks ran before the project was
// looked up, and a call on a project not open still answers 400, not 404.
func TestBadInputIsInvalidEvenOnAProjectNotOpen(t *testing.T) {
	h := New(Config{DataDir: t.TempDir(), Runners: map[string]RunnerFactory{}})
	defer h.Close()
	const notOpen = "33333333-3333-4333-8333-333333333333"
	for name, call := range map[string]func() error{
		"a node id that is a path": func() error {
			_, err := h.CreateNode(t.Context(), notOpen, proto.NodeSpec{NodeID: "../n", NodeType: TypeHub})
			return err
		},
		"a node type the agent does not run": func() error {
			_, err := h.CreateNode(t.Context(), notOpen, proto.NodeSpec{NodeID: "22222222-2222-4222-8222-222222222222", NodeType: "vpcs"})
			return err
		},
		"a link id that is a path": func() error {
			return h.PutLink(notOpen, proto.LinkSpec{LinkID: "../l"})
		},
		"a bpf filter that does not compile": func() error {
			return h.PutLink(notOpen, proto.LinkSpec{LinkID: "44444444-4444-4444-8444-444444444444", Filters: proto.Filters{BPF: []string{"port ((("}}})
		},
		"an empty reservation id": func() error {
			_, err := h.ReserveTunnelPort(notOpen, "")
			return err
		},
	} {
		if pe, ok := errors.AsType[*proto.Error](call()); !ok || pe.Code != proto.CodeInvalid {
			t.Errorf("%s: got %v, want %s", name, pe, proto.CodeInvalid)
		}
	}
}
