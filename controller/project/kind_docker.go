package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/labtap/labtap/dockerpolicy"
)

// TypeDocker is GNS3's container node type.
const TypeDocker = "docker"

// dockerKind is the docker entry of the kinds table: one port per adapter,
// eth<n> (custom_adapters may rename them), MACs 02:42:<id>:<n>.
var dockerKind = &kind{
	Type:        TypeDocker,
	ports:       adapterPorts,
	adapters:    dockerAdapters,
	suspendable: true,
	// Spec 3.8: vnc is refused by the agent until it runs an X server.
	consoleTypes: []string{"telnet", "vnc", "http", "https", "none"},
	templateDefaults: func() map[string]any {
		return map[string]any{
			"adapters": 1, "usage": "", "mac_address": "", "start_command": "", "environment": "",
			"console_type": "telnet", "console_auto_start": false, "default_name_format": "{name}-{0}",
			"console_http_port": 80, "console_http_path": "/", "console_resolution": "1024x768",
			"extra_hosts": "", "extra_volumes": []any{}, "custom_adapters": []any{},
			"category": "guest", "symbol": ":/symbols/docker_guest.svg",
		}
	},
	defaults: func(props map[string]any) {
		// Empty template strings are not put into a node's properties
		// (GNS3 leaves them out too): they become the compute's defaults.
		for _, k := range []string{"start_command", "environment", "extra_hosts", "mac_address"} {
			if s, ok := props[k].(string); ok && strings.TrimSpace(s) == "" {
				delete(props, k)
			}
		}
		for k, v := range map[string]any{
			"adapters": 1, "usage": "", "extra_volumes": []any{}, "console_http_port": 80,
			"console_http_path": "/", "console_resolution": "1024x768",
			"start_command": nil, "environment": nil, "extra_hosts": nil,
		} {
			if _, given := props[k]; !given {
				props[k] = v
			}
		}
	},
	check: checkDocker,
}

var (
	resolutionRE = regexp.MustCompile(`^[0-9]+x[0-9]+$`)
)

// checkDocker validates a docker node's properties as GNS3's schema does
// (400), bounded.
func checkDocker(n *Node) error {
	p := n.Properties
	bad := func(format string, a ...any) error {
		return errorf(ErrInvalid, "Node %s: "+format, append([]any{n.Name}, a...)...)
	}
	image, _ := p["image"].(string)
	if image == "" {
		return bad("'image' is a required property of docker nodes")
	}
	if len(image) > 255 {
		return bad("image name is longer than 255 characters")
	}
	adapters, err := intProp(p, "adapters", 1)
	if err != nil || adapters < 0 || adapters > 99 {
		return bad("adapters must be an integer from 0 to 99")
	}
	for _, k := range []string{"start_command", "environment", "extra_hosts", "usage", "console_http_path"} {
		switch v := p[k].(type) {
		case nil:
		case string:
			if len(v) > 64<<10 {
				return bad("%s is longer than 64 KiB", k)
			}
		default:
			return bad("%s must be a string or null", k)
		}
	}
	if v, ok := p["mac_address"].(string); ok && v != "" && !macRE.MatchString(v) {
		return bad("mac_address %q is not a MAC address", v)
	}
	if v, ok := p["console_resolution"].(string); ok && !resolutionRE.MatchString(v) {
		return bad("console_resolution %q is not <width>x<height>", v)
	}
	if port, err := intProp(p, "console_http_port", 80); err != nil || port < 1 || port > 65535 {
		return bad("console_http_port must be 1 to 65535")
	}
	// What the operator's flag allows is checked in checkDockerPolicy:
	// here only what no flag allows.
	return checkDockerPolicy(n, dockerpolicy.Policy{Unsafe: true})
}

// checkDockerPolicy applies dockerpolicy's rule, the agent's, to a docker
// node's privileged, cap_add, extra_volumes and sysctls: 400 for a malformed one,
// 403 for what policy does not allow, 409 for a volume where none may be
// (GNS3's answer).
func checkDockerPolicy(n *Node, policy dockerpolicy.Policy) error {
	p := n.Properties
	bad := func(format string, a ...any) error {
		return errorf(ErrInvalid, "Node %s: "+format, append([]any{n.Name}, a...)...)
	}
	r := dockerpolicy.Request{Node: n.Name}
	switch v := p["privileged"].(type) {
	case nil:
	case bool:
		r.Privileged = v
	default:
		return bad("privileged must be true or false")
	}
	var err error
	if r.CapAdd, err = stringList(p, "cap_add", dockerpolicy.MaxCapAdd); err != nil {
		return bad("cap_add must be a list of at most %d capability names", dockerpolicy.MaxCapAdd)
	}
	if r.ExtraVolumes, err = stringList(p, "extra_volumes", dockerpolicy.MaxVolumes); err != nil {
		return bad("extra_volumes must be a list of at most %d paths", dockerpolicy.MaxVolumes)
	}
	switch v := p["sysctls"].(type) {
	case nil:
	case map[string]any:
		if len(v) > dockerpolicy.MaxSysctls {
			return bad("sysctls must be at most %d", dockerpolicy.MaxSysctls)
		}
		r.Sysctls = make(map[string]string, len(v))
		for k, x := range v {
			s, ok := x.(string)
			if !ok {
				return bad("sysctls: %s must be a string", dockerpolicy.Truncate(k))
			}
			r.Sysctls[k] = s
		}
	default:
		return bad("sysctls must be an object of net.* names to string values")
	}
	if err := policy.Check(r); err != nil {
		kind := ErrConflict
		switch {
		case errors.Is(err, dockerpolicy.ErrUnsafe):
			kind = ErrForbidden
		case errors.Is(err, dockerpolicy.ErrInvalid):
			kind = ErrInvalid
		}
		return &Error{Kind: kind, Msg: err.Error(), Err: err}
	}
	return nil
}

// stringList reads a property that is a list of strings, or null (nil),
// of at most max members.
func stringList(p map[string]any, key string, max int) ([]string, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok || len(list) > max {
		return nil, fmt.Errorf("%s is not a list of at most %d", key, max)
	}
	out := make([]string, len(list))
	for i, x := range list {
		if out[i], ok = x.(string); !ok {
			return nil, fmt.Errorf("%s[%d] is not a string", key, i)
		}
	}
	return out, nil
}

// intProp reads an integer property (JSON numbers arrive as float64).
func intProp(p map[string]any, key string, def int) (int, error) {
	switch v := p[key].(type) {
	case nil:
		return def, nil
	case float64:
		if v != float64(int(v)) {
			return 0, fmt.Errorf("%s is not an integer", key)
		}
		return int(v), nil
	case int:
		return v, nil
	case json.Number:
		i, err := v.Int64()
		return int(i), err
	}
	return 0, fmt.Errorf("%s is not an integer", key)
}

// dockerAdapters lists a docker node's adapters: eth<n>, or the name and
// MAC its custom_adapters entry gives (adapter_type is ignored for docker).
func dockerAdapters(n *Node) ([]Adapter, error) {
	count, err := intProp(n.Properties, "adapters", 1)
	if err != nil || count < 0 || count > 99 {
		return nil, errorf(ErrInvalid, "Node %s: adapters must be an integer from 0 to 99", n.Name)
	}
	out := make([]Adapter, count)
	for i := range out {
		out[i].Name = fmt.Sprintf("eth%d", i)
	}
	for _, raw := range n.CustomAdapters {
		var ca struct {
			AdapterNumber *int   `json:"adapter_number"`
			PortName      string `json:"port_name"`
			MACAddress    string `json:"mac_address"`
		}
		if err := json.Unmarshal(raw, &ca); err != nil || ca.AdapterNumber == nil {
			return nil, errorf(ErrInvalid, "Node %s: custom_adapters entries need an adapter_number", n.Name)
		}
		i := *ca.AdapterNumber
		if i < 0 || i >= count {
			continue // GNS3 ignores entries past the adapters
		}
		if ca.PortName != "" {
			if len(ca.PortName) > 64 {
				return nil, errorf(ErrInvalid, "Node %s: port_name longer than 64 characters", n.Name)
			}
			out[i].Name = ca.PortName
		}
		if ca.MACAddress != "" {
			if !macRE.MatchString(ca.MACAddress) {
				return nil, errorf(ErrInvalid, "Node %s: custom adapter %d: %q is not a MAC address", n.Name, i, ca.MACAddress)
			}
			out[i].MACAddress = strings.ToLower(ca.MACAddress)
		}
	}
	for i := range out {
		out[i].ShortName = out[i].Name
	}
	return out, nil
}
