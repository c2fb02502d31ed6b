package encode

import (
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// istiod's filter chain match options for STRICT and DISABLE
// (filterchain_options.go); PERMISSIVE's are in listener_virtual.go.
var (
	inboundStrictHTTP = []inboundOpt{{transport: "tls", http: true, tls: true}}
	inboundStrictTCP  = []inboundOpt{{transport: "tls", tls: true}}
	inboundStrictAuto = []inboundOpt{
		{alpn: lsMTLSHTTPALPNs, transport: "tls", http: true, tls: true},
		{transport: "tls", tls: true},
	}
	inboundPlainHTTP = []inboundOpt{{transport: "raw_buffer", http: true}}
	inboundPlainTCP  = []inboundOpt{{transport: "raw_buffer"}}
	inboundPlainAuto = []inboundOpt{
		{alpn: lsPlaintextHTTPALPNs, transport: "raw_buffer", http: true},
		{transport: "raw_buffer"},
	}
)

// inboundOpts is istiod's getFilterChainMatchOptions: the chains of a port
// of protocol class c under PeerAuthentication mode m. STRICT accepts only
// Istio mTLS; DISABLE only plaintext; PERMISSIVE (and no policy) both,
// telling them apart by the TLS inspector's transport protocol and ALPN.
func inboundOpts(c lsClass, m ServiceMTLS) []inboundOpt {
	switch m {
	case ServiceMTLSStrict:
		switch c {
		case lsHTTP:
			return inboundStrictHTTP
		case lsAuto:
			return inboundStrictAuto
		}
		return inboundStrictTCP
	case ServiceMTLSDisable:
		switch c {
		case lsHTTP:
			return inboundPlainHTTP
		case lsAuto:
			return inboundPlainAuto
		}
		return inboundPlainTCP
	}
	switch c {
	case lsHTTP:
		return inboundPermissiveHTTP
	case lsAuto:
		return inboundPermissiveAuto
	}
	return inboundPermissiveTCP
}

// inboundSecurity holds the authentication and authorization filters of a
// workload's inbound chains, built once per listener and shared read-only
// by every chain.
type inboundSecurity struct {
	http []*hcm.HttpFilter  // jwt_authn, then RBAC, after metadata exchange
	net  []*listener.Filter // RBAC, before tcp_proxy
	// tel adds istio.stats before tcp_proxy and its access logs.
	tel *Telemetry
}

func (k viIn) security() *inboundSecurity {
	s := &inboundSecurity{tel: k.Telemetry, http: customHTTPFilters(k.names, &k.Authz)}
	if f := jwtFilter(&k.RequestAuthn, false); f != nil {
		s.http = append(s.http, f)
	}
	s.http = append(s.http, authzHTTPFilters(k.names, &k.Authz)...)
	s.net = append(customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz)...)
	return s
}

// withHTTP inserts the security filters after istiod's first inbound HTTP
// filter (peer metadata exchange), as istiod orders them: authentication,
// then authorization, then stats, fault, CORS and the router.
func (s *inboundSecurity) withHTTP(h *hcm.HttpConnectionManager) *hcm.HttpConnectionManager {
	if len(s.http) == 0 {
		return h
	}
	out := make([]*hcm.HttpFilter, 0, len(h.HttpFilters)+len(s.http))
	out = append(out, h.HttpFilters[0])
	out = append(out, s.http...)
	h.HttpFilters = append(out, h.HttpFilters[1:]...)
	return h
}

// tcp is a TCP chain's network filters: metadata exchange, RBAC, stats,
// then the proxy filter.
func (s *inboundSecurity) tcp(proxy *listener.Filter) []*listener.Filter {
	out := make([]*listener.Filter, 0, 3+len(s.net))
	out = append(out, nfMxTCP)
	out = append(out, s.net...)
	return withTelemetryTCP(s.tel, sideInbound, true, append(out, proxy))
}

// securityHTTPFilters are a router's jwt_authn and RBAC filters for its
// HTTP servers, as on a sidecar's inbound HTTP chains.
func (k gwlIn) securityHTTPFilters() []*hcm.HttpFilter {
	out := customHTTPFilters(k.names, &k.Authz)
	if f := jwtFilter(&k.RequestAuthn, true); f != nil {
		out = append(out, f)
	}
	return append(out, authzHTTPFilters(k.names, &k.Authz)...)
}

// tcpFilters are a router's network filters for a TCP, TLS or passthrough
// server: the RBAC filters of the policies selecting it, stats, then
// proxy.
func (k gwlIn) tcpFilters(proxy *listener.Filter) []*listener.Filter {
	if k.Authz.Empty() {
		return withTelemetryTCP(k.Telemetry, sideGateway, true, []*listener.Filter{proxy})
	}
	out := append(customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz)...)
	return withTelemetryTCP(k.Telemetry, sideGateway, true, append(out, proxy))
}
