package envoypatch

import (
	"errors"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	rawbuf "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// set compiles one EnvoyFilter spec into a Set.
func set(t testing.TB, y string) *Set {
	t.Helper()
	return NewSet(compile(t, y).Patches)
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sock(t testing.TB, name string, m proto.Message) *core.TransportSocket {
	return &core.TransportSocket{Name: name, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(t, m)}}
}

// TestClusterPatches: MERGE (durations replace, lists append),
// MERGE_AND_REPLACE_LIST (lists replace), REMOVE, ADD by context, and the
// transport socket rules: merged into the match of the same name, dropped
// when matches have none of that name, replacing a socket of another name.
func TestClusterPatches(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: a.ns.svc.cluster.local}}
  patch: {operation: MERGE, value: {connect_timeout: 2s, dns_lookup_family: V4_ONLY, transport_socket_matches: [{name: added}]}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: b.ns.svc.cluster.local}}
  patch: {operation: MERGE_AND_REPLACE_LIST, value: {transport_socket_matches: [{name: only}]}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {subset: gone}}
  patch: {operation: REMOVE}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {name: outbound|80|tls|t.ns.svc.cluster.local}}
  patch:
    operation: MERGE
    value:
      connect_timeout: 9s
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: patched}
- applyTo: CLUSTER
  patch: {operation: ADD, value: {name: any-added}}
- applyTo: CLUSTER
  match: {context: SIDECAR_INBOUND}
  patch: {operation: ADD, value: {name: inbound-added}}
- applyTo: CLUSTER
  match: {context: SIDECAR_INBOUND, cluster: {service: svc.ns.svc.cluster.local, portNumber: 8080}}
  patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 7}}
`)
	a := &cluster.Cluster{Name: "outbound|80||a.ns.svc.cluster.local", ConnectTimeout: &durationpb.Duration{Seconds: 1, Nanos: 500},
		TransportSocketMatches: []*cluster.Cluster_TransportSocketMatch{{Name: "orig"}}}
	got, fails := s.PatchCluster(Outbound, a)
	if got != a || len(fails) != 0 {
		t.Fatalf("PatchCluster returned %p (want the cluster passed in) and %v", got, fails)
	}
	if d := a.GetConnectTimeout(); d.GetSeconds() != 2 || d.GetNanos() != 0 {
		t.Errorf("connect_timeout %v, want 2s exactly (istiod replaces durations)", d)
	}
	if n := len(a.GetTransportSocketMatches()); n != 2 || a.GetDnsLookupFamily() != cluster.Cluster_V4_ONLY {
		t.Errorf("MERGE: %d transport socket matches (want 2, appended), family %v", n, a.GetDnsLookupFamily())
	}
	b := &cluster.Cluster{Name: "outbound|80||b.ns.svc.cluster.local", TransportSocketMatches: []*cluster.Cluster_TransportSocketMatch{{Name: "orig"}}}
	s.PatchCluster(Outbound, b)
	if m := b.GetTransportSocketMatches(); len(m) != 1 || m[0].GetName() != "only" {
		t.Errorf("MERGE_AND_REPLACE_LIST: matches %v, want only [only]", m)
	}
	if c, _ := s.PatchCluster(Outbound, &cluster.Cluster{Name: "outbound|80|gone|c.ns.svc.cluster.local"}); c != nil {
		t.Errorf("REMOVE by subset kept %v", c)
	}
	if c, _ := s.PatchCluster(Inbound, &cluster.Cluster{Name: "outbound|80|gone|c.ns.svc.cluster.local"}); c == nil {
		t.Error("an outbound REMOVE removed an inbound cluster")
	}

	// Transport socket into the match of the same name: merged typed config;
	// the value's other fields are not merged.
	tlsCluster := func() *cluster.Cluster {
		return &cluster.Cluster{Name: "outbound|80|tls|t.ns.svc.cluster.local", ConnectTimeout: durationpb.New(1e9),
			TransportSocketMatches: []*cluster.Cluster_TransportSocketMatch{
				{Name: "tlsMode-istio", TransportSocket: sock(t, "envoy.transport_sockets.tls", &tlsv3.UpstreamTlsContext{Sni: "orig", AllowRenegotiation: true})},
				{Name: "tlsMode-disabled", TransportSocket: sock(t, "envoy.transport_sockets.raw_buffer", &rawbuf.RawBuffer{})},
			}}
	}
	c := tlsCluster()
	s.PatchCluster(Outbound, c)
	up := &tlsv3.UpstreamTlsContext{}
	if err := c.TransportSocketMatches[0].GetTransportSocket().GetTypedConfig().UnmarshalTo(up); err != nil || up.GetSni() != "patched" || !up.GetAllowRenegotiation() {
		t.Errorf("merged tls context %v (%v), want sni patched and allow_renegotiation kept", up, err)
	}
	if c.GetConnectTimeout().AsDuration().Seconds() != 1 || c.GetTransportSocket() != nil {
		t.Errorf("a transport socket MERGE merged other fields: timeout %v, socket %v", c.GetConnectTimeout(), c.GetTransportSocket())
	}
	// Matches without one of that name: nothing changes.
	c = tlsCluster()
	c.TransportSocketMatches = c.TransportSocketMatches[1:]
	want := proto.Clone(c)
	s.PatchCluster(Outbound, c)
	if !proto.Equal(c, want) {
		t.Errorf("a socket MERGE onto matches without its name changed the cluster: %v", c)
	}
	// A plain socket of another name: replaced.
	c = &cluster.Cluster{Name: "outbound|80|tls|t.ns.svc.cluster.local", TransportSocket: sock(t, "other", &rawbuf.RawBuffer{})}
	s.PatchCluster(Outbound, c)
	if c.GetTransportSocket().GetName() != "envoy.transport_sockets.tls" {
		t.Errorf("socket %v, want the value's", c.GetTransportSocket())
	}

	// Inbound: a service match by the services of the port.
	in := &cluster.Cluster{Name: "inbound|8080||"}
	s.PatchClusterOfServices(Inbound, in, []string{"other.ns.svc.cluster.local", "svc.ns.svc.cluster.local"})
	if in.GetPerConnectionBufferLimitBytes().GetValue() != 7 {
		t.Errorf("inbound cluster of the service not merged: %v", in)
	}
	in = &cluster.Cluster{Name: "inbound|8080||"}
	s.PatchClusterOfServices(Inbound, in, []string{"other.ns.svc.cluster.local"})
	if in.GetPerConnectionBufferLimitBytes() != nil {
		t.Errorf("inbound cluster of another service merged: %v", in)
	}

	names := func(cs []*cluster.Cluster) (n []string) {
		for _, c := range cs {
			n = append(n, c.GetName())
		}
		return n
	}
	if got := names(s.AddedClusters(Outbound)); len(got) != 1 || got[0] != "any-added" {
		t.Errorf("outbound adds %v, want [any-added]", got)
	}
	if got := names(s.AddedClusters(Gateway)); len(got) != 1 || got[0] != "any-added" {
		t.Errorf("gateway adds %v, want [any-added]", got)
	}
	if got := names(s.AddedClusters(Inbound)); len(got) != 1 || got[0] != "inbound-added" {
		t.Errorf("inbound adds %v, want [inbound-added] (no context: outbound and gateway only)", got)
	}
	x, y := s.AddedClusters(Outbound)[0], s.AddedClusters(Outbound)[0]
	if x == y || x == s.Patches[4].Value {
		t.Error("added clusters are not fresh copies")
	}
}

// TestAnyMergeFailure: a MERGE of a typed config of another type is
// skipped and reported; the other patches apply.
func TestAnyMergeFailure(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: NETWORK_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}
  patch:
    operation: MERGE
    value:
      name: renamed
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
- applyTo: LISTENER
  patch: {operation: MERGE, value: {stat_prefix: merged}}
`)
	l := &listener.Listener{Name: "l", FilterChains: []*listener.FilterChain{{Filters: []*listener.Filter{
		{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(t, &tcp.TcpProxy{StatPrefix: "x"})}},
	}}}}
	got, fails := s.PatchListener(Outbound, l)
	if len(fails) != 1 || !errors.Is(fails[0].Err, ErrAnyMerge) || fails[0].Patch != s.Patches[0] {
		t.Fatalf("failures %v, want one ErrAnyMerge for patch 0", fails)
	}
	if f := got.FilterChains[0].Filters[0]; f.GetName() != "envoy.filters.network.tcp_proxy" {
		t.Errorf("the failed patch applied in part: filter %v", f)
	}
	if got.GetStatPrefix() != "merged" {
		t.Error("the other patch did not apply")
	}
}

// hcmListener is an outbound HTTP listener as pilotfish and istiod make
// it: a connection manager with CORS, fault and router filters, on 9080.
func hcmListener(t testing.TB) *listener.Listener {
	conn := &hcm.HttpConnectionManager{StatPrefix: "outbound_0.0.0.0_9080",
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{RouteConfigName: "9080"}},
		HttpFilters: []*hcm.HttpFilter{
			{Name: "envoy.filters.http.cors"},
			{Name: "envoy.filters.http.fault"},
			{Name: "envoy.filters.http.router", ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &router.Router{})}},
		}}
	return &listener.Listener{
		Name:            "0.0.0.0_9080",
		Address:         &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{Address: "0.0.0.0", PortSpecifier: &core.SocketAddress_PortValue{PortValue: 9080}}}},
		ListenerFilters: []*listener.ListenerFilter{{Name: "envoy.filters.listener.http_inspector"}},
		FilterChains: []*listener.FilterChain{{
			FilterChainMatch: &listener.FilterChainMatch{TransportProtocol: "raw_buffer", ApplicationProtocols: []string{"http/1.1", "h2c"}},
			Filters:          []*listener.Filter{{Name: hcmName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(t, conn)}}},
		}},
		DefaultFilterChain: &listener.FilterChain{Name: "PassthroughFilterChain", Filters: []*listener.Filter{
			{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(t, &tcp.TcpProxy{StatPrefix: "PassthroughCluster"})}},
		}},
	}
}

func httpFilterNames(t testing.TB, l *listener.Listener) []string {
	t.Helper()
	conn := &hcm.HttpConnectionManager{}
	if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(conn); err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, f := range conn.HttpFilters {
		n = append(n, f.GetName())
	}
	return n
}

// TestListenerPatches: HTTP filter operations inside the connection
// manager, the default filter chain kept when its filters are removed, a
// listener REMOVE, and a patch of another port or context ignored.
func TestListenerPatches(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: HTTP_FILTER
  match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.fault}}}}}
  patch: {operation: REPLACE, value: {name: fault2}}
- applyTo: HTTP_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.cors}}}}}
  patch: {operation: REMOVE}
- applyTo: HTTP_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
  patch: {operation: INSERT_BEFORE, value: {name: first}}
- applyTo: HTTP_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: fault2}}}}}
  patch: {operation: INSERT_AFTER, value: {name: after-fault2}}
- applyTo: HTTP_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
  patch: {operation: ADD, value: {name: last}}
- applyTo: HTTP_FILTER
  match: {listener: {portNumber: 1, filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
  patch: {operation: INSERT_FIRST, value: {name: other-port}}
- applyTo: HTTP_FILTER
  match: {context: GATEWAY}
  patch: {operation: INSERT_FIRST, value: {name: gateway-only}}
- applyTo: HTTP_FILTER
  match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
  patch: {operation: MERGE, value: {name: router2, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router, suppress_envoy_headers: true}}}
- applyTo: NETWORK_FILTER
  match: {listener: {filterChain: {name: PassthroughFilterChain, filter: {name: envoy.filters.network.tcp_proxy}}}}
  patch: {operation: REMOVE}
- applyTo: FILTER_CHAIN
  match: {listener: {filterChain: {transportProtocol: raw_buffer, applicationProtocols: "h2c,http/1.1"}}}
  patch: {operation: MERGE, value: {name: merged-chain}}
`)
	l := hcmListener(t)
	got, fails := s.PatchListener(Outbound, l)
	if got == nil || len(fails) != 0 {
		t.Fatalf("listener %v, failures %v", got, fails)
	}
	want := []string{"first", "fault2", "after-fault2", "router2", "last"}
	if n := httpFilterNames(t, got); !equalStrings(n, want) {
		t.Errorf("HTTP filters %v, want %v", n, want)
	}
	conn := &hcm.HttpConnectionManager{}
	_ = got.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(conn)
	r := &router.Router{}
	if err := conn.HttpFilters[3].GetTypedConfig().UnmarshalTo(r); err != nil || !r.GetSuppressEnvoyHeaders() {
		t.Errorf("router config %v (%v), want suppress_envoy_headers", r, err)
	}
	if conn.GetRds().GetRouteConfigName() != "9080" {
		t.Error("the connection manager lost its other fields")
	}
	if d := got.GetDefaultFilterChain(); d == nil || len(d.GetFilters()) != 0 {
		t.Errorf("default chain %v, want it kept without filters (as istiod: only a FILTER_CHAIN REMOVE drops a chain)", d)
	}
	if got.FilterChains[0].GetName() != "merged-chain" {
		t.Errorf("filter chain name %q, want merged-chain (application protocols match)", got.FilterChains[0].GetName())
	}

	rm := set(t, `configPatches:
- applyTo: LISTENER
  match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 9080}}
  patch: {operation: REMOVE}
- applyTo: LISTENER
  patch: {operation: ADD, value: {name: added}}
- applyTo: LISTENER
  match: {context: SIDECAR_INBOUND}
  patch: {operation: ADD, value: {name: added-inbound}}
`)
	if got, _ := rm.PatchListener(Outbound, hcmListener(t)); got != nil {
		t.Error("LISTENER REMOVE kept the listener")
	}
	if got, _ := rm.PatchListener(Gateway, hcmListener(t)); got == nil {
		t.Error("a SIDECAR_OUTBOUND REMOVE removed a gateway listener")
	}
	if a := rm.AddedListeners(Outbound); len(a) != 1 || a[0].GetName() != "added" {
		t.Errorf("outbound adds %v", a)
	}
	if a := rm.AddedListeners(Inbound); len(a) != 1 || a[0].GetName() != "added-inbound" {
		t.Errorf("inbound adds %v", a)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRoutePatches: gateway route configurations matched through the
// port map, by port name and gateway; a virtual host REPLACE; routes by
// action.
func TestRoutePatches(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: ROUTE_CONFIGURATION
  match: {context: GATEWAY, routeConfiguration: {portNumber: 443}}
  patch: {operation: MERGE, value: {validate_clusters: true}}
- applyTo: ROUTE_CONFIGURATION
  match: {context: GATEWAY, routeConfiguration: {portName: https, gateway: ns/gw}}
  patch: {operation: MERGE, value: {ignore_port_in_host_matching: true}}
- applyTo: VIRTUAL_HOST
  match: {context: GATEWAY, routeConfiguration: {vhost: {name: a}}}
  patch: {operation: REPLACE, value: {name: replaced, routes: [{name: r1, redirect: {path_redirect: /x}}, {name: r2, direct_response: {status: 200}}]}}
- applyTo: HTTP_ROUTE
  match: {context: GATEWAY, routeConfiguration: {vhost: {name: replaced, route: {action: DIRECT_RESPONSE}}}}
  patch: {operation: MERGE, value: {name: merged}}
- applyTo: HTTP_ROUTE
  match: {context: GATEWAY, routeConfiguration: {vhost: {route: {action: REDIRECT}}}}
  patch: {operation: REMOVE}
`)
	rc := func(name string) *route.RouteConfiguration {
		return &route.RouteConfiguration{Name: name, VirtualHosts: []*route.VirtualHost{{Name: "a"}}}
	}
	got, _ := s.PatchRouteConfiguration(Gateway, rc("https.8443.https.gw.ns"), GatewayPorts{8443: {443}})
	if !got.GetValidateClusters().GetValue() || !got.GetIgnorePortInHostMatching() {
		t.Errorf("port map and port name matches: %v", got)
	}
	vh := got.GetVirtualHosts()[0]
	if vh.GetName() != "replaced" || len(vh.GetRoutes()) != 1 || vh.GetRoutes()[0].GetName() != "merged" {
		t.Errorf("virtual host %v, want replaced with the redirect removed and the direct response merged", vh)
	}
	got, _ = s.PatchRouteConfiguration(Gateway, rc("https.8443.https.other.ns"), GatewayPorts{8443: {80}})
	if got.GetValidateClusters() != nil || got.GetIgnorePortInHostMatching() {
		t.Errorf("matched another gateway's port or name: %v", got)
	}
	got, _ = s.PatchRouteConfiguration(Gateway, rc("http.443"), nil)
	if !got.GetValidateClusters().GetValue() {
		t.Error("without a port map, the route port itself must match")
	}
	if got, _ := s.PatchRouteConfiguration(Outbound, rc("443"), nil); got.GetValidateClusters() != nil {
		t.Error("a GATEWAY patch applied to a sidecar route")
	}
}

// TestExtensionConfigs: ECDS adds, fresh copies, in order.
func TestExtensionConfigs(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: EXTENSION_CONFIG
  patch:
    operation: ADD
    value: {name: ext-a, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
- applyTo: EXTENSION_CONFIG
  patch: {operation: ADD, value: {name: ext-b}}
- applyTo: CLUSTER
  patch: {operation: ADD, value: {name: c}}
`)
	e := s.ExtensionConfigs()
	if len(e) != 2 || e[0].GetName() != "ext-a" || e[1].GetName() != "ext-b" || e[0] == s.Patches[0].Value {
		t.Errorf("extension configs %v", e)
	}
	if s.Family(Extensions) == nil || len(s.Family(Extensions).Patches) != 2 || s.Family(Listeners) != nil {
		t.Errorf("families: extensions %v, listeners %v", s.Family(Extensions), s.Family(Listeners))
	}
	if (*Set)(nil).ExtensionConfigs() != nil || NewSet(nil) != nil {
		t.Error("a nil set has extension configs")
	}
}

// TestSetFamiliesAndPrefilters: NewSet's digest follows the patches, the
// families are memoized sub-sets, and the MayPatch prefilters rule out only
// what cannot match.
func TestSetFamiliesAndPrefilters(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {service: a.ns.svc.cluster.local, portNumber: 80}}
  patch: {operation: MERGE, value: {connect_timeout: 1s}}
- applyTo: CLUSTER
  match: {context: SIDECAR_OUTBOUND, cluster: {name: outbound|90|v1|b.ns.svc.cluster.local}}
  patch: {operation: REMOVE}
- applyTo: CLUSTER
  match: {context: SIDECAR_INBOUND, cluster: {service: c.ns.svc.cluster.local}}
  patch: {operation: MERGE, value: {connect_timeout: 1s}}
- applyTo: CLUSTER
  patch: {operation: ADD, value: {name: added}}
- applyTo: HTTP_FILTER
  match: {context: SIDECAR_INBOUND, listener: {portNumber: 8080}}
  patch: {operation: INSERT_FIRST, value: {name: f}}
- applyTo: LISTENER
  match: {context: SIDECAR_OUTBOUND}
  patch: {operation: ADD, value: {name: l}}
- applyTo: VIRTUAL_HOST
  match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 9080}}
  patch: {operation: ADD, value: {name: v}}
- applyTo: HTTP_ROUTE
  match: {context: GATEWAY, routeConfiguration: {portName: https, gateway: ns/gw}}
  patch: {operation: ADD, value: {name: r}}
`)
	if s.Family(Clusters).Family(Clusters) != s.Family(Clusters) || len(s.Family(Clusters).Patches) != 4 || s.Family(Clusters).Family(Routes) != nil {
		t.Error("cluster family")
	}
	if s.Family(Routes).Digest == s.Digest || NewSet(s.Patches).Digest != s.Digest || NewSet(s.Patches[1:]).Digest == s.Digest {
		t.Error("digests do not follow the patches")
	}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"cluster a:80", s.MayPatchCluster(Outbound, "a.ns.svc.cluster.local", 80, ""), true},
		{"cluster a:81", s.MayPatchCluster(Outbound, "a.ns.svc.cluster.local", 81, ""), false},
		{"cluster b:90 v1 by name", s.MayPatchCluster(Outbound, "b.ns.svc.cluster.local", 90, "v1"), true},
		{"cluster b:90 v2", s.MayPatchCluster(Outbound, "b.ns.svc.cluster.local", 90, "v2"), false},
		{"cluster a:80 gateway", s.MayPatchCluster(Gateway, "a.ns.svc.cluster.local", 80, ""), false},
		{"inbound cluster", s.MayPatchCluster(Inbound, "", 8080, ""), true},
		{"listener 8080 inbound", s.MayPatchListener(Inbound, 8080), true},
		{"listener 9090 inbound", s.MayPatchListener(Inbound, 9090), false},
		{"virtual inbound", s.MayPatchListener(Inbound, 0), true},
		{"listener outbound (ADD only)", s.MayPatchListener(Outbound, 9080), false},
		{"route 9080", s.MayPatchRouteConfig(Outbound, "9080"), true},
		{"route 8080", s.MayPatchRouteConfig(Outbound, "8080"), false},
		{"gateway route of gw", s.MayPatchRouteConfig(Gateway, "https.443.https.gw.ns"), true},
		{"gateway route of other", s.MayPatchRouteConfig(Gateway, "https.443.https.other.ns"), false},
		{"nil set", (*Set)(nil).MayPatchListener(Inbound, 0), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestPatchValuesNotMutated: applying never changes a patch's value, even
// when the generated message is changed after (values are shared).
func TestPatchValuesNotMutated(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: CLUSTER
  patch: {operation: MERGE, value: {connect_timeout: 1s, transport_socket_matches: [{name: m, match: {a: b}}], metadata: {filter_metadata: {x: {k: v}}}}}
- applyTo: LISTENER
  patch: {operation: MERGE, value: {listener_filters: [{name: lf}]}}
`)
	before := make([][]byte, len(s.Patches))
	for i, p := range s.Patches {
		before[i], _ = proto.MarshalOptions{Deterministic: true}.Marshal(p.Value)
	}
	c, _ := s.PatchCluster(Outbound, &cluster.Cluster{Name: "c"})
	c.ConnectTimeout.Seconds = 99
	c.TransportSocketMatches[0].Name = "changed"
	c.Metadata.FilterMetadata["x"].Fields["k"] = nil
	l, _ := s.PatchListener(Outbound, &listener.Listener{Name: "l"})
	l.ListenerFilters[0].Name = "changed"
	for i, p := range s.Patches {
		after, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p.Value)
		if string(after) != string(before[i]) {
			t.Errorf("patch %d's value changed by application", i)
		}
	}
}

// TestSharedRoutes: routes shared by two virtual hosts (and their slice)
// are copied before a patch changes them, so a patch matching one host
// leaves the other as generated.
func TestSharedRoutes(t *testing.T) {
	s := set(t, `configPatches:
- applyTo: HTTP_ROUTE
  match: {routeConfiguration: {vhost: {name: a, route: {name: r}}}}
  patch: {operation: MERGE, value: {name: merged}}
- applyTo: HTTP_ROUTE
  match: {routeConfiguration: {vhost: {name: a}}}
  patch: {operation: ADD, value: {name: added}}
`)
	routes := make([]*route.Route, 1, 4)
	routes[0] = &route.Route{Name: "r"}
	rc := &route.RouteConfiguration{VirtualHosts: []*route.VirtualHost{{Name: "a", Routes: routes}, {Name: "b", Routes: routes}}}
	s.PatchRouteConfiguration(Outbound, rc, nil)
	if a := rc.VirtualHosts[0].Routes; len(a) != 2 || a[0].GetName() != "merged" || a[1].GetName() != "added" {
		t.Errorf("host a's routes %v", a)
	}
	if b := rc.VirtualHosts[1].Routes; len(b) != 1 || b[0].GetName() != "r" || routes[:2][1] != nil {
		t.Errorf("host b's routes %v (or the shared array) changed", b)
	}
	// An ADD alone must not write into the shared array's spare capacity.
	add := NewSet(s.Patches[1:])
	rc = &route.RouteConfiguration{VirtualHosts: []*route.VirtualHost{{Name: "a", Routes: routes}, {Name: "b", Routes: routes}}}
	add.PatchRouteConfiguration(Outbound, rc, nil)
	if a := rc.VirtualHosts[0].Routes; len(a) != 2 || routes[:2][1] != nil {
		t.Errorf("host a's routes %v; the shared array holds %v", a, routes[:2])
	}
}
