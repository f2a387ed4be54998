// Package metrics holds what the controller and the agents share of their
// Prometheus metrics (GET /metrics, text format): a registry with the Go
// runtime and process collectors, the API request metrics, and the
// controller's aggregation of its agents' link and capture counters.
//
// Names start with labtap_. Link counters carry project_id, link_id and
// direction ("a_to_b": received on the link's first endpoint, sent out of
// its second; "b_to_a"); capture counters carry project_id and link_id; the
// controller adds compute_id to the ones it takes from its agents.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Prefixes of the families an agent exports per link and per capture: the
// ones the controller aggregates.
const (
	LinkPrefix    = "labtap_link_"
	CapturePrefix = "labtap_capture_"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors (process_cpu_seconds_total, process_resident_memory_bytes,
// go_goroutines, ...).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// HTTP counts API requests and their latency by method, route template
// (never the path, whose ids would make a series per object) and status.
// A nil *HTTP counts nothing. It is safe for concurrent use.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	series   sync.Map // seriesKey → *series: one lookup a request, not a vector lookup per metric
}

type seriesKey struct {
	method, route string
	status        int
}

// series is one method, route and status's counter and histogram.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// NewHTTP registers the request metrics with reg.
func NewHTTP(reg prometheus.Registerer) *HTTP {
	labels := []string{"method", "route", "status"}
	m := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "labtap_http_requests_total",
			Help: "API requests answered, by method, route template and status.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "labtap_http_request_duration_seconds",
			Help: "Time to answer an API request, by method, route template and status (a stream on the controller: until it began; on an agent: until it ended).",
			// 0.5 ms to 40 s: API calls take milliseconds, node starts seconds.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 13),
		}, labels),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// Observe counts one answered request.
func (m *HTTP) Observe(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	k := seriesKey{method, route, status}
	v, ok := m.series.Load(k)
	if !ok {
		s := strconv.Itoa(status)
		v, _ = m.series.LoadOrStore(k, &series{m.requests.WithLabelValues(method, route, s), m.duration.WithLabelValues(method, route, s)})
	}
	ser := v.(*series)
	ser.requests.Inc()
	ser.duration.Observe(d.Seconds())
}
