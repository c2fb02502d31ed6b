package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// injectMetrics are the injection webhook's metrics under istiod's names
// (pkg/kube/inject/monitoring.go), so istiod's dashboards and alerts read
// them unchanged: requests, successes (reviews answered, denials
// included, as istiod counts them), skips (policy), failures (unusable
// requests and denied pods), and the time per injection.
type injectMetrics struct {
	requests, success, skip, failure prometheus.Counter
	took                             prometheus.Histogram
}

func newInjectMetrics(reg prometheus.Registerer) *injectMetrics {
	m := &injectMetrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "sidecar_injection_requests_total", Help: "Total number of sidecar injection requests."}),
		success:  prometheus.NewCounter(prometheus.CounterOpts{Name: "sidecar_injection_success_total", Help: "Total number of successful sidecar injection requests."}),
		skip:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sidecar_injection_skip_total", Help: "Total number of skipped sidecar injection requests."}),
		failure:  prometheus.NewCounter(prometheus.CounterOpts{Name: "sidecar_injection_failure_total", Help: "Total number of failed sidecar injection requests."}),
		// istiod's buckets, so that its queries' le labels match.
		took: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sidecar_injection_time_seconds", Help: "Total time taken for injection in seconds.",
			Buckets: []float64{.1, 1, 3, 5, 10, 20, 30, 60}}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.success, m.skip, m.failure, m.took)
	}
	return m
}

func (m *injectMetrics) Request()                    { m.requests.Inc() }
func (m *injectMetrics) Skipped()                    { m.skip.Inc() }
func (m *injectMetrics) Failed()                     { m.failure.Inc() }
func (m *injectMetrics) Answered(took time.Duration) { m.success.Inc(); m.took.Observe(took.Seconds()) }
