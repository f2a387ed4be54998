package symbols

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/symbols/internal/icons"
)

// TestBuiltinFilesAreWhatTheGeneratorDraws fails when the committed SVGs
// and package icons disagree: someone edited a glyph without running
// go generate, or edited a generated file by hand.
func TestBuiltinFilesAreWhatTheGeneratorDraws(t *testing.T) {
	want := icons.Generate()
	seen := make(map[string]bool)
	err := fs.WalkDir(builtinFiles, builtinRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, builtinRoot+"/")
		seen[rel] = true
		got, err := fs.ReadFile(builtinFiles, p)
		if err != nil {
			return err
		}
		if w, ok := want[rel]; !ok {
			t.Errorf("%s is embedded but not generated", rel)
		} else if !bytes.Equal(got, w) {
			t.Errorf("%s differs from what the generator draws", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range want {
		if !seen[rel] {
			t.Errorf("%s is generated but not embedded", rel)
		}
	}
	if t.Failed() {
		t.Log("run: go generate ./controller/symbols")
	}
}

// TestEveryBuiltinIsAWellFormedSVGWithPositiveSize parses every built-in
// file to the end and checks the size clients will read from it.
func TestEveryBuiltinIsAWellFormedSVGWithPositiveSize(t *testing.T) {
	lib := New("", nil)
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no built-in symbols")
	}
	for _, s := range list {
		data := readSymbol(t, lib, s.ID)
		if err := wellFormed(data); err != nil {
			t.Errorf("%s: %v", s.ID, err)
			continue
		}
		w, h, err := lib.Dimensions(s.ID)
		if err != nil || w < 30 || h < 30 || w > 100 || h > 100 {
			t.Errorf("%s measures %d×%d (%v), want a node-sized icon", s.ID, w, h, err)
		}
	}
}

func readSymbol(t *testing.T, lib *Library, id string) []byte {
	t.Helper()
	f, err := lib.Open(id)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	if int64(len(data)) != f.Size {
		t.Fatalf("%s: read %d bytes, Size says %d", id, len(data), f.Size)
	}
	return data
}

// wellFormed decodes an XML document to its end and checks that its root
// is an SVG element in the SVG namespace.
func wellFormed(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if el, ok := tok.(xml.StartElement); ok && root == "" {
			root = el.Name.Space + " " + el.Name.Local
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		return errors.New("root is " + root)
	}
	return nil
}

func TestDefaultSymbolsHaveSevenThemesOfFifteenExistingRoles(t *testing.T) {
	lib := New("", nil)
	themes := DefaultSymbols()
	if len(themes) != 7 {
		t.Fatalf("%d themes, want 7", len(themes))
	}
	for name, roles := range themes {
		want := 15
		if name == "Affinity-square-blue" {
			want = 16 // the GNS3 spelling "frame_relay_switch.svg" as well
			if roles["frame_relay_switch.svg"] != roles["frame_relay_switch"] || roles["frame_relay_switch"] == "" {
				t.Errorf("%s: frame relay keys %q and %q differ", name, roles["frame_relay_switch.svg"], roles["frame_relay_switch"])
			}
		}
		if len(roles) != want {
			t.Errorf("%s has %d roles, want %d", name, len(roles), want)
		}
		for role, id := range roles {
			f, err := lib.Open(id)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if f.ID != id {
				t.Errorf("%s %s: %s does not exist (fell back to %s)", name, role, id, f.ID)
			}
		}
	}
	if got := themes["Classic"]["ethernet_hub"]; got != ":/symbols/classic/hub.svg" {
		t.Errorf("Classic ethernet_hub = %s", got)
	}
	if got := themes["Affinity-circle-gray"]["firewall"]; got != ":/symbols/affinity/circle/gray/firewall3.svg" {
		t.Errorf("Affinity-circle-gray firewall = %s", got)
	}
}

// The built-in templates and a new node name GNS3 short ids, which resolve
// by base name to the classic files: those must exist.
func TestTemplateAndNodeDefaultSymbolsResolveToClassicFiles(t *testing.T) {
	lib := New("", nil)
	for _, id := range []string{":/symbols/cloud.svg", ":/symbols/nat.svg", ":/symbols/vpcs_guest.svg",
		":/symbols/ethernet_switch.svg", ":/symbols/hub.svg", ":/symbols/frame_relay_switch.svg",
		":/symbols/atm_switch.svg", ":/symbols/computer.svg"} {
		f, err := lib.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if want := classicPrefix + path.Base(id); f.ID != want {
			t.Errorf("%s resolved to %s, want %s", id, f.ID, want)
		}
	}
	// Clients place labels from the default node's size.
	if w, h := lib.Size(":/symbols/computer.svg"); w != 65 || h != 59 {
		t.Errorf("default node symbol is %d×%d, want 65×59", w, h)
	}
}

// The icons the issue names by device must exist in Classic and in every
// Affinity theme.
func TestCommonDevicesHaveIconsInEveryTheme(t *testing.T) {
	lib := New("", nil)
	classic := []string{"router", "ethernet_switch", "multilayer_switch", "firewall", "server", "computer", "laptop",
		"cloud", "nat", "hub", "access_point", "ip_phone", "printer", "qemu_guest", "docker_guest"}
	affinity := []string{"router", "switch", "switch_multilayer", "firewall", "firewall3", "server", "client",
		"laptop", "cloud", "nat", "hub", "wifi", "ip_phone", "printer", "vm", "docker"}
	var ids []string
	for _, n := range classic {
		ids = append(ids, classicPrefix+n+".svg")
	}
	for _, shape := range []string{"circle", "square"} {
		for _, color := range []string{"blue", "gray", "green", "red"} {
			for _, n := range affinity {
				ids = append(ids, BuiltinPrefix+"affinity/"+shape+"/"+color+"/"+n+".svg")
			}
		}
	}
	for _, id := range ids {
		if _, ok := lib.paths[id]; !ok {
			t.Errorf("no built-in %s", id)
		}
	}
}
