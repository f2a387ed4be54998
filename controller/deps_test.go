package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPackagesKeepTheirImportRules enforces the "must not import" column of
// the package map (style/go-style.md section 3, and README): each package's
// direct imports must avoid the listed paths, for the reason given.
func TestPackagesKeepTheirImportRules(t *testing.T) {
	const mod = "github.com/labtap/labtap/"
	rules := []struct {
		pkg     string
		banned  []string
		why     string
		allowed []string // exceptions to the bans
	}{
		{"capspec", []string{mod, "github.com/", "golang.org/"}, "the capture vocabulary is shared by every side: standard library only", nil},
		{"proto", []string{mod, "github.com/", "golang.org/"}, "the wire contract is importable by anyone: standard library and the capture vocabulary only", []string{mod + "capspec"}},
		{"captures", []string{mod + "controller", mod + "agent", mod + "proto", "net/http", "github.com/gofiber/"}, "capture writing knows files and writers, not transports or projects", nil},
		{"controller/api", []string{"github.com/hashicorp/go-retryablehttp", "github.com/google/gopacket", mod + "agent/"}, "the API maps HTTP to the service; agent calls and packets live elsewhere", nil},
		{"controller/project", []string{"github.com/gofiber/", "net/http", mod + "proto", "github.com/hashicorp/go-retryablehttp", mod + "controller/compute", mod + "captures"}, "the domain knows nothing of transport, wire types or capture files", nil},
		{"controller/compute", []string{"github.com/gofiber/", mod + "controller/api", mod + "agent/"}, "the agent client speaks proto over HTTP, nothing more", nil},
		{"controller/symbols", []string{"github.com/gofiber/", "github.com/valyala/", "net/http", mod + "controller/api", mod + "agent/"}, "the icon library is files and images, served by the API", nil},
		{"controller/labcapture", []string{"github.com/gofiber/", "net/http", mod + "proto", mod + "agent/", mod + "controller/compute", mod + "controller/api"}, "a project capture merges the streams the domain hands it", nil},
		{"controller/notify", []string{"github.com/gofiber/", "net/http", mod + "controller/", mod + "agent/"}, "the hub moves bytes between publishers and listeners, nothing more", nil},
		{"controller/topology", []string{"github.com/gofiber/", "net/http", mod + "proto", mod + "agent/"}, "project files are domain data on disk", nil},
		{"agent/api", []string{"github.com/gofiber/", mod + "controller/", "github.com/hashicorp/go-retryablehttp"}, "the agent serves net/http and never calls the controller's code", nil},
		{"agent/host", []string{"net/http", "github.com/gofiber/", mod + "controller/"}, "the agent's state is transport-free", nil},
		{"agent/bridge", []string{"net/http", mod + "proto", mod + "captures", mod + "agent/node", "github.com/google/gopacket/pcap"}, "the relay moves frames in pure Go; a capture is only a Tap, BPF comes compiled", nil},
		{"captures", []string{"github.com/google/gopacket/pcap"}, "writing captures needs no libpcap", nil},
		{"internal/cli", []string{mod}, "flag parsing serves both binaries and knows neither", nil},
		{"agent/node", []string{"net/http", mod + "proto", mod + "agent/bridge"}, "node runners hand the bridge an address, not a type", nil},
	}
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, mod+r.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", r.pkg, err)
			}
			for _, imp := range strings.Fields(string(out)) {
				if slices.Contains(r.allowed, imp) {
					continue
				}
				for _, b := range r.banned {
					// A ban names a package and its subpackages ("x/pcap" is
					// not "x/pcapgo"); one ending in "/" names a whole tree.
					if imp == b || strings.HasPrefix(imp, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(imp, b) {
						t.Errorf("%s imports %s: %s", r.pkg, imp, r.why)
					}
				}
			}
		})
	}
}
