package docker

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kballard/go-shellquote"

	"github.com/labtap/labtap/dockerpolicy"
)

// Properties are a docker node's GNS3 properties, as the
// controller sends them in NodeSpec.Properties, plus labtap's two
// extensions privileged and cap_add, and sysctls, which
// dockerpolicy.Policy.Check rules on.
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
	// Sysctls are labtap's third extension: net.* sysctls the Engine sets
	// in the node's network namespace as it starts (/proc/sys is
	// read-only inside).
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

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
		p.CapAdd = dockerpolicy.DefaultCapAdd
	}
	return p
}

// request is what the node asks of the host, for dockerpolicy's rule.
func (p Properties) request(node string) dockerpolicy.Request {
	return dockerpolicy.Request{Node: node, Privileged: p.Privileged, CapAdd: p.CapAdd, ExtraVolumes: p.ExtraVolumes, Sysctls: p.Sysctls}
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

// Variable is one of the project's variables.
type Variable struct{ Name, Value string }

// env returns the container's environment from the project's variables
// and the environment property, as GNS3 builds it: each variable as
// name=value, its value's ${name}s replaced by the variables' values; then
// each environment line, blank lines skipped, GNS3_* dropped (GNS3 keeps
// those for itself), ${name}s replaced, and %vm-name% (quoted), %vm-id%,
// %project-id% and %project-path% (quoted) substituted. Lines without a
// name before '=' are reported in bad.
func (p Properties) env(vars []Variable, node nodeNames) (lines, bad []string) {
	expand := func(s string) string {
		for _, v := range vars {
			s = strings.ReplaceAll(s, "${"+v.Name+"}", v.Value)
		}
		return s
	}
	for _, v := range vars {
		lines = append(lines, v.Name+"="+expand(v.Value))
	}
	if p.Environment == nil {
		return lines, nil
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
	subst := strings.NewReplacer("%vm-name%", quote(node.name), "%vm-id%", node.id,
		"%project-id%", node.projectID, "%project-path%", quote(node.projectPath))
	for line := range strings.SplitSeq(*p.Environment, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "=")
		if strings.TrimSpace(name) == "" {
			bad = append(bad, line)
			continue
		}
		if strings.HasPrefix(line, "GNS3_") {
			continue
		}
		lines = append(lines, subst.Replace(expand(line)))
	}
	return lines, bad
}

// nodeNames are what %vm-name%, %vm-id%, %project-id% and %project-path%
// stand for in a node's environment.
type nodeNames struct{ name, id, projectID, projectPath string }

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

// volumes returns the node's persistent directories: /etc/network,
// the image's VOLUMEs and extra_volumes, cleaned, a more general path
// swallowing those below it (/etc takes /etc/network), in order. Each is
// kept in the node's directory under its own path, so its content survives
// a new container. An extra volume that dockerpolicy.Volume refuses is refused
// with its message; an image's is just not kept.
func (p Properties) volumes(image []string) ([]string, error) {
	if len(p.ExtraVolumes) > dockerpolicy.MaxVolumes {
		return nil, fmt.Errorf("at most %d extra volumes", dockerpolicy.MaxVolumes)
	}
	all := append([]string{"/etc/network"}, image...)
	all = append(all, p.ExtraVolumes...)
	var clean []string
	for i, v := range all {
		c, err := dockerpolicy.Volume(v)
		if err != nil {
			if i < 1+len(image) {
				continue // an image's odd VOLUME is just not kept
			}
			return nil, err
		}
		clean = append(clean, c)
	}
	var out []string
	for _, v := range clean {
		if !slices.ContainsFunc(clean, func(o string) bool { return o != v && strings.HasPrefix(v, o+"/") }) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
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
