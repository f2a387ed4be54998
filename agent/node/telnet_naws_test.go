package node

import (
	"bytes"
	"testing"
)

func TestTelnetFilterReportsWindowSizesAndKeepsBangWhenAsked(t *testing.T) {
	var sizes [][2]int
	f := telnetFilter{keepBang: true, onResize: func(c, r int) { sizes = append(sizes, [2]int{c, r}) }}
	// NAWS 132x40 split across reads, data around it, then 255x255 with its
	// escaped IACs, and a subnegotiation of another option.
	in := [][]byte{
		[]byte("ls !x"), {iac, sb, naws, 0, 132}, {0, 40, iac, se}, []byte("\r\n"),
		{iac, sb, naws, 0, iac, iac, 0, iac, iac, iac, se},
		{iac, sb, 24, 0, 'x', 't', iac, se}, []byte("ok"),
	}
	var out []byte
	for _, b := range in {
		out = append(out, f.filter(b)...)
	}
	if !bytes.Equal(out, []byte("ls !x\rok")) {
		t.Fatalf("data %q", out)
	}
	if len(sizes) != 2 || sizes[0] != [2]int{132, 40} || sizes[1] != [2]int{255, 255} {
		t.Fatalf("sizes %v", sizes)
	}
	// VPCS's filter still drops '!'.
	var v telnetFilter
	if got := v.filter([]byte("!ls")); string(got) != "ls" {
		t.Fatalf("vpcs filter kept %q", got)
	}
}
