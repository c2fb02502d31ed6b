package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// scrape reads /metrics into families by name.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, b := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return fams
}

// metricValue returns the value of the series of name whose labels include
// labels ("k=v" pairs), summing matches; counters, gauges and histogram
// counts. found is false when no series matches.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, found bool) {
	base := strings.TrimSuffix(name, "_count")
	f := fams[base]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range labels {
			k, val, _ := strings.Cut(kv, "=")
			ok = ok && have[k] == val
		}
		if !ok {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, found
}

func mustValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	v, _ := metricValue(fams, name, labels...)
	return v
}

// The scenario's metrics, after one config change: every count is known.
func TestMetricsAfterScenario(t *testing.T) {
	s := newScenario(t)
	// Pushes are counted from here: the initial sync may push before all
	// three proxies connect.
	before := scrape(t, s.base)
	at := func(name string, labels ...string) float64 { v, _ := metricValue(before, name, labels...); return v }
	pushesBefore, _ := metricValue(before, "pilotfish_pushes_total", "reason=config")
	triggersBefore, _ := metricValue(before, "pilotfish_push_triggers_total", "reason=config")
	// A new service changes every proxy's clusters: one CDS response each.
	s.writeConfig(t, "ratings.yaml", ratingsYAML)
	s.synced.recv(engine.TypeCluster) // and ACKs it (ackAll)
	s.stale.recv(engine.TypeCluster)
	s.n.recv(engine.TypeCluster)

	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"pilot_xds", nil, 3},
		{"pilot_services", nil, 2},
		{"pilot_xds_pushes", []string{"type=cds"}, at("pilot_xds_pushes", "type=cds") + 3},
		{"pilot_xds_push_time_count", []string{"type=cds"}, at("pilot_xds_push_time_count", "type=cds") + 3},
		{"pilot_xds_config_size_bytes_count", []string{"type=cds"}, at("pilot_xds_config_size_bytes_count", "type=cds") + 3},
		{"pilot_total_xds_rejects", []string{"type=cds"}, 1},
	}
	eventually(t, "metrics settle", func() string {
		fams := scrape(t, s.base)
		var bad []string
		for _, w := range want {
			if got, _ := metricValue(fams, w.name, w.labels...); got != w.value {
				bad = append(bad, fmt.Sprintf("%s%v = %v, want %v", w.name, w.labels, got, w.value))
			}
		}
		// Each config push is queued for the three proxies. (The file
		// source may publish the change in more than one push: only the
		// one carrying the new service sends CDS.)
		pushes, _ := metricValue(fams, "pilotfish_pushes_total", "reason=config")
		triggers, _ := metricValue(fams, "pilotfish_push_triggers_total", "reason=config")
		if pushes <= pushesBefore || triggers-triggersBefore != 3*(pushes-pushesBefore) {
			bad = append(bad, fmt.Sprintf("config pushes %v→%v queued for %v→%v proxies, want ≥1 more, 3 proxies each", pushesBefore, pushes, triggersBefore, triggers))
		}
		// reviews-1.shop ACKs its new clusters: convergence is measured.
		if got, want := mustValue(fams, "pilot_proxy_convergence_time_count"), at("pilot_proxy_convergence_time_count")+1; got < want {
			bad = append(bad, fmt.Sprintf("pilot_proxy_convergence_time_count = %v, want ≥ %v", got, want))
		}
		return strings.Join(bad, "; ")
	})
	fams := scrape(t, s.base)
	if v, found := metricValue(fams, "pilot_xds_push_errors"); found && v != 0 {
		t.Errorf("pilot_xds_push_errors = %v, want none", v)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total",
		"pilot_debounce_time", "pilot_proxy_queue_time", "pilotfish_cache_entries", "pilotfish_cache_hits_total", "pilotfish_cache_misses_total"} {
		if _, found := metricValue(fams, name); !found {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// pilot_xds_push_errors counts through the XDSMetrics hook.
func TestPushErrorsMetric(t *testing.T) {
	m := newMetrics(index.NewWriter())
	x := m.xds()
	x.PushError(engine.TypeCluster, "timeout")
	x.PushError(engine.TypeCluster, "timeout")
	x.PushError(engine.TypeRoute, "panic")
	fams, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if v, _ := metricValue(byName, "pilot_xds_push_errors", "type=cds", "reason=timeout"); v != 2 {
		t.Errorf("push errors cds/timeout = %v, want 2", v)
	}
	if v, _ := metricValue(byName, "pilot_xds_push_errors", "type=rds", "reason=panic"); v != 1 {
		t.Errorf("push errors rds/panic = %v, want 1", v)
	}
}
