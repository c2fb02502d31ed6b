package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pilotfish-mesh/pilotfish/serve"
)

// authMetrics are the xDS identity and unknown-type counters (serve's
// identity.go and unknown_types.go). Both label sets are serve's fixed
// lists, each shown from zero.
type authMetrics struct {
	failures *prometheus.CounterVec
	unknown  *prometheus.CounterVec
}

func newAuthMetrics(reg prometheus.Registerer) *authMetrics {
	a := &authMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilotfish_xds_auth_failures_total",
			Help: "TLS xDS streams and handshakes refused by the identity rule, by reason (no_credential, unauthenticated, namespace_mismatch, service_account_mismatch, cert_expired, cert_untrusted, cert_invalid)."},
			[]string{"reason"}),
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pilotfish_xds_unknown_type_requests_total",
			Help: "Requests for xDS types the engine does not serve, by kind (ecds, wds, pcds, health, xds, debug, other)."},
			[]string{"type"}),
	}
	for _, r := range serve.AuthReasons {
		a.failures.WithLabelValues(r)
	}
	for _, k := range serve.UnknownTypeKinds {
		a.unknown.WithLabelValues(k)
	}
	reg.MustRegister(a.failures, a.unknown)
	return a
}

func (x xdsMetrics) AuthFailed(reason string) { x.m.auth.failures.WithLabelValues(reason).Inc() }
func (x xdsMetrics) UnknownType(kind string)  { x.m.auth.unknown.WithLabelValues(kind).Inc() }
