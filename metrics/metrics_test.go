package metrics

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Each method, route and status is its own series, counted and timed.
func TestHTTPCountsEachSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewHTTP(reg)
	m.Observe("GET", "/v2/version", 200, time.Millisecond)
	m.Observe("GET", "/v2/version", 200, time.Millisecond)
	m.Observe("GET", "/v2/version", 404, time.Second)
	m.Observe("POST", "/v2/version", 200, time.Millisecond)
	var nilHTTP *HTTP
	nilHTTP.Observe("GET", "/", 200, 0) // counts nothing, and does not panic
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			key := f.GetName() + " " + strings.Join(labels, " ")
			if c := s.GetCounter(); c != nil {
				got[key] = c.GetValue()
			} else if h := s.GetHistogram(); h != nil {
				got[key] = float64(h.GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"labtap_http_requests_total GET /v2/version 200":            2,
		"labtap_http_requests_total GET /v2/version 404":            1,
		"labtap_http_requests_total POST /v2/version 200":           1,
		"labtap_http_request_duration_seconds GET /v2/version 200":  2,
		"labtap_http_request_duration_seconds GET /v2/version 404":  1,
		"labtap_http_request_duration_seconds POST /v2/version 200": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := NewHTTP(prometheus.NewRegistry())
	b.ReportAllocs()
	for b.Loop() {
		m.Observe("GET", "/v2/projects/{project_id}/links/{link_id}", 200, time.Millisecond)
	}
}
