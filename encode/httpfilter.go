package encode

import (
	udpa "github.com/cncf/xds/go/udpa/type/v1"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cors "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	grpcstats "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	grpcweb "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldst "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	proxyprotocol "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuid "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	alpn "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"
)

// The HTTP, network and listener filters istiod puts on sidecar and
// proxyless gRPC listeners. They are built once and shared read-only by
// every generated message (marshaling never writes to a message).
var (
	// hfMxOutbound is Istio's peer metadata filter on the client side:
	// discover the upstream peer from headers or workload metadata and
	// propagate ours in headers.
	hfMxOutbound = hfTyped("istio.metadata_exchange", hfTypedStruct("type.googleapis.com/io.istio.http.peer_metadata.Config", map[string]any{
		"upstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	}))
	// hfMxInbound is the same filter on the server side.
	hfMxInbound = hfTyped("istio.metadata_exchange", hfTypedStruct("type.googleapis.com/io.istio.http.peer_metadata.Config", map[string]any{
		"downstream_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	}))
	hfGrpcStats = hfTyped("envoy.filters.http.grpc_stats", &grpcstats.FilterConfig{
		EmitFilterState:        true,
		PerMethodStatSpecifier: &grpcstats.FilterConfig_StatsForAllMethods{StatsForAllMethods: wrapperspb.Bool(false)},
	})
	// hfAlpn sets Istio's mTLS ALPN values on upstream connections, so the
	// server side can tell the protocol before TLS termination.
	hfAlpn = hfTyped("istio.alpn", &alpn.FilterConfig{AlpnOverride: []*alpn.FilterConfig_AlpnOverride{
		{UpstreamProtocol: alpn.FilterConfig_HTTP10, AlpnOverride: []string{"istio-http/1.0", "istio", "http/1.0"}},
		{UpstreamProtocol: alpn.FilterConfig_HTTP11, AlpnOverride: []string{"istio-http/1.1", "istio", "http/1.1"}},
		{UpstreamProtocol: alpn.FilterConfig_HTTP2, AlpnOverride: []string{"istio-h2", "istio", "h2"}},
	}})
	hfFault   = hfTyped(faultFilterName, &fault.HTTPFault{})
	hfCors    = hfTyped(corsFilterName, &cors.Cors{})
	hfGrpcWeb = hfTyped("envoy.filters.http.grpc_web", &grpcweb.GrpcWeb{})
	hfRouter  = hfTyped("envoy.filters.http.router", &router.Router{})

	// hfUUIDRequestID is istiod's request ID extension.
	hfUUIDRequestID = &hcm.RequestIDExtension{TypedConfig: rtAny(&uuid.UuidRequestIdConfig{
		UseRequestIdForTraceSampling: wrapperspb.Bool(true),
	})}
	// hfUUIDRequestIDNoSampling: a Telemetry's
	// useRequestIdForTraceSampling false.
	hfUUIDRequestIDNoSampling = &hcm.RequestIDExtension{TypedConfig: rtAny(&uuid.UuidRequestIdConfig{
		UseRequestIdForTraceSampling: wrapperspb.Bool(false),
	})}

	// nfMxTCP is Istio's TCP metadata exchange network filter (inbound).
	nfMxTCP = &listener.Filter{
		Name: "istio.metadata_exchange",
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(hfTypedStruct(
			"type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange",
			map[string]any{"protocol": "istio-peer-exchange", "enable_discovery": true}))},
	}

	lfHTTPInspectorConfig = rtAny(&httpinspector.HttpInspector{})
	lfTLSInspectorConfig  = rtAny(&tlsinspector.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)})
	lfOriginalDst         = &listener.ListenerFilter{
		Name:       "envoy.filters.listener.original_dst",
		ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: rtAny(&originaldst.OriginalDst{})},
	}
	lfHTTPInspector = &listener.ListenerFilter{
		Name:       "envoy.filters.listener.http_inspector",
		ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: lfHTTPInspectorConfig},
	}
	lfProxyProtocol = &listener.ListenerFilter{
		Name:       "envoy.filters.listener.proxy_protocol",
		ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: rtAny(&proxyprotocol.ProxyProtocol{})},
	}
	lfTLSInspector = &listener.ListenerFilter{
		Name:       "envoy.filters.listener.tls_inspector",
		ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: lfTLSInspectorConfig},
	}
)

func hfTyped(name string, m proto.Message) *hcm.HttpFilter {
	return &hcm.HttpFilter{Name: name, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: rtAny(m)}}
}

// hfTypedStruct wraps an Istio extension's config (not compiled into
// go-control-plane) as a udpa TypedStruct, as istiod does.
func hfTypedStruct(typeURL string, v map[string]any) *udpa.TypedStruct {
	s, err := structpb.NewStruct(v)
	if err != nil {
		panic("encode: " + typeURL + ": " + err.Error())
	}
	return &udpa.TypedStruct{TypeUrl: typeURL, Value: s}
}

// sidecarOutboundHTTPFilters is istiod's filter chain on outbound HTTP
// listeners: metadata exchange, gRPC stats, ALPN, fault, CORS, istio.stats
// (stats, non-nil), router.
func sidecarOutboundHTTPFilters(grpcWeb bool, stats *hcm.HttpFilter) []*hcm.HttpFilter {
	out := make([]*hcm.HttpFilter, 0, 8)
	out = append(out, hfMxOutbound)
	if grpcWeb {
		out = append(out, hfGrpcWeb)
	}
	out = append(out, hfGrpcStats, hfAlpn, hfFault, hfCors)
	if stats != nil {
		out = append(out, stats)
	}
	return append(out, hfRouter)
}

// sidecarInboundHTTPFilters is the inbound chain's: no ALPN override.
func sidecarInboundHTTPFilters(grpcWeb bool, stats *hcm.HttpFilter) []*hcm.HttpFilter {
	out := make([]*hcm.HttpFilter, 0, 7)
	out = append(out, hfMxInbound)
	if grpcWeb {
		out = append(out, hfGrpcWeb)
	}
	out = append(out, hfGrpcStats, hfFault, hfCors)
	if stats != nil {
		out = append(out, stats)
	}
	return append(out, hfRouter)
}

// gatewayHTTPFilters is a router's HTTP chain (before its security
// filters are inserted after metadata exchange): the outbound chain, ALPN
// override included, as istiod sets it on every HCM but a sidecar's
// inbound ones (ENABLE_ALPN_FILTER, on by default).
func gatewayHTTPFilters(grpcWeb bool, stats *hcm.HttpFilter) []*hcm.HttpFilter {
	out := make([]*hcm.HttpFilter, 0, 7)
	out = append(out, hfMxOutbound)
	if grpcWeb {
		out = append(out, hfGrpcWeb)
	}
	out = append(out, hfGrpcStats, hfAlpn, hfFault, hfCors)
	if stats != nil {
		out = append(out, stats)
	}
	return append(out, hfRouter)
}

// grpcClientHTTPFilters are the filters proxyless gRPC supports on client
// listeners: fault injection and the router (which must be last).
func grpcClientHTTPFilters() []*hcm.HttpFilter { return []*hcm.HttpFilter{hfFault, hfRouter} }
