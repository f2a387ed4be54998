package symbols

// roles maps each role of GET /v2/default_symbols (the node types a GNS3
// client draws by default) to its file in the Classic theme and in the
// Affinity themes.
var roles = []struct{ role, classic, affinity string }{
	{"cloud", "cloud.svg", "cloud.svg"},
	{"nat", "nat.svg", "nat.svg"},
	{"ethernet_switch", "ethernet_switch.svg", "switch.svg"},
	{"ethernet_hub", "hub.svg", "hub.svg"},
	{"frame_relay_switch", "frame_relay_switch.svg", "isdn.svg"},
	{"atm_switch", "atm_switch.svg", "atm.svg"},
	{"router", "router.svg", "router.svg"},
	{"multilayer_switch", "multilayer_switch.svg", "switch_multilayer.svg"},
	{"firewall", "firewall.svg", "firewall3.svg"},
	{"computer", "computer.svg", "client.svg"},
	{"vpcs_guest", "vpcs_guest.svg", "client.svg"},
	{"qemu_guest", "qemu_guest.svg", "client_vm.svg"},
	{"vbox_guest", "vbox_guest.svg", "virtualbox.svg"},
	{"vmware_guest", "vmware_guest.svg", "vmware.svg"},
	{"docker_guest", "docker_guest.svg", "docker.svg"},
}

// affinityThemes are the Affinity themes of default_symbols, with their
// directory. The green directories exist but are not themes there.
var affinityThemes = []struct{ name, dir string }{
	{"Affinity-square-blue", "affinity/square/blue/"},
	{"Affinity-square-red", "affinity/square/red/"},
	{"Affinity-square-gray", "affinity/square/gray/"},
	{"Affinity-circle-blue", "affinity/circle/blue/"},
	{"Affinity-circle-red", "affinity/circle/red/"},
	{"Affinity-circle-gray", "affinity/circle/gray/"},
}

// quirkTheme and quirkRole: GNS3 spells the frame relay role
// "frame_relay_switch.svg" in this theme only (its bug 19). Clients
// written against GNS3 may look the misspelt key up and clients written
// from the documentation the right one, so that theme carries both, to
// the same symbol: the fix, and compatibility.
const (
	quirkTheme = "Affinity-square-blue"
	quirkRole  = "frame_relay_switch"
)

// DefaultSymbols returns the symbol ids each theme draws each role with:
// theme name → role → id, every id a built-in symbol. The caller owns the
// maps.
func DefaultSymbols() map[string]map[string]string {
	out := make(map[string]map[string]string, 1+len(affinityThemes))
	classic := make(map[string]string, len(roles))
	for _, r := range roles {
		classic[r.role] = classicPrefix + r.classic
	}
	out["Classic"] = classic
	for _, t := range affinityThemes {
		m := make(map[string]string, len(roles)+1)
		for _, r := range roles {
			m[r.role] = BuiltinPrefix + t.dir + r.affinity
		}
		if t.name == quirkTheme {
			m[quirkRole+".svg"] = m[quirkRole]
		}
		out[t.name] = m
	}
	return out
}
