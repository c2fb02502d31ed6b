package encode

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Filter names.
const (
	hcmFilterName      = "envoy.filters.network.http_connection_manager"
	tcpProxyFilterName = "envoy.filters.network.tcp_proxy"
)

// lsADS is the config source of RDS on sidecars: ADS, no initial fetch
// timeout, v3.
var lsADS = &core.ConfigSource{
	ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
	InitialFetchTimeout:   durationpb.New(0),
	ResourceApiVersion:    core.ApiVersion_V3,
}

// hcmOpts are the inputs of a sidecar HTTP connection manager.
type hcmOpts struct {
	statPrefix  string
	rds         string                    // RDS route name, or
	routeConfig *route.RouteConfiguration // an inline route configuration
	inbound     bool
	protocol    index.Protocol
	// path is the mesh's path normalization.
	path PathNormalization
	// tel adds istio.stats and access logs (inbound: the server side).
	tel *Telemetry
	// wasm are an outbound HCM's WasmPlugin filter references (the
	// listener's port already chosen: every one applies), after metadata
	// exchange; inbound ones are placed by inboundSecurity.withHTTP.
	wasm WasmFilters
	// tracing is the HCM's tracing (encode/tracing.go); nil: none.
	tracing *Tracing
}

// lsHCM is istiod's buildHTTPConnectionManager for sidecars, without
// access logs.
func lsHCM(o hcmOpts) *hcm.HttpConnectionManager {
	h := &hcm.HttpConnectionManager{
		StatPrefix:         o.statPrefix,
		StreamIdleTimeout:  durationpb.New(0),
		UseRemoteAddress:   wrapperspb.Bool(false),
		UpgradeConfigs:     []*hcm.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		RequestIdExtension: hfUUIDRequestID,
		Proxy_100Continue:  true,
	}
	o.path.apply(h)
	o.tracing.apply(h)
	if o.rds != "" {
		h.RouteSpecifier = &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: lsADS, RouteConfigName: o.rds}}
	} else {
		h.RouteSpecifier = &hcm.HttpConnectionManager_RouteConfig{RouteConfig: o.routeConfig}
	}
	grpcWeb := o.protocol == index.ProtocolGRPCWeb
	if o.inbound {
		h.HttpFilters = sidecarInboundHTTPFilters(grpcWeb, o.tel.statsHTTP(sideInbound))
		h.AccessLog = o.tel.accessLogs(sideInbound, false)
		h.ServerName = "istio-envoy"
		h.ForwardClientCertDetails = hcm.HttpConnectionManager_APPEND_FORWARD
		h.SetCurrentClientCertDetails = &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Dns: true, Uri: true,
		}
		if o.protocol == index.ProtocolHTTP2 || o.protocol == index.ProtocolGRPC {
			h.Http2ProtocolOptions = &core.Http2ProtocolOptions{}
		}
	} else {
		h.HttpFilters = sidecarOutboundHTTPFilters(grpcWeb, o.tel.statsHTTP(sideOutbound))
		h.AccessLog = o.tel.accessLogs(sideOutbound, false)
		if len(o.wasm) > 0 {
			h.HttpFilters = (&inboundSecurity{wasm: o.wasm}).withHTTP(h, 0).HttpFilters
		}
	}
	return h
}

func lsHCMFilter(h *hcm.HttpConnectionManager) *listener.Filter {
	return &listener.Filter{Name: hcmFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(h)}}
}

func lsTCPProxy(statPrefix, cluster string) *listener.Filter {
	return lsTCPProxyFilter(&tcp.TcpProxy{StatPrefix: statPrefix, ClusterSpecifier: &tcp.TcpProxy_Cluster{Cluster: cluster}})
}

func lsTCPProxyFilter(p *tcp.TcpProxy) *listener.Filter {
	return &listener.Filter{Name: tcpProxyFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(p)}}
}

// lsAddress builds a socket address.
func lsAddress(addr string, port uint32) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Address:       addr,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
}
