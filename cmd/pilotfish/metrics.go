package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pilotfish-mesh/pilotfish/debug"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// metrics holds pilotfish's Prometheus metrics, named as istiod names them
// where they mean the same, so existing dashboards keep working.
type metrics struct {
	registry    *prometheus.Registry
	proxies     prometheus.Gauge
	pushes      *prometheus.CounterVec
	configSize  *prometheus.HistogramVec
	rejects     *prometheus.CounterVec
	convergence prometheus.Histogram
	queueTime   prometheus.Histogram
	debounce    *prometheus.HistogramVec
	triggers    *prometheus.CounterVec
	pushTime    *prometheus.HistogramVec
	pushErrors  *prometheus.CounterVec
	pushCycles  *prometheus.CounterVec
	// push follows the last pushes for /debug/push_status.
	push *debug.PushStatus
	auth *authMetrics // metrics_xds_auth.go
}

// newMetrics returns the metrics of a server reading idx (its gauges read
// idx's current snapshot).
func newMetrics(idx engine.Index) *metrics {
	latency := []float64{.001, .005, .01, .05, .1, .25, .5, 1, 3, 5, 10, 20, 30}
	m := &metrics{
		registry: prometheus.NewRegistry(),
		proxies:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilot_xds", Help: "Number of connected xDS clients."}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_xds_pushes", Help: "xDS responses sent, by type."},
			[]string{"type"}),
		configSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pilot_xds_config_size_bytes", Help: "Size of xDS responses, by type.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10)}, []string{"type"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_total_xds_rejects", Help: "xDS responses rejected (NACKed) by proxies, by type."},
			[]string{"type"}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pilot_proxy_convergence_time", Help: "Time from sending a response to the proxy's ACK, in seconds.", Buckets: latency}),
		queueTime:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pilot_proxy_queue_time", Help: "Time a push waited in the push queue, in seconds.", Buckets: latency}),
		debounce: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pilot_debounce_time", Help: "Time changes were held by debouncing before a push, in seconds.", Buckets: latency},
			[]string{"fast_path"}),
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilotfish_push_triggers_total", Help: "Proxies a push was queued for, by reason (config, endpoint, secret)."},
			[]string{"reason"}),
		pushTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pilot_xds_push_time", Help: "Time to generate and send one xDS response to one proxy, in seconds, by type.", Buckets: latency},
			[]string{"type"}),
		pushErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilot_xds_push_errors", Help: "Pushes to a proxy that failed, by type and reason (send_error, generate, timeout, panic)."},
			[]string{"type", "reason"}),
		pushCycles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilotfish_pushes_total", Help: "Pushes started, by reason: config (every proxy, every type), endpoint (the endpoint fast path) or secret (SDS to the readers of a changed Secret)."},
			[]string{"reason"}),
		push: debug.NewPushStatus(idx.Snapshot),
	}
	m.registry.MustRegister(m.proxies, m.pushes, m.configSize, m.rejects, m.convergence, m.queueTime, m.debounce, m.triggers,
		m.pushTime, m.pushErrors, m.pushCycles,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pilot_services", Help: "Number of services known to the control plane."},
			func() float64 { return float64(engine.CountIndex(idx).Services) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pilotfish_endpoint_shards", Help: "Number of services with endpoints."},
			func() float64 { return float64(engine.CountIndex(idx).EndpointShards) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pilotfish_index_version", Help: "Version of the current index snapshot."},
			func() float64 { return float64(engine.CountIndex(idx).Version) }),
	)
	m.auth = newAuthMetrics(m.registry)
	return m
}

// watchCache exports the bytes cache's counters (the engine's
// Engine.Cache).
func (m *metrics) watchCache(c engine.CacheCounters) {
	m.registry.MustRegister(cacheCollector{c})
}

// watchResponses exports how the engine answered each type: from a
// class's memo or built (engine.ResponseStats), responses and resources.
func (m *metrics) watchResponses(stats func() []engine.ResponseStats) {
	m.registry.MustRegister(responseCollector{stats})
}

var (
	classResponsesDesc = prometheus.NewDesc("pilotfish_class_responses_total",
		"Responses by type and source: memo (copied from the memo of the proxy's class) or built (from keys, each resource a bytes cache hit or a generation).",
		[]string{"type", "source"}, nil)
	classResourcesDesc = prometheus.NewDesc("pilotfish_class_response_resources_total",
		"Resources in the responses of pilotfish_class_responses_total, by type and source.", []string{"type", "source"}, nil)
)

type responseCollector struct{ stats func() []engine.ResponseStats }

func (responseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- classResponsesDesc
	ch <- classResourcesDesc
}

func (rc responseCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range rc.stats() {
		t := typeLabel(s.Type)
		ch <- prometheus.MustNewConstMetric(classResponsesDesc, prometheus.CounterValue, float64(s.MemoHits), t, "memo")
		ch <- prometheus.MustNewConstMetric(classResponsesDesc, prometheus.CounterValue, float64(s.Builds), t, "built")
		ch <- prometheus.MustNewConstMetric(classResourcesDesc, prometheus.CounterValue, float64(s.MemoResources), t, "memo")
		ch <- prometheus.MustNewConstMetric(classResourcesDesc, prometheus.CounterValue, float64(s.BuiltResources), t, "built")
	}
}

// watchUnsupported exports pilotfish_config_unsupported_fields: the
// objects setting each field pilotfish does not support (and of each kind
// it does not implement), counted at each scrape from the sources' current
// problems, the list /debug/config_errors shows. Reading that list keeps
// the gauge equal to the warnings by construction: no count to keep in
// step as objects change and are deleted. Its labels are bounded by the
// field ledger (ingest.CountUnsupported).
func (m *metrics) watchUnsupported(problems func() []error) {
	m.registry.MustRegister(unsupportedCollector{problems})
}

var unsupportedDesc = prometheus.NewDesc("pilotfish_config_unsupported_fields",
	"Objects setting a field pilotfish does not support, by kind and field path (empty field: a kind pilotfish does not implement).",
	[]string{"kind", "field"}, nil)

type unsupportedCollector struct{ problems func() []error }

func (unsupportedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- unsupportedDesc }

func (u unsupportedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range ingest.CountUnsupported(u.problems()) {
		ch <- prometheus.MustNewConstMetric(unsupportedDesc, prometheus.GaugeValue, float64(c.Objects), c.Kind, c.Field)
	}
}

var (
	cacheEntriesDesc = prometheus.NewDesc("pilotfish_cache_entries", "Pre-marshaled resources in the bytes cache, by kind.", []string{"kind"}, nil)
	cacheBytesDesc   = prometheus.NewDesc("pilotfish_cache_bytes", "Bytes held by the bytes cache, by kind.", []string{"kind"}, nil)
	cacheHitsDesc    = prometheus.NewDesc("pilotfish_cache_hits_total", "Bytes cache hits, by kind.", []string{"kind"}, nil)
	cacheMissesDesc  = prometheus.NewDesc("pilotfish_cache_misses_total", "Bytes cache misses (generations), by kind.", []string{"kind"}, nil)
	efFailuresDesc   = prometheus.NewDesc("pilotfish_envoy_filter_failures_total",
		"EnvoyFilter patches that failed to apply (skipped, the rest applied), counted once per generated resource, not per proxy.", nil, nil)
)

type cacheCollector struct{ c engine.CacheCounters }

func (cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheEntriesDesc
	ch <- cacheBytesDesc
	ch <- cacheHitsDesc
	ch <- cacheMissesDesc
	ch <- efFailuresDesc
}

func (cc cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range cc.c.Stats() {
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(s.Entries), s.Kind)
		ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(s.Bytes), s.Kind)
		ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(s.Hits), s.Kind)
		ch <- prometheus.MustNewConstMetric(cacheMissesDesc, prometheus.CounterValue, float64(s.Misses), s.Kind)
	}
	n, _ := cc.c.PatchFailures()
	ch <- prometheus.MustNewConstMetric(efFailuresDesc, prometheus.CounterValue, float64(n))
}

// typeLabel is istiod's short type label.
func typeLabel(typeURL string) string {
	switch typeURL {
	case engine.TypeCluster:
		return "cds"
	case engine.TypeEndpoint:
		return "eds"
	case engine.TypeListener:
		return "lds"
	case engine.TypeRoute:
		return "rds"
	case engine.TypeSecret:
		return "sds"
	case engine.TypeNameTable:
		return "nds"
	}
	return "other"
}

func (m *metrics) engine() engine.Metrics { return engineMetrics{m} }
func (m *metrics) xds() serve.XDSMetrics  { return xdsMetrics{m: m} }

type engineMetrics struct{ m *metrics }

func (e engineMetrics) Proxies(n int) { e.m.proxies.Set(float64(n)) }
func (e engineMetrics) PushQueued(reason string, n int) {
	e.m.triggers.WithLabelValues(reason).Add(float64(n))
	e.m.pushCycles.WithLabelValues(reason).Inc()
	e.m.push.Queued(reason, n)
}
func (e engineMetrics) QueueTime(d time.Duration) { e.m.queueTime.Observe(d.Seconds()) }
func (e engineMetrics) Converged(_ string, d time.Duration) {
	e.m.convergence.Observe(d.Seconds())
}
func (e engineMetrics) Rejected(string) {} // counted once, by serve
func (e engineMetrics) Debounced(d time.Duration, fastPath bool) {
	l := "false"
	if fastPath {
		l = "true"
	}
	e.m.debounce.WithLabelValues(l).Observe(d.Seconds())
	e.m.push.Debounced(d)
}

type xdsMetrics struct {
	serve.NopXDSMetrics
	m *metrics
}

func (x xdsMetrics) Pushed(typeURL string, bytes int) {
	t := typeLabel(typeURL)
	x.m.pushes.WithLabelValues(t).Inc()
	x.m.configSize.WithLabelValues(t).Observe(float64(bytes))
	x.m.push.Sent(t, bytes)
}

func (x xdsMetrics) PushTime(typeURL string, d time.Duration) {
	x.m.pushTime.WithLabelValues(typeLabel(typeURL)).Observe(d.Seconds())
}

func (x xdsMetrics) PushError(typeURL, reason string) {
	x.m.pushErrors.WithLabelValues(typeLabel(typeURL), reason).Inc()
}

func (x xdsMetrics) Rejected(typeURL string) { x.m.rejects.WithLabelValues(typeLabel(typeURL)).Inc() }
