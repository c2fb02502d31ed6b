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

// The scenario's metrics, after a config change and an endpoint change:
// what the server counts is what the proxies received.
func TestMetricsAfterScenario(t *testing.T) {
	s := newScenario(t)
	clients := []*adsClient{s.synced, s.stale, s.n}
	received := func(typeURL string) float64 {
		n := 0
		for _, c := range clients {
			n += c.received(typeURL)
		}
		return float64(n)
	}
	// check compares the server's counts with the clients' and with the
	// expectations of one step.
	check := func(extra func(fams map[string]*dto.MetricFamily) []string) {
		t.Helper()
		eventually(t, "metrics agree with the proxies", func() string {
			fams := scrape(t, s.base)
			var bad []string
			for _, w := range []struct {
				name, label string
				want        float64
			}{
				{"pilot_xds", "", 3},
				{"pilot_services", "", 2},
				{"pilot_xds_pushes", "type=cds", received(engine.TypeCluster)},
				{"pilot_xds_push_time_count", "type=cds", received(engine.TypeCluster)},
				{"pilot_xds_config_size_bytes_count", "type=cds", received(engine.TypeCluster)},
				{"pilot_xds_pushes", "type=eds", received(engine.TypeEndpoint)},
				{"pilot_xds_pushes", "type=lds", received(engine.TypeListener)},
				{"pilot_total_xds_rejects", "type=cds", 1},
			} {
				var labels []string
				if w.label != "" {
					labels = []string{w.label}
				}
				if got := mustValue(fams, w.name, labels...); got != w.want {
					bad = append(bad, fmt.Sprintf("%s{%s} = %v, want %v", w.name, w.label, got, w.want))
				}
			}
			return strings.Join(append(bad, extra(fams)...), "; ")
		})
	}

	// A new service changes every proxy's clusters: each receives CDS.
	before := scrape(t, s.base)
	cds := [3]int{s.synced.received(engine.TypeCluster), s.stale.received(engine.TypeCluster), s.n.received(engine.TypeCluster)}
	s.writeConfig(t, "ratings.yaml", ratingsYAML)
	s.synced.recv(engine.TypeCluster) // and ACKs it (ackAll)
	s.stale.recv(engine.TypeCluster)
	s.n.recv(engine.TypeCluster)
	check(func(fams map[string]*dto.MetricFamily) []string {
		var bad []string
		for i, c := range clients {
			if c.received(engine.TypeCluster) <= cds[i] {
				bad = append(bad, fmt.Sprintf("proxy %d got no new CDS", i))
			}
		}
		// Each config push is queued for the three proxies (the file
		// source may publish a change in more than one push).
		p0, p1 := mustValue(before, "pilotfish_pushes_total", "reason=config"), mustValue(fams, "pilotfish_pushes_total", "reason=config")
		q0, q1 := mustValue(before, "pilotfish_push_triggers_total", "reason=config"), mustValue(fams, "pilotfish_push_triggers_total", "reason=config")
		if p1 <= p0 || q1-q0 != 3*(p1-p0) {
			bad = append(bad, fmt.Sprintf("config pushes %v→%v queued for %v→%v proxies, want ≥1 more, 3 proxies each", p0, p1, q0, q1))
		}
		// reviews-1.shop ACKs its new clusters: convergence is measured.
		if got, want := mustValue(fams, "pilot_proxy_convergence_time_count"), mustValue(before, "pilot_proxy_convergence_time_count")+1; got < want {
			bad = append(bad, fmt.Sprintf("pilot_proxy_convergence_time_count = %v, want ≥ %v", got, want))
		}
		return bad
	})

	// An endpoint change takes the fast path: an endpoint push, queued for
	// the three proxies (all see the service), EDS sent only to the one
	// watching its cluster.
	before = scrape(t, s.base)
	eds := s.synced.received(engine.TypeEndpoint)
	s.writeConfig(t, "svc.yaml", strings.Replace(svcYAML, "10.244.0.5", "10.244.0.50", 1))
	s.synced.recv(engine.TypeEndpoint)
	check(func(fams map[string]*dto.MetricFamily) []string {
		var bad []string
		if s.synced.received(engine.TypeEndpoint) <= eds {
			bad = append(bad, "the endpoint change sent no EDS")
		}
		p0, p1 := mustValue(before, "pilotfish_pushes_total", "reason=endpoint"), mustValue(fams, "pilotfish_pushes_total", "reason=endpoint")
		q0, q1 := mustValue(before, "pilotfish_push_triggers_total", "reason=endpoint"), mustValue(fams, "pilotfish_push_triggers_total", "reason=endpoint")
		if p1 <= p0 || q1-q0 != 3*(p1-p0) {
			bad = append(bad, fmt.Sprintf("endpoint pushes %v→%v queued for %v→%v proxies, want ≥1 more, 3 proxies each", p0, p1, q0, q1))
		}
		return bad
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
