package encode

import (
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// GRPCServerListenerPrefix starts the names of the listeners xDS-enabled
// gRPC servers request (istio-agent's bootstrap sets the template
// "xds.istio.io/grpc/lds/inbound/%s"; %s is IP:PORT).
const GRPCServerListenerPrefix = "xds.istio.io/grpc/lds/inbound/"

// Generators of proxyless gRPC listeners.
var (
	GRPCListenerGen       = resourceGen(KindListener, ListenerType, GRPCListener)
	GRPCServerListenerGen = resourceGen(KindListener, ListenerType, GRPCServerListener)
)

// GRPCListenerKey is every input of a proxyless gRPC client listener: the
// name the client asked for ("HOST:PORT", the target of xds:///HOST:PORT)
// and the service port it resolves to.
type GRPCListenerKey struct {
	// Name is the listener name as requested (the client may use a short
	// name; the listener answers under the name it asked for).
	Name    string
	Service *index.Service
	Port    uint32
}

// Hash feeds every field.
func (k *GRPCListenerKey) Hash() uint64 {
	h := NewHasher("GRPCListenerKey")
	h.Str(k.Name)
	hashSvcRow(&h, k.Service)
	h.U32(k.Port)
	return h.Sum()
}

// GRPCListener is istiod's grpcgen outbound listener: an api_listener whose
// connection manager takes routes from RDS over ADS, named like the
// service's cluster, with the filters gRPC supports (fault, router).
func GRPCListener(n index.Names, k *GRPCListenerKey) (string, proto.Message) {
	host := n.String(k.Service.Key.Host)
	addr := "0.0.0.0"
	if len(k.Service.Addresses) > 0 && k.Service.Addresses[0].IsSingleIP() {
		addr = k.Service.Addresses[0].Addr().String()
	}
	h := &hcm.HttpConnectionManager{
		HttpFilters: grpcClientHTTPFilters(),
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource:    &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}},
			RouteConfigName: outboundClusterName(k.Port, "", host),
		}},
	}
	return k.Name, &listener.Listener{
		Name:        k.Name,
		Address:     lsAddress(addr, k.Port),
		ApiListener: &listener.ApiListener{ApiListener: rtAny(h)},
	}
}

// GRPCServerListenerKey is every input of the listener of an xDS-enabled
// gRPC server on one of the proxy's service ports.
type GRPCServerListenerKey struct {
	// Name is the requested name, GRPCServerListenerPrefix + "IP:PORT".
	Name string
	// Host and Port are the listen address from the name.
	Host string
	Port uint32
	// MTLS is the server's mode: ServiceMTLSStrict serves mTLS only,
	// anything else plaintext (the engine resolves PERMISSIVE as istiod
	// does for gRPC, which cannot tell TLS from plaintext).
	MTLS ServiceMTLS
	// Authz are the AuthorizationPolicies selecting the server's workload.
	Authz AuthzPolicies
}

// Hash feeds every field.
func (k *GRPCServerListenerKey) Hash() uint64 {
	h := NewHasher("GRPCServerListenerKey")
	h.Str(k.Name)
	h.Str(k.Host)
	h.U32(k.Port)
	h.U32(uint32(k.MTLS))
	k.Authz.hashInto(&h)
	return h.Sum()
}

// GRPCServerListener is istiod's grpcgen inbound listener: one chain,
// "inbound-mtls" (server certificate and client validation from the
// "default" certificate provider, client certificates required) or
// "inbound-plaintext", whose inline routes accept every RPC
// (NonForwardingAction), with the RBAC filters of the workload's
// AuthorizationPolicies (DENY, then ALLOW) before the router.
//
// Like istiod's, the connection manager has no stat_prefix and the virtual
// host no name: gRPC ignores both (Envoy would require them).
func GRPCServerListener(n index.Names, k *GRPCServerListenerKey) (string, proto.Message) {
	suffix := "plaintext"
	var ts *core.TransportSocket
	if k.MTLS == ServiceMTLSStrict {
		suffix = "mtls"
		ts = &core.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: rtAny(&tlsv3.DownstreamTlsContext{
			CommonTlsContext:         clGRPCCommonTLS(nil),
			RequireClientCertificate: wrapperspb.Bool(true),
		})}}
	}
	filters := append(authzGRPCFilters(n, &k.Authz), hfRouter)
	h := &hcm.HttpConnectionManager{
		RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: "inbound",
			VirtualHosts: []*route.VirtualHost{{
				Domains: []string{"*"},
				Routes: []*route.Route{{
					Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
					Action: &route.Route_NonForwardingAction{NonForwardingAction: &route.NonForwardingAction{}},
				}},
			}},
		}},
		HttpFilters: filters,
	}
	return k.Name, &listener.Listener{
		Name:    k.Name,
		Address: lsAddress(k.Host, k.Port),
		FilterChains: []*listener.FilterChain{{
			Name: "inbound-" + suffix,
			Filters: []*listener.Filter{{
				Name:       "inbound-hcm" + suffix,
				ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(h)},
			}},
			TransportSocket: ts,
		}},
	}
}

// GRPCListenerName is the name of a client listener, "HOST:PORT".
func GRPCListenerName(host string, port uint32) string {
	return host + ":" + strconv.FormatUint(uint64(port), 10)
}
