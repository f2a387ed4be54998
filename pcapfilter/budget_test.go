package pcapfilter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// orOf joins n terms made by term with "or".
func orOf(n int, term func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = term(i)
	}
	return strings.Join(parts, " or ")
}

func TestCompileAllKeepsToItsBudget(t *testing.T) {
	// Fine: compiled in a child, the same program as in-process.
	progs, err := CompileAll(t.Context(), layers.LinkTypeEthernet, []string{"icmp", "udp port 53"}, 10*time.Second)
	if err != nil || len(progs) != 2 {
		t.Fatalf("CompileAll = %d programs, %v", len(progs), err)
	}
	want, _ := Compile(layers.LinkTypeEthernet, "udp port 53")
	if fmt.Sprint(progs[1]) != fmt.Sprint(want) {
		t.Fatalf("the child compiled %v, in-process %v", progs[1], want)
	}
	// libpcap's own refusal keeps its message.
	if _, err := CompileAll(t.Context(), layers.LinkTypeEthernet, []string{"icmp", "nonsense here"}, 10*time.Second); err == nil || errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), "nonsense") {
		t.Fatalf("a bad expression: %v", err)
	}
	// Over the deadline: libpcap's optimiser on many host terms takes
	// seconds; the child is killed when the deadline passes.
	slow := orOf(400, func(i int) string { return fmt.Sprintf("host 10.%d.%d.1", i/200, i%200) })
	if _, err := CompileAll(t.Context(), layers.LinkTypeEthernet, []string{slow}, 300*time.Millisecond); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("a slow filter with a 300 ms deadline: %v, want too complex", err)
	}
	// Over MaxInstructions.
	long := orOf(2500, func(i int) string { return fmt.Sprintf("ether[%d] == %d", i%1500, i%256) })
	if _, err := CompileAll(t.Context(), layers.LinkTypeEthernet, []string{long}, time.Minute); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("a %d-term filter: %v, want too complex", 2500, err)
	}
}
