package project

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FilterParam is one parameter of a link filter, as available_filters
// describes it.
type FilterParam struct {
	Name     string
	Type     string // "int" or "text"
	Min, Max int    // for "int"
	Unit     string // for "int"
}

// FilterType is one filter a link's relay applies.
type FilterType struct {
	Type, Name, Description string
	Params                  []FilterParam
}

// Filters is the catalogue of link filters, in GNS3's order: what
// available_filters returns, and what the agents' relay implements.
var Filters = []FilterType{
	{"frequency_drop", "Frequency drop", "It will drop everything with a -1 frequency, drop every Nth packet with a positive frequency, or drop nothing",
		[]FilterParam{{Name: "Frequency", Type: "int", Min: -1, Max: 32767, Unit: "th packet"}}},
	{"packet_loss", "Packet loss", "The percentage represents the chance for a packet to be lost",
		[]FilterParam{{Name: "Chance", Type: "int", Min: 0, Max: 100, Unit: "%"}}},
	{"delay", "Delay", "Delay packets in milliseconds. You can add jitter in milliseconds (+/-) of the delay",
		[]FilterParam{{Name: "Latency", Type: "int", Min: 0, Max: 32767, Unit: "ms"}, {Name: "Jitter (-/+)", Type: "int", Min: 0, Max: 32767, Unit: "ms"}}},
	{"corrupt", "Corrupt", "The percentage represents the chance for a packet to be corrupted",
		[]FilterParam{{Name: "Chance", Type: "int", Min: 0, Max: 100, Unit: "%"}}},
	{"bpf", "Berkeley Packet Filter (BPF)", "This filter will drop any packet matching a BPF expression. Put one expression per line",
		[]FilterParam{{Name: "Filters", Type: "text"}}},
}

// maxBPF bounds the text of a bpf filter.
const maxBPF = 64 << 10

// normalizeFilters checks a client's filters against the catalogue and
// returns them in GNS3's normal form: numbers as integers
// (numeric strings, floats and booleans converted as GNS3 does), text
// trimmed, and a filter removed when its list is empty or it would do
// nothing (a single value of 0, an empty expression, a delay of 0 with no
// jitter). Unlike GNS3, unknown filter types, wrong shapes and values out
// of range are refused (400), and a delay of 0 with a jitter is kept.
func normalizeFilters(in map[string][]any) (map[string][]any, error) {
	out := make(map[string][]any, len(in))
	for name, values := range in {
		i := slices.IndexFunc(Filters, func(f FilterType) bool { return f.Type == name })
		if i < 0 {
			return nil, errorf(ErrInvalid, "Unknown filter %q: available filters are frequency_drop, packet_loss, delay, corrupt and bpf", name)
		}
		f := Filters[i]
		if len(values) == 0 {
			continue
		}
		if len(values) > len(f.Params) {
			return nil, errorf(ErrInvalid, "Filter %s takes at most %d value(s), got %d", name, len(f.Params), len(values))
		}
		norm := make([]any, 0, len(values))
		for j, v := range values {
			p := f.Params[j]
			if p.Type == "text" {
				s, ok := v.(string)
				if !ok {
					return nil, errorf(ErrInvalid, "Filter %s: %s must be text", name, p.Name)
				}
				s = strings.TrimSpace(s)
				if len(s) > maxBPF {
					return nil, errorf(ErrInvalid, "Filter %s: text over %d bytes", name, maxBPF)
				}
				norm = append(norm, s)
				continue
			}
			n, err := filterInt(v)
			if err != nil {
				return nil, errorf(ErrInvalid, "Filter %s: %s %v", name, p.Name, err)
			}
			if n < p.Min || n > p.Max {
				return nil, errorf(ErrInvalid, "Filter %s: %s %d is out of range %d to %d", name, p.Name, n, p.Min, p.Max)
			}
			norm = append(norm, n)
		}
		if doesNothing(name, norm) {
			continue
		}
		out[name] = norm
	}
	return out, nil
}

// filterInt converts a filter value to an integer as GNS3 does: numbers are
// truncated, booleans are 0 or 1, numeric strings are parsed.
func filterInt(v any) (int, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e9 {
			return 0, fmt.Errorf("must be a number")
		}
		return int(x), nil
	case int:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			return 0, fmt.Errorf("must be an integer, got %q", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("must be an integer")
}

// doesNothing reports a normalised filter that has no effect, which GNS3
// drops from the link.
func doesNothing(name string, values []any) bool {
	switch name {
	case "bpf":
		return values[0] == ""
	case "delay":
		return values[0] == 0 && (len(values) < 2 || values[1] == 0)
	}
	return values[0] == 0
}

// ActiveFilters are a link's filters as its relay applies them; a nil field
// is a filter that is off.
type ActiveFilters struct {
	FrequencyDrop, PacketLoss, Corrupt *int
	// Delay is latency and jitter in milliseconds.
	Delay *[2]int
	// BPF lists expressions; a frame matching any of them is dropped.
	BPF []string
}

// activeFilters turns a link's normalised filters into what its relay
// applies. Blank lines of a bpf text are ignored (libpcap compiles an empty
// expression to "match everything", which would drop all traffic).
func activeFilters(f map[string][]any) ActiveFilters {
	var a ActiveFilters
	intOf := func(v []any, i int) int {
		if i < len(v) {
			if n, ok := v[i].(int); ok {
				return n
			}
		}
		return 0
	}
	for name, v := range f {
		switch name {
		case "frequency_drop":
			n := intOf(v, 0)
			a.FrequencyDrop = &n
		case "packet_loss":
			n := intOf(v, 0)
			a.PacketLoss = &n
		case "corrupt":
			n := intOf(v, 0)
			a.Corrupt = &n
		case "delay":
			a.Delay = &[2]int{intOf(v, 0), intOf(v, 1)}
		case "bpf":
			text, _ := v[0].(string)
			for _, line := range strings.Split(text, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					a.BPF = append(a.BPF, line)
				}
			}
		}
	}
	return a
}
