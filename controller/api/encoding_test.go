package api

import (
	"bytes"
	"encoding/json"
	"testing"

	gojson "github.com/goccy/go-json"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
)

// TestFastEncoderWritesWhatEncodingJSONWrites holds the JSON encoder of the
// replies, notifications and project files (go-json) to the standard
// library's output, byte for byte, on every reply shape, with text that
// must be escaped.
func TestFastEncoderWritesWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	tricky := `<b>"quoted" & \ tab	 é ☃ ` + "\u2028"
	cmd := tricky
	cpu := 12.5
	label := project.Label{"text": json.RawMessage(`"` + "PC<1>&" + `"`), "x": json.RawMessage("null"), "y": json.RawMessage("-40")}
	values := map[string]any{
		"node": nodeFrom(project.Node{ID: "n", Name: tricky, Type: "vpcs", CommandLine: &cmd, Label: label,
			Properties: map[string]any{"a": []any{1.5, tricky, nil, true}}, Console: 5000}),
		"link": linkFrom(project.Link{ID: "l", Endpoints: []project.Endpoint{{NodeID: "n", Label: label}},
			Filters: map[string][]any{"bpf": {tricky}, "delay": {50, 10}}, Style: json.RawMessage(`{"color": "#ff0000", "width": 2}`),
			Capture: project.Capture{State: capspec.State{Active: true, FileName: "x.pcap"}}}),
		"project": projectFrom(project.Project{ID: "p", Name: tricky, Settings: project.Settings{Supplier: json.RawMessage(`{"url":"http://x/?a=1&b=<2>"}`)}}),
		"compute": computeFrom(compute.Compute{ID: "c", Name: tricky, CPUPercent: &cpu, NodeTypes: []string{"vpcs"}}),
		"message": message{Action: "link.updated", Event: map[string]any{"s": tricky}},
	}
	for name, v := range values {
		want, err1 := json.Marshal(v)
		got, err2 := gojson.Marshal(v)
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s:\n go-json %s (%v)\nstdlib  %s (%v)", name, got, err2, want, err1)
		}
		want, _ = json.MarshalIndent(v, "", "    ")
		got, _ = gojson.MarshalIndent(v, "", "    ")
		if !bytes.Equal(got, want) {
			t.Errorf("%s indented differs", name)
		}
	}
}
