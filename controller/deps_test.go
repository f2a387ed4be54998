package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var updatePackageMap = flag.Bool("update-package-map", false, "rewrite docs/contributing.md's package map from the code and the rules in deps_test.go")

const mod = "github.com/labtap/labtap/"

// rule is one row of the package map: the labtap packages pkg imports (all
// of them, no more: an arrow not listed here fails, as does one listed
// here that the code no longer draws), what it must not depend on at any
// depth (for binaries: what they must not link), and what it must not
// import itself though a package it uses may.
type rule struct {
	pkg     string
	imports []string // labtap packages, relative to the module
	banned  []string // transitive
	direct  []string // banned in pkg's own imports only
	why     string
}

var (
	fiber     = "github.com/gofiber/"
	retryable = "github.com/hashicorp/go-retryablehttp"
	libpcap   = "github.com/google/gopacket/pcap"
)

// rules is the package map: what each package may import and must not.
// docs/contributing.md's table is made from it and the code: go test ./controller -run PackageMap -update-package-map.
var rules = []rule{
	{pkg: "capspec", banned: []string{mod, "github.com/", "golang.org/"}, why: "the capture vocabulary is shared by every side: standard library only"},
	{pkg: "proto", imports: []string{"capspec"}, banned: []string{mod, "github.com/", "golang.org/"}, why: "the wire contract is importable by anyone: standard library and the capture vocabulary only"},
	{pkg: "dockerpolicy", banned: []string{mod, "github.com/", "golang.org/"}, why: "what a docker node may ask of its host, one rule for the controller and the agent: standard library only"},
	{pkg: "captures", imports: []string{"capspec"}, banned: []string{mod + "controller", mod + "agent", mod + "proto", "net/http", fiber, libpcap}, why: "capture writing knows files and writers, not transports, projects or libpcap"},
	{pkg: "controller", imports: []string{"agent/server", "controller/access", "controller/api", "controller/compute", "controller/labcapture", "controller/notify", "controller/project", "controller/symbols", "controller/topology", "controller/web", "internal/cli", "internal/netguard", "internal/pki", "internal/sandbox", "metrics", "pcapfilter"},
		direct: []string{mod + "agent/host", mod + "agent/api", mod + "agent/bridge", mod + "agent/node"}, why: "the controller runs its local agent as a whole (agent/server), never its parts"},
	{pkg: "controller/api", imports: []string{"capspec", "controller/access", "controller/appliances", "controller/archive", "controller/compute", "controller/notify", "controller/project", "controller/symbols", "controller/topology", "internal/atomicfile", "internal/netguard", "metrics", "proto"},
		banned: []string{"github.com/google/gopacket", mod + "agent/"}, direct: []string{retryable}, why: "the API maps HTTP to the service; agent calls (compute) and packets live elsewhere"},
	{pkg: "controller/project", imports: []string{"capspec", "controller/archive", "dockerpolicy", "internal/atomicfile", "internal/confined"}, banned: []string{fiber, "net/http", mod + "proto", retryable, mod + "controller/compute", mod + "captures"}, why: "the domain knows nothing of transport, wire types or capture files"},
	{pkg: "controller/access", banned: []string{fiber, "net/http", mod + "controller/", mod + "agent/", mod + "proto"}, why: "users, groups, roles and the ACL in SQLite; the routes that serve them are the API's"},
	{pkg: "controller/appliances", imports: []string{"controller/compute", "controller/symbols"}, banned: []string{fiber, mod + "agent/", mod + "controller/api"}, why: "the appliance catalogue is embedded files and what the computes can run; the route is the API's"},
	{pkg: "controller/compute", imports: []string{"capspec", "controller/project", "internal/atomicfile", "internal/pki", "proto"}, banned: []string{fiber, mod + "controller/api", mod + "agent/"}, why: "the agent client speaks proto over HTTP, nothing more"},
	{pkg: "controller/labcapture", imports: []string{"capspec", "controller/project"}, banned: []string{fiber, "net/http", mod + "proto", mod + "agent/", mod + "controller/compute", mod + "controller/api", retryable}, why: "a project capture merges the streams the domain hands it"},
	{pkg: "controller/archive", imports: []string{"internal/atomicfile"}, banned: []string{fiber, "github.com/valyala/", "net/http", mod + "controller/", mod + "agent/", mod + "proto"}, why: "archives are zips, files and the project file's JSON; projects and HTTP live elsewhere"},
	{pkg: "controller/topology", imports: []string{"controller/project", "internal/atomicfile"}, banned: []string{fiber, "net/http", mod + "proto", mod + "agent/"}, why: "project files are domain data on disk"},
	{pkg: "controller/notify", banned: []string{fiber, "net/http", mod + "controller/", mod + "agent/"}, why: "the hub moves bytes between publishers and listeners, nothing more"},
	{pkg: "controller/symbols", imports: []string{"internal/atomicfile"}, banned: []string{fiber, "github.com/valyala/", "net/http", mod + "controller/api", mod + "agent/"}, why: "the icon library is files and images, served by the API"},
	{pkg: "controller/symbols/internal/icons", banned: []string{mod}, why: "the built-in icons' drawings, for go generate and the tests"},
	{pkg: "controller/symbols/internal/gen", imports: []string{"controller/symbols/internal/icons"}, why: "go generate's program that writes the built-in SVGs"},
	{pkg: "controller/web", imports: []string{"capspec", "pcapfilter"}, banned: []string{fiber, "net/http", mod + "controller/", mod + "agent/host", mod + "agent/bridge"}, why: "the capture view is a page and a decoder; routes and projects are the API's"},
	{pkg: "metrics", banned: []string{fiber, mod + "controller/", mod + "agent/"}, why: "shared metric plumbing knows neither binary"},
	{pkg: "agent", imports: []string{"agent/bridge", "agent/server", "internal/cli", "internal/netguard", "internal/pki", "internal/sandbox", "pcapfilter"}, banned: []string{mod + "controller/", fiber, retryable}, why: "the agent binary carries nothing of the controller"},
	{pkg: "agent/server", imports: []string{"agent/api", "agent/bridge", "agent/host", "internal/atomicfile", "internal/netguard", "internal/pki", "internal/sandbox", "metrics", "proto"}, banned: []string{mod + "controller/", fiber}, why: "an agent, whole, for the agent command and the controller's local agent"},
	{pkg: "agent/api", imports: []string{"captures", "metrics", "proto"}, banned: []string{fiber, mod + "controller/", retryable}, why: "the agent serves net/http and never calls the controller's code"},
	{pkg: "agent/host", imports: []string{"agent/bridge", "agent/imagesum", "agent/node", "agent/node/docker", "capspec", "captures", "dockerpolicy", "internal/atomicfile", "internal/confined", "internal/sandbox", "pcapfilter", "proto"}, banned: []string{fiber, mod + "controller/"},
		direct: []string{"net/http"}, why: "the agent's state is transport-free (the Docker Engine's client, under agent/node/docker, speaks HTTP to the Engine)"},
	{pkg: "agent/bridge", banned: []string{"net/http", mod + "proto", mod + "captures", mod + "agent/node", libpcap}, why: "the relay moves frames in pure Go; a capture is only a Tap, BPF comes compiled"},
	{pkg: "agent/node", imports: []string{"agent/imagesum", "internal/atomicfile", "internal/kvm", "internal/sandbox"}, banned: []string{"net/http", mod + "proto", mod + "agent/bridge"}, why: "node runners hand the bridge an address, not a type"},
	{pkg: "agent/node/docker", imports: []string{"agent/node", "dockerpolicy"}, banned: []string{mod + "proto", mod + "agent/bridge"}, direct: []string{"net/http"},
		why: "the docker runner hands the host an interface index, not a port; only the Engine's client speaks HTTP"},
	{pkg: "agent/imagesum", imports: []string{"internal/atomicfile"}, banned: []string{mod + "agent/", mod + "controller/", mod + "proto"}, why: "image checksums, cached by file version and hashed in the background: files only"},
	{pkg: "agent/node/docker/init", banned: []string{mod}, why: "the containers' static PID 1: nothing of the agent"},
	{pkg: "pcapfilter", banned: []string{mod}, why: "libpcap's BPF compiler (cgo), kept in one place"},
	{pkg: "bench", imports: []string{"proto"}, banned: []string{mod + "agent/", mod + "controller/", mod + "captures"}, why: "the benchmark drives a real agent process over its API: it links none of it"},
	{pkg: "soak", banned: []string{mod}, why: "the soak test drives real controller and agent processes over HTTP: it links none of them"},
	{pkg: "internal/cli", banned: []string{mod}, why: "flag parsing serves both binaries and knows neither"},
	{pkg: "internal/netguard", banned: []string{mod}, why: "listeners that outlive descriptor exhaustion, for both binaries"},
	{pkg: "internal/pki", imports: []string{"internal/atomicfile"}, banned: []string{fiber, "net/http", mod + "controller/", mod + "agent/", mod + "proto"}, why: "the private CA, certificates and TLS listeners, for both binaries; HTTP is its users'"},
	{pkg: "internal/atomicfile", banned: []string{mod}, why: "durable file replacement, for anyone"},
	{pkg: "internal/confined", imports: []string{"internal/atomicfile"}, banned: []string{mod + "agent/", mod + "controller/", mod + "proto"}, why: "files named by clients, kept inside one directory, for controller and agent"},
	{pkg: "internal/kvm", banned: []string{mod}, why: "KVM's self-test: ioctls on /dev/kvm, nothing of the agent"},
	{pkg: "internal/sandbox", banned: []string{mod}, why: "node programs confined to their folder, for both binaries' agents"},
	{pkg: "internal/testprogress", banned: []string{mod}, why: "scripts/test's reader of go test -json"},
	{pkg: "internal/gns3wizard", banned: []string{mod}, why: "for tests only: the body GNS3's new-template wizard sends for an appliance"},
	{pkg: "internal/testenv", banned: []string{mod}, why: "for tests only: no package's code imports it"},
	{pkg: "docker", why: "tests only: the images and the compose file"},
}

// testCrossings are the arrows only tests may draw, each with its reason.
// One not listed fails, as does one listed that no test draws any more.
var testCrossings = []struct{ from, to, why string }{
	{"controller", "agent/node", "end-to-end tests speak to VPCS consoles as a user would"},
	{"controller/api", "agent/api", "contract tests run the real agent API on httptest"},
	{"controller/api", "agent/host", "contract tests run a real agent state behind it"},
	{"controller/api", "agent/node", "... with node.Fake runners"},
	{"controller/api", "controller/web", "the OpenAPI test registers the capture view's routes with the real view"},
	{"agent/api", "agent/host", "the API's tests serve a real agent state"},
	{"agent/api", "agent/node", "... with node.Fake runners"},
	{"agent/api", "agent/imagesum", "the image listing tests count the checksums being computed"},
	{"agent/bridge", "captures", "benchmarks tap the relay into a real capture file"},
	{"controller/symbols", "controller/symbols/internal/icons", "the embedded SVGs are what the generator draws"},
	{"docker", "agent/node", "the lab test speaks to VPCS consoles"},
	{"controller/api", "internal/gns3wizard", "the appliance tests install templates as GNS3's wizard does"},
	{"controller/api", "pcapfilter", "its tests run a real agent state, whose filters compile in this test binary (TestMain calls pcapfilter.Main)"},
	{"agent/api", "pcapfilter", "... likewise for the agent API's tests"},
	{"agent/server", "pcapfilter", "... and the assembled agent's"},
	{"controller", "internal/gns3wizard", "the appliance end-to-end tests install templates as GNS3's wizard does"},
	{"controller", "internal/kvm", "the QEMU end-to-end test asks KVM's self-test what the local agent should choose"},
	{"controller/api", "internal/pki", "the HTTPS benchmark and the join tests serve and sign as the controller does"},
}

type pkgInfo struct {
	main                 bool // a command
	imports, testImports []string
}

// loadGraph lists every package the module's packages and tests depend on,
// in one go list call.
func loadGraph(t *testing.T) map[string]pkgInfo {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-test=false", "-f",
		`{{.ImportPath}}|{{.Name}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "github.com/labtap/labtap/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string]pkgInfo{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		g[f[0]] = pkgInfo{main: f[1] == "main", imports: strings.Fields(f[2]), testImports: strings.Fields(f[3])}
	}
	return g
}

func matches(imp, ban string) bool {
	// A ban names a package and its subpackages ("x/pcap" is not
	// "x/pcapgo"); one ending in "/" names a whole tree.
	return imp == ban || strings.HasPrefix(imp, ban+"/") || strings.HasSuffix(ban, "/") && strings.HasPrefix(imp, ban)
}

// chains returns, for every package pkg depends on, the import chain that
// reaches it first.
func chains(g map[string]pkgInfo, pkg string) map[string][]string {
	seen := map[string][]string{pkg: {pkg}}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p].imports {
			if _, ok := seen[imp]; !ok {
				seen[imp] = append(slices.Clone(seen[p]), imp)
				queue = append(queue, imp)
			}
		}
	}
	delete(seen, pkg)
	return seen
}

func local(imports []string) []string {
	var l []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, mod); ok {
			l = append(l, rel)
		}
	}
	slices.Sort(l)
	return slices.Compact(l)
}

// TestPackagesKeepTheirImportRules checks the package map against the code:
// each package imports exactly the labtap packages its rule lists, depends
// at no depth on what it bans (so each binary links nothing its rule bans),
// and its tests cross only the lines testCrossings allows.
func TestPackagesKeepTheirImportRules(t *testing.T) {
	g := loadGraph(t)
	byPkg := map[string]rule{}
	for _, r := range rules {
		byPkg[r.pkg] = r
	}
	for p := range g {
		if rel, ok := strings.CutPrefix(p, mod); ok {
			if _, ok := byPkg[rel]; !ok {
				t.Errorf("package %s has no rule in deps_test.go (nor row in docs/contributing.md's package map)", rel)
			}
		}
	}
	crossings := map[[2]string]bool{}
	for _, c := range testCrossings {
		crossings[[2]string{c.from, c.to}] = false
	}
	for _, r := range rules {
		info, ok := g[mod+r.pkg]
		if !ok {
			t.Errorf("rule for %s, which is no package of the module", r.pkg)
			continue
		}
		if got := local(info.imports); !slices.Equal(got, r.imports) {
			t.Errorf("%s imports %q; its rule allows %q: %s (change the rule on purpose, then -update-package-map)", r.pkg, got, r.imports, r.why)
		}
		for _, imp := range info.imports {
			for _, b := range r.direct {
				if matches(imp, b) {
					t.Errorf("%s imports %s: %s", r.pkg, imp, r.why)
				}
			}
		}
		deps := chains(g, mod+r.pkg)
		for dep, chain := range deps {
			if slices.Contains(r.imports, strings.TrimPrefix(dep, mod)) {
				continue // an arrow the rule draws on purpose passes its bans (not what it depends on)
			}
			for _, b := range r.banned {
				if matches(dep, b) && dep != mod+r.pkg {
					t.Errorf("%s depends on %s (%s): %s", r.pkg, dep, strings.Join(chain, " → "), r.why)
				}
			}
		}
		if r.pkg != "internal/testenv" && slices.Contains(local(info.imports), "internal/testenv") {
			t.Errorf("%s imports internal/testenv outside its tests", r.pkg)
		}
		for _, to := range local(info.testImports) {
			if to == r.pkg || to == "internal/testenv" || slices.Contains(r.imports, to) {
				continue
			}
			key := [2]string{r.pkg, to}
			if _, ok := crossings[key]; !ok {
				t.Errorf("%s's tests import %s, a crossing testCrossings does not list", r.pkg, to)
			}
			crossings[key] = true
		}
	}
	for c, used := range crossings {
		if !used {
			t.Errorf("testCrossings lists %s → %s, which no test draws any more", c[0], c[1])
		}
	}
}

// TestTheDocsPackageMapIsTheCode checks that docs/contributing.md's package map
// has one row per package, in the rules' order, with the imports and bans
// of the rules; -update-package-map rewrites those columns (the "owns"
// column is written by hand).
func TestTheDocsPackageMapIsTheCode(t *testing.T) {
	readme, err := os.ReadFile("../docs/contributing.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	g := loadGraph(t)
	const header = "| package | owns | imports | must not import |\n|---|---|---|---|\n"
	start := strings.Index(text, "## Package map\n")
	if start < 0 {
		t.Fatal("docs/contributing.md has no \"## Package map\"")
	}
	tableStart := strings.Index(text[start:], "\n|")
	if tableStart < 0 {
		t.Fatal("docs/contributing.md's package map has no table")
	}
	tableStart += start + 1
	tableEnd := tableStart
	for tableEnd < len(text) && text[tableEnd] == '|' {
		tableEnd += strings.IndexByte(text[tableEnd:], '\n') + 1
	}
	owns := map[string]string{}
	for line := range strings.Lines(text[tableStart:tableEnd]) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.Trim(strings.TrimSpace(cells[0]), "`"), "`")
		owns[name] = strings.TrimSpace(cells[1])
	}
	var b strings.Builder
	b.WriteString(header)
	for _, r := range rules {
		name := "`" + r.pkg + "`"
		if g[mod+r.pkg].main {
			name += " (main)"
		}
		o := owns[r.pkg]
		if o == "" {
			t.Errorf("docs/contributing.md's package map says nothing of what %s owns", r.pkg)
			o = "TODO: what it owns"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, o, list(r.imports, nil), list(r.banned, r.direct))
	}
	want := b.String()
	if got := text[tableStart:tableEnd]; got != want {
		if *updatePackageMap {
			if err := os.WriteFile("../docs/contributing.md", []byte(text[:tableStart]+want+text[tableEnd:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/contributing.md's package map is not the code's; run go test ./controller -run PackageMap -update-package-map. Want:\n%s", want)
	}
}

// list renders package paths for the package map: labtap's relative, "/" for a
// whole tree, "(direct)" for bans of the package's own imports.
func list(paths, direct []string) string {
	var out []string
	show := func(p string) string {
		switch {
		case p == mod:
			return "anything of labtap"
		case strings.HasPrefix(p, mod):
			return "`" + strings.TrimPrefix(p, mod) + "`"
		}
		return "`" + p + "`"
	}
	for _, p := range paths {
		out = append(out, show(p))
	}
	for _, p := range direct {
		out = append(out, show(p)+" (itself)")
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}
