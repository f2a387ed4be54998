package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/labtap/labtap/proto"
)

// Bad console access bodies are refused whole: nothing of them applies.
func TestConsoleAccessRefusesBadBodiesAndChangesNothing(t *testing.T) {
	h := New(Config{DataDir: t.TempDir(), ConsolesGated: true})
	defer h.Close()
	open, closed := false, true
	const p, n = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	good := proto.ConsoleGrant{ProjectID: p, NodeID: n, Address: "192.0.2.1", TTLSeconds: 60}
	many := make([]proto.ConsoleGrant, proto.MaxConsoleGrants+1)
	for i := range many {
		many[i] = good
	}
	for _, tt := range []struct {
		name string
		body proto.ConsoleAccess
	}{
		{"no gated", proto.ConsoleAccess{}},
		{"an address that is a name", proto.ConsoleAccess{Gated: &open, Grants: []proto.ConsoleGrant{good, {ProjectID: p, NodeID: n, Address: "example.org", TTLSeconds: 60}}}},
		{"a node id that is a path", proto.ConsoleAccess{Gated: &open, Grants: []proto.ConsoleGrant{{ProjectID: p, NodeID: "../n", Address: "192.0.2.1", TTLSeconds: 60}}}},
		{"no ttl", proto.ConsoleAccess{Gated: &open, Grants: []proto.ConsoleGrant{{ProjectID: p, NodeID: n, Address: "192.0.2.1"}}}},
		{"a ttl over a day", proto.ConsoleAccess{Gated: &open, Grants: []proto.ConsoleGrant{{ProjectID: p, NodeID: n, Address: "192.0.2.1", TTLSeconds: proto.MaxConsoleGrantTTL + 1}}}},
		{"a bad revocation", proto.ConsoleAccess{Gated: &open, Revoke: []proto.ConsoleGrant{{ProjectID: p, NodeID: n, Address: "192.0.2.300"}}}},
		{"too many", proto.ConsoleAccess{Gated: &open, Grants: many}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := h.SetConsoleAccess(tt.body)
			pe, ok := errors.AsType[*proto.Error](err)
			if !ok || pe.Code != proto.CodeInvalid || len(pe.Message) > 200 || strings.Contains(pe.Message, strings.Repeat("x", 65)) {
				t.Fatalf("error %v, want a short invalid", err)
			}
			if !h.Consoles.Gated() {
				t.Fatal("a refused body opened the consoles")
			}
		})
	}
	if err := h.SetConsoleAccess(proto.ConsoleAccess{Gated: &closed, Grants: []proto.ConsoleGrant{good}}); err != nil {
		t.Fatal(err)
	}
}
