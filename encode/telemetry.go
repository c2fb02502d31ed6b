package encode

import (
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	stats "istio.io/api/envoy/extensions/stats"
)

// Istio's standard metrics (istio_requests_total, istio_tcp_*, ...) come
// from the proxy's istio.stats filter, which istiod adds to every HTTP
// connection manager and TCP filter chain of sidecars and gateways when
// the mesh's default metrics provider is a prometheus one (its chart's
// defaultProviders.metrics: [prometheus]) and no Telemetry resource
// changes it. Mesh.Stats says so; the listener keys hold it as a value, so
// an encoding stays shared by every proxy of its class.

// statsFilterName is the name istiod gives the filter (xds.StatsFilterName).
const statsFilterName = "istio.stats"

// The stats filter's configs, as istiod's generateStatsConfig builds them
// without Telemetry overrides: the client side (sidecar outbound) keeps
// the Host header fallback for the destination service; the server side
// (sidecar inbound) and gateways disable it. istiod's reporter
// SERVER_GATEWAY is for waypoints only, which pilotfish does not serve.
var (
	hfStatsClient = hfTyped(statsFilterName, &stats.PluginConfig{})
	hfStatsServer = hfTyped(statsFilterName, &stats.PluginConfig{DisableHostHeaderFallback: true})
	nfStatsClient = &listener.Filter{
		Name:       statsFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: hfStatsClient.GetTypedConfig()},
	}
	nfStatsServer = &listener.Filter{
		Name:       statsFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: hfStatsServer.GetTypedConfig()},
	}
)

// statsHTTP is the HTTP stats filter of a listener side (server: sidecar
// inbound or gateway), or nil when stats are off.
func statsHTTP(on, server bool) *hcm.HttpFilter {
	switch {
	case !on:
		return nil
	case server:
		return hfStatsServer
	}
	return hfStatsClient
}

// withStatsTCP inserts the stats network filter before the last of
// filters (the proxy filter), as istiod orders them: metadata exchange,
// RBAC, stats, tcp_proxy. filters is not modified.
func withStatsTCP(on, server bool, filters []*listener.Filter) []*listener.Filter {
	if !on || len(filters) == 0 {
		return filters
	}
	f := nfStatsClient
	if server {
		f = nfStatsServer
	}
	out := make([]*listener.Filter, 0, len(filters)+1)
	out = append(out, filters[:len(filters)-1]...)
	return append(out, f, filters[len(filters)-1])
}
