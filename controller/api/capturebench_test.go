package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkStartCaptureWith200Running times POST start_capture through the
// controller and the real agent (its file, header and name durable before
// the 201) on a link of a project whose 200 other links capture: the
// control plane of a lab at scale. stop_capture is not timed. p50-ms is
// the median start.
func BenchmarkStartCaptureWith200Running(b *testing.B) {
	const running = 200
	app := benchServer(b)
	pid, _ := benchProject(b, app, running+1)
	var links []struct {
		LinkID string `json:"link_id"`
	}
	json.Unmarshal(benchDo(b, app, "GET", "/v2/projects/"+pid+"/links", "", 200), &links)
	if len(links) != running+1 {
		b.Fatalf("%d links", len(links))
	}
	for _, l := range links[1:] {
		benchDo(b, app, "POST", "/v2/projects/"+pid+"/links/"+l.LinkID+"/start_capture", "{}", 201)
	}
	path := "/v2/projects/" + pid + "/links/" + links[0].LinkID
	// GNS3's client sends no name: each start of the link's capture is
	// given its default name, then name-2, name-3... as the files stay.
	// A name of its own each time is the floor.
	for _, naming := range []string{"default-name", "own-name"} {
		b.Run(naming, func(b *testing.B) {
			var starts []time.Duration
			i := 0
			for b.Loop() {
				body := "{}"
				if naming == "own-name" {
					i++
					body = fmt.Sprintf(`{"capture_file_name": "own%d"}`, i)
				}
				t0 := time.Now()
				benchDo(b, app, "POST", path+"/start_capture", body, 201)
				starts = append(starts, time.Since(t0))
				b.StopTimer()
				benchDo(b, app, "POST", path+"/stop_capture", "", 201)
				b.StartTimer()
			}
			slices.Sort(starts)
			b.ReportMetric(float64(starts[len(starts)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(starts[len(starts)*99/100])/1e6, "p99-ms")
		})
	}
}
