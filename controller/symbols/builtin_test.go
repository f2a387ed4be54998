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
		// GNS3's own classic icons run from the 40×25 phone to the
		// 170×76 cloud.
		w, h, err := lib.Dimensions(s.ID)
		if err != nil || w < 20 || h < 20 || w > 200 || h > 200 {
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

// gns3Classic is every file of GNS3's classic symbol set, with the width
// and height GNS3 measures for it (its SVG's width and height, rounded).
// The GUI places a node's label and link ends by its symbol's size, so a
// project made with GNS3 keeps its layout only if each id is served at
// the same size. nat and qemu_guest are the two whose GNS3 file could not
// be measured here: their sizes are labtap's own drawing (qemu_guest's
// width, 65, is the one GNS3 gives such nodes; the height is the other
// guests').
var gns3Classic = []struct {
	name string
	w, h int
}{
	{"PBX", 51, 48},
	{"PIX_firewall", 66, 45},
	{"access_point", 72, 32},
	{"access_server", 51, 48},
	{"asa", 52, 60},
	{"atm_bridge", 72, 32},
	{"atm_switch", 51, 48},
	{"call_manager", 75, 47},
	{"cloud", 170, 76},
	{"computer", 65, 59},
	{"docker_guest", 65, 59},
	{"dslam", 50, 53},
	{"edge_label_switch_router", 66, 45},
	{"ethernet_switch", 72, 32},
	{"firewall", 66, 45},
	{"frame_relay_switch", 51, 48},
	{"gateway", 66, 56},
	{"hub", 72, 32},
	{"ids", 51, 48},
	{"iosv_l2_virl", 51, 48},
	{"iosv_virl", 66, 56},
	{"ip_phone", 40, 25},
	{"label_switch_router", 66, 56},
	{"lightweight_ap", 72, 32},
	{"multilayer_switch", 51, 48},
	{"nat", 66, 46},
	{"optical_router", 66, 56},
	{"printer", 68, 67},
	{"qemu_guest", 65, 59},
	{"route_switch_processor", 51, 66},
	{"router", 66, 45},
	{"router.awp", 70, 50},
	{"router_firewall", 66, 45},
	{"router_netflow", 66, 45},
	{"server", 49, 70},
	{"sip_server", 40, 60},
	{"traceng", 65, 59},
	{"vbox_guest", 65, 59},
	{"vmware_guest", 65, 59},
	{"voice_access_server", 51, 48},
	{"voice_router", 66, 45},
	{"vpcs_guest", 65, 59},
	{"wlan_controller", 72, 32},
}

// TestEveryGNS3ClassicIDIsServedAtGNS3SizeSoGUILayoutsMatch opens every
// classic id GNS3 has: each must be a symbol of its own (not the fallback
// computer) and measure what GNS3's does, or labels and links of a GNS3
// project land elsewhere. Every classic file labtap has is either one of
// these or listed here as labtap's own.
func TestEveryGNS3ClassicIDIsServedAtGNS3SizeSoGUILayoutsMatch(t *testing.T) {
	lib := New("", nil)
	want := make(map[string]bool)
	for _, c := range gns3Classic {
		id := classicPrefix + c.name + ".svg"
		want[id] = true
		f, err := lib.Open(id)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		f.Close()
		if f.ID != id {
			t.Errorf("%s is not built in: the fallback %s is served", id, f.ID)
			continue
		}
		if w, h, err := lib.Dimensions(id); err != nil || w != c.w || h != c.h {
			t.Errorf("%s measures %d×%d (%v), GNS3's is %d×%d", id, w, h, err, c.w, c.h)
		}
	}
	if len(want) != 43 {
		t.Errorf("the table has %d ids, GNS3's classic set has 43", len(want))
	}
	labtapOwn := map[string]bool{classicPrefix + "laptop.svg": true}
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Theme == "Classic" && !want[s.ID] && !labtapOwn[s.ID] {
			t.Errorf("%s is a classic symbol GNS3 does not have", s.ID)
		}
	}
}
