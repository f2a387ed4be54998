package metrics

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Agents gathers the link and capture families of the controller's agents,
// scraped from their /metrics at each gather, and gives each series a
// compute_id label; with labtap_agent_up{compute_id}, 1 for each agent that
// answered, 0 for one that did not. It satisfies prometheus.Gatherer, so one
// scrape of the controller sees the whole lab.
type Agents struct {
	// Computes lists the ids of the agents to scrape (the connected ones).
	Computes func() []string
	// Fetch returns an agent's metrics in the text format; the caller
	// closes it.
	Fetch func(ctx context.Context, computeID string) (io.ReadCloser, error)
	// Timeout bounds each gather; 0 means 5 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Gather scrapes every agent at once and merges what they said.
func (a *Agents) Gather() ([]*dto.MetricFamily, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ids := a.Computes()
	results := make([]map[string]*dto.MetricFamily, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			fams, err := a.scrape(ctx, id)
			if err != nil && a.Logger != nil {
				a.Logger.Debug("scrape agent metrics", "compute_id", id, "err", err)
			}
			results[i] = fams
		})
	}
	wg.Wait()
	merged := map[string]*dto.MetricFamily{}
	up := &dto.MetricFamily{
		Name: ptr("labtap_agent_up"),
		Help: ptr("1 when the agent answered the controller's scrape of its metrics, 0 otherwise."),
		Type: dto.MetricType_GAUGE.Enum(),
	}
	for i, id := range ids {
		v := 0.0
		if results[i] != nil {
			v = 1
		}
		up.Metric = append(up.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: ptr("compute_id"), Value: ptr(id)}},
			Gauge: &dto.Gauge{Value: &v},
		})
		for name, fam := range results[i] {
			if m, ok := merged[name]; ok {
				if m.GetType() == fam.GetType() {
					m.Metric = append(m.Metric, fam.Metric...)
				}
				continue
			}
			merged[name] = fam
		}
	}
	out := []*dto.MetricFamily{up}
	for _, fam := range merged {
		out = append(out, fam)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// scrape reads one agent's link and capture families, labelled with its
// compute id; nil when the agent did not answer.
func (a *Agents) scrape(ctx context.Context, id string) (map[string]*dto.MetricFamily, error) {
	body, err := a.Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, err
	}
	out := map[string]*dto.MetricFamily{}
	for name, fam := range fams {
		if !strings.HasPrefix(name, LinkPrefix) && !strings.HasPrefix(name, CapturePrefix) {
			continue
		}
		for _, m := range fam.Metric {
			m.Label = append(m.Label, &dto.LabelPair{Name: ptr("compute_id"), Value: ptr(id)})
			sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
		}
		out[name] = fam
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
