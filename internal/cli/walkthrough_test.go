package cli

import (
	"strings"
	"testing"
)

func TestWalkthroughsJoinTheirBlocksInOrder(t *testing.T) {
	doc := "# Title\n\n<!-- walkthrough: demo -->\n```sh\nU=x\n```\n\nprose\n\n" +
		"<!-- not a walkthrough: needs a display -->\n```sh\nwireshark\n```\n\n" +
		"<!-- walkthrough: ospf needs=docker,root -->\n```sh\ndocker ps\n```\n\n" +
		"<!-- walkthrough: demo needs=qemu -->\n```sh\necho $U\n```\n\n```go\nnot shell\n```\n"
	ws, err := Walkthroughs(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "demo" || ws[1].Name != "ospf" {
		t.Fatalf("walkthroughs %+v", ws)
	}
	if want := "# line 5\nU=x\n# line 22\necho $U\n"; ws[0].Script != want {
		t.Errorf("demo's script %q, want %q", ws[0].Script, want)
	}
	if strings.Join(ws[0].Needs, ",") != "qemu" || strings.Join(ws[1].Needs, ",") != "docker,root" {
		t.Errorf("needs %v and %v", ws[0].Needs, ws[1].Needs)
	}
}

func TestWalkthroughsRefuseAnUnmarkedShellBlock(t *testing.T) {
	for name, doc := range map[string]string{
		"unmarked block":         "text\n```sh\ncurl -s x\n```\n",
		"mark before no block":   "<!-- walkthrough: a -->\ntext\n```sh\nx\n```\n",
		"mark before a go block": "<!-- walkthrough: a -->\n```go\nx\n```\n",
		"reasonless not-a-walk":  "<!-- not a walkthrough: -->\n```sh\nx\n```\n",
		"block that never ends":  "<!-- walkthrough: a -->\n```sh\nx\n",
	} {
		if _, err := Walkthroughs(doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
