package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// caMetrics implements ca.Metrics with istiod's citadel_server_* names.
type caMetrics struct {
	csrs, authnErrors, signed prometheus.Counter
	signErrors                *prometheus.CounterVec
	rootExpiry, chainExpiry   prometheus.Gauge
}

func newCAMetrics(reg prometheus.Registerer) ca.Metrics {
	if reg == nil {
		return nil
	}
	m := &caMetrics{
		csrs:        prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_csr_count", Help: "The number of CSRs received by the CA."}),
		authnErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_authentication_failure_count", Help: "The number of authentication failures."}),
		signed:      prometheus.NewCounter(prometheus.CounterOpts{Name: "citadel_server_success_cert_issuance_count", Help: "The number of certificates issuances that have succeeded."}),
		signErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "citadel_server_csr_sign_err_count", Help: "CSRs refused or failed after authentication, by reason (csr, identity, ttl, not_ready, internal)."},
			[]string{"reason"}),
		rootExpiry:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "citadel_server_root_cert_expiry_timestamp", Help: "The unix timestamp, in seconds, when the earliest trusted root expires."}),
		chainExpiry: prometheus.NewGauge(prometheus.GaugeOpts{Name: "citadel_server_cert_chain_expiry_timestamp", Help: "The unix timestamp, in seconds, when the signing chain expires."}),
	}
	reg.MustRegister(m.csrs, m.authnErrors, m.signed, m.signErrors, m.rootExpiry, m.chainExpiry)
	return m
}

func (m *caMetrics) CSR()                    { m.csrs.Inc() }
func (m *caMetrics) AuthnError()             { m.authnErrors.Inc() }
func (m *caMetrics) SignError(reason string) { m.signErrors.WithLabelValues(reason).Inc() }
func (m *caMetrics) Signed()                 { m.signed.Inc() }

func (m *caMetrics) BundleChanged(b *ca.Bundle) {
	roots := b.Roots()
	earliest := roots[0].NotAfter
	for _, r := range roots[1:] {
		if r.NotAfter.Before(earliest) {
			earliest = r.NotAfter
		}
	}
	m.rootExpiry.Set(float64(earliest.Unix()))
	m.chainExpiry.Set(float64(b.NotAfter().Unix()))
}
