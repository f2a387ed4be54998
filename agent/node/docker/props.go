package docker

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kballard/go-shellquote"
)

// Properties are a docker node's GNS3 properties (spec 3.1), as the
// controller sends them in NodeSpec.Properties, plus labtap's two
// extensions privileged and cap_add (3.5).
type Properties struct {
	Image             string   `json:"image"`
	Adapters          *int     `json:"adapters,omitempty"`
	StartCommand      *string  `json:"start_command"`
	Environment       *string  `json:"environment"`
	ExtraHosts        *string  `json:"extra_hosts"`
	ExtraVolumes      []string `json:"extra_volumes"`
	MACAddress        string   `json:"mac_address,omitempty"`
	ConsoleHTTPPort   int      `json:"console_http_port,omitempty"`
	ConsoleHTTPPath   string   `json:"console_http_path,omitempty"`
	ConsoleResolution string   `json:"console_resolution,omitempty"`
	Aux               int      `json:"aux,omitempty"`
	Usage             string   `json:"usage"`
	Privileged        bool     `json:"privileged,omitempty"`
	CapAdd            []string `json:"cap_add,omitempty"`
}

// DefaultCaps are the capabilities a container gets instead of GNS3's
// --privileged: enough for FRR's OSPF and BGP (spec 3.5, verified).
var DefaultCaps = []string{"NET_ADMIN", "NET_RAW", "SYS_ADMIN"}

// withDefaults fills what the node did not say, as GNS3's compute does.
func (p Properties) withDefaults() Properties {
	if p.Adapters == nil {
		one := 1
		p.Adapters = &one
	}
	if p.Image != "" && !strings.Contains(p.Image[strings.LastIndex(p.Image, "/")+1:], ":") && !strings.Contains(p.Image, "@") {
		p.Image += ":latest"
	}
	for _, s := range []**string{&p.StartCommand, &p.Environment, &p.ExtraHosts} {
		if *s != nil && strings.TrimSpace(**s) == "" {
			*s = nil
		}
	}
	if p.ExtraVolumes == nil {
		p.ExtraVolumes = []string{}
	}
	if p.ConsoleHTTPPort == 0 {
		p.ConsoleHTTPPort = 80
	}
	if p.ConsoleHTTPPath == "" {
		p.ConsoleHTTPPath = "/"
	}
	if p.ConsoleResolution == "" {
		p.ConsoleResolution = "1024x768"
	}
	if p.CapAdd == nil {
		p.CapAdd = DefaultCaps
	}
	return p
}

// command splits start_command with POSIX shell rules; nil when unset.
func (p Properties) command() ([]string, error) {
	if p.StartCommand == nil {
		return nil, nil
	}
	args, err := shellquote.Split(*p.StartCommand)
	if err != nil {
		return nil, fmt.Errorf("Invalid start command '%s': %v", *p.StartCommand, err)
	}
	return args, nil
}

// env returns the environment lines of the environment property: blank
// lines skipped, GNS3_* dropped (GNS3 keeps those for itself), and lines
// without a name before '=' reported in bad.
func (p Properties) env() (vars, bad []string) {
	if p.Environment == nil {
		return nil, nil
	}
	for line := range strings.SplitSeq(*p.Environment, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "=")
		if strings.TrimSpace(name) == "" {
			bad = append(bad, line)
			continue
		}
		if strings.HasPrefix(name, "GNS3_") {
			continue
		}
		vars = append(vars, line)
	}
	return vars, bad
}

// hosts returns extra_hosts as /etc/hosts lines ("ip<TAB>name"), split on
// the first ':' so that IPv6 addresses work (GNS3 splits on every ':').
func (p Properties) hosts() (string, error) {
	if p.ExtraHosts == nil {
		return "", nil
	}
	var b strings.Builder
	for line := range strings.SplitSeq(*p.ExtraHosts, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, ip, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(ip) == "" {
			return "", fmt.Errorf("Can't apply `ExtraHosts`, wrong format: %s", *p.ExtraHosts)
		}
		fmt.Fprintf(&b, "%s\t%s\n", strings.TrimSpace(ip), strings.TrimSpace(name))
	}
	return b.String(), nil
}

// volumes checks extra_volumes.
func (p Properties) volumes() error {
	for _, v := range p.ExtraVolumes {
		if !strings.HasPrefix(v, "/") || strings.Contains(v, "..") {
			return fmt.Errorf("Persistent volume '%s' has invalid format. It must start with a '/' and not contain '..'.", v)
		}
	}
	return nil
}

var notHostname = regexp.MustCompile(`[^A-Za-z0-9-]+`)

// hostname makes a node name a valid RFC 1123 host name label.
func hostname(name string) string {
	h := strings.Trim(notHostname.ReplaceAllString(name, "-"), "-")
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	if h == "" {
		return "node"
	}
	return h
}

// maxEthernet is GNS3_MAX_ETHERNET for n adapters: the last interface the
// init waits for; empty for none (GNS3 gives "eth-1", which hangs its init).
func maxEthernet(n int) string {
	if n <= 0 {
		return ""
	}
	return "eth" + strconv.Itoa(n-1)
}
