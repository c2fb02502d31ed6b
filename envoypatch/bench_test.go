package envoypatch

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Benchmarks of application on a typical outbound HTTP listener, cluster
// and route configuration with 3 patches that apply, and with 3 that do
// not (their matches fail on the generated content). Each iteration
// clones the message (application patches in place): the Clone
// sub-benchmark is that cost alone.

const benchPatches = `configPatches:
- applyTo: LISTENER
  match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080}}
  patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 65536}}
- applyTo: NETWORK_FILTER
  match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
  patch:
    operation: MERGE
    value:
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stream_idle_timeout: 120s
- applyTo: HTTP_FILTER
  match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
  patch:
    operation: INSERT_BEFORE
    value:
      name: envoy.lua
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
        defaultSourceCode: {inlineString: "function envoy_on_request(h) end"}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: api.ns.svc.cluster.local}}
  patch: {operation: MERGE, value: {upstream_connection_options: {tcp_keepalive: {keepalive_time: 300}}}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {portNumber: 9080}}
  patch: {operation: MERGE, value: {connect_timeout: 2s}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {subset: v9}}
  patch: {operation: REMOVE}
- applyTo: ROUTE_CONFIGURATION
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 9080}}
  patch: {operation: MERGE, value: {request_headers_to_add: [{header: {key: x-rc, value: "1"}}]}}
- applyTo: VIRTUAL_HOST
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: "api.ns.svc.cluster.local:9080"}}}
  patch: {operation: MERGE, value: {response_headers_to_add: [{header: {key: x-vh, value: "1"}}]}}
- applyTo: HTTP_ROUTE
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: "api.ns.svc.cluster.local:9080", route: {name: default}}}}
  patch: {operation: MERGE, value: {route: {timeout: 7s, retry_policy: {num_retries: 5, retry_on: 5xx}}}}
`

// benchMissPatches match the same resources' context and port but not
// their content (filter, service, virtual host names).
const benchMissPatches = `configPatches:
- applyTo: LISTENER
  match: {context: SIDECAR_OUTBOUND, listener: {name: other}}
  patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 65536}}
- applyTo: NETWORK_FILTER
  match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
  patch: {operation: REMOVE}
- applyTo: HTTP_FILTER
  match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: no.such.filter}}}}}
  patch: {operation: REMOVE}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: other.ns.svc.cluster.local}}
  patch: {operation: MERGE, value: {connect_timeout: 2s}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {name: other}}
  patch: {operation: REMOVE}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {subset: v9}}
  patch: {operation: REMOVE}
- applyTo: VIRTUAL_HOST
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: other}}}
  patch: {operation: REMOVE}
- applyTo: HTTP_ROUTE
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {route: {name: other}}}}
  patch: {operation: REMOVE}
- applyTo: ROUTE_CONFIGURATION
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {name: other}}
  patch: {operation: MERGE, value: {validate_clusters: true}}
`

func benchCluster() *cluster.Cluster {
	return &cluster.Cluster{Name: "outbound|9080||api.ns.svc.cluster.local", ConnectTimeout: durationpb.New(1e10),
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: "outbound|9080||api.ns.svc.cluster.local"}}
}

func benchRoute() *route.RouteConfiguration {
	vh := func(name string) *route.VirtualHost {
		return &route.VirtualHost{Name: name, Domains: []string{name}, Routes: []*route.Route{{Name: "default",
			Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "outbound|9080||" + name}}}}}}
	}
	return &route.RouteConfiguration{Name: "9080", VirtualHosts: []*route.VirtualHost{
		vh("api.ns.svc.cluster.local:9080"), vh("web.ns.svc.cluster.local:9080"), vh("db.ns.svc.cluster.local:9080")}}
}

func BenchmarkPatch(b *testing.B) {
	l, c, r := hcmListener(b), benchCluster(), benchRoute()
	for _, tc := range []struct {
		name string
		set  *Set
	}{{"apply", set(b, benchPatches)}, {"miss", set(b, benchMissPatches)}} {
		s := tc.set
		b.Run("Listener/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if out, fails := s.PatchListener(Outbound, proto.Clone(l).(*listener.Listener)); out == nil || fails != nil {
					b.Fatal(fails)
				}
			}
		})
		b.Run("Cluster/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if out, _ := s.PatchCluster(Outbound, proto.Clone(c).(*cluster.Cluster)); out == nil {
					b.Fatal("removed")
				}
			}
		})
		b.Run("RouteConfiguration/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.PatchRouteConfiguration(Outbound, proto.Clone(r).(*route.RouteConfiguration), nil)
			}
		})
	}
	b.Run("Clone/Listener", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = proto.Clone(l)
		}
	})
	b.Run("Clone/Cluster", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = proto.Clone(c)
		}
	})
	b.Run("Clone/RouteConfiguration", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = proto.Clone(r)
		}
	})
}
