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
// by every chain, and the WasmPlugin filter references placed among them.
type inboundSecurity struct {
	http []*hcm.HttpFilter  // jwt_authn, then RBAC, after metadata exchange
	net  []*listener.Filter // RBAC, before tcp_proxy
	// tel adds istio.stats before tcp_proxy and its access logs.
	tel *Telemetry
	// wasm are the plugins' filter references; with any, the chains are
	// built from the parts below instead of http and net.
	wasm                WasmFilters
	custom, authz       []*hcm.HttpFilter
	jwt                 *hcm.HttpFilter
	netCustom, netAuthz []*listener.Filter
}

func (k viIn) security() *inboundSecurity {
	s := &inboundSecurity{tel: k.Telemetry, http: customHTTPFilters(k.names, &k.Authz)}
	if f := jwtFilter(&k.RequestAuthn, false); f != nil {
		s.http = append(s.http, f)
	}
	s.http = append(s.http, authzHTTPFilters(k.names, &k.Authz)...)
	s.net = append(customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz)...)
	if len(k.Wasm) > 0 {
		s.wasm = k.Wasm
		s.custom, s.jwt, s.authz = customHTTPFilters(k.names, &k.Authz), jwtFilter(&k.RequestAuthn, false), authzHTTPFilters(k.names, &k.Authz)
		s.netCustom, s.netAuthz = customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz)
	}
	return s
}

// withHTTP inserts the security filters after istiod's first inbound HTTP
// filter (peer metadata exchange), as istiod orders them: authentication,
// then authorization, then stats, fault, CORS and the router; the
// plugins' references that apply on port go in their phases' places.
func (s *inboundSecurity) withHTTP(h *hcm.HttpConnectionManager, port uint32) *hcm.HttpConnectionManager {
	sec := s.http
	if len(s.wasm) > 0 {
		sec = s.wasm.httpAround(port, s.custom, s.jwt, s.authz)
	}
	if len(sec) == 0 {
		return h
	}
	out := make([]*hcm.HttpFilter, 0, len(h.HttpFilters)+len(sec))
	out = append(out, h.HttpFilters[0])
	out = append(out, sec...)
	h.HttpFilters = append(out, h.HttpFilters[1:]...)
	return h
}

// httpChain is an HTTP chain's network filters: metadata exchange, the
// plugins' network filter references on port, then the connection manager.
func (s *inboundSecurity) httpChain(port uint32, h *hcm.HttpConnectionManager) []*listener.Filter {
	if !s.wasm.hasNet(port) {
		return []*listener.Filter{nfMxTCP, lsHCMFilter(h)}
	}
	out := []*listener.Filter{nfMxTCP}
	out = s.wasm.netAround(out, port, nil, nil)
	return append(out, lsHCMFilter(h))
}

// tcp is a TCP chain's network filters: metadata exchange, RBAC (with the
// plugins' references on port in their phases' places), stats, then the
// proxy filter.
func (s *inboundSecurity) tcp(proxy *listener.Filter, port uint32) []*listener.Filter {
	out := make([]*listener.Filter, 0, 3+len(s.net))
	out = append(out, nfMxTCP)
	if len(s.wasm) > 0 {
		out = s.wasm.netAround(out, port, s.netCustom, s.netAuthz)
	} else {
		out = append(out, s.net...)
	}
	return withTelemetryTCP(s.tel, sideInbound, true, append(out, proxy))
}

// securityHTTPFilters are a router's jwt_authn and RBAC filters for its
// HTTP servers, as on a sidecar's inbound HTTP chains.
func (k gwlIn) securityHTTPFilters() []*hcm.HttpFilter {
	if len(k.Wasm) > 0 {
		return k.Wasm.httpAround(k.Port, customHTTPFilters(k.names, &k.Authz), jwtFilter(&k.RequestAuthn, true), authzHTTPFilters(k.names, &k.Authz))
	}
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
	if len(k.Wasm) > 0 {
		out := k.Wasm.netAround(nil, k.Port, customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz))
		return withTelemetryTCP(k.Telemetry, sideGateway, true, append(out, proxy))
	}
	if k.Authz.Empty() {
		return withTelemetryTCP(k.Telemetry, sideGateway, true, []*listener.Filter{proxy})
	}
	out := append(customTCPFilters(k.names, &k.Authz), authzTCPFilters(k.names, &k.Authz)...)
	return withTelemetryTCP(k.Telemetry, sideGateway, true, append(out, proxy))
}

// httpFilters are a router's HTTP chain's network filters: the plugins'
// network filter references, then the connection manager.
func (k gwlIn) httpFilters(hcm *listener.Filter) []*listener.Filter {
	if !k.Wasm.hasNet(k.Port) {
		return []*listener.Filter{hcm}
	}
	return append(k.Wasm.netAround(nil, k.Port, nil, nil), hcm)
}
