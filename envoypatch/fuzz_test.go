package envoypatch

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

// fuzzSeeds are the EnvoyFilter specs of the istiod cases, as JSON.
func fuzzSeeds(f *testing.F) {
	for _, c := range []string{"envoyfilter-basic", "envoyfilter-ops"} {
		b, err := os.ReadFile(caseDir + "/" + c + "/config.yaml")
		if err != nil {
			f.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var obj struct {
				Kind string          `json:"kind"`
				Spec json.RawMessage `json:"spec"`
			}
			if yaml.Unmarshal([]byte(doc), &obj) == nil && obj.Kind == "EnvoyFilter" {
				f.Add([]byte(obj.Spec))
			}
		}
	}
	f.Add([]byte(`{"configPatches":[{"applyTo":"CLUSTER","patch":{"operation":"MERGE"}}]}`))
	f.Add([]byte(`{"configPatches":[{"applyTo":"HTTP_ROUTE","match":{"routeConfiguration":{"vhost":{"route":{"action":"REDIRECT"}}}},"patch":{"operation":"INSERT_FIRST","value":{}}}]}`))
}

// FuzzCompile: any spec compiles without panicking; each patch kept has
// a match and a hash that is its own.
func FuzzCompile(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ef := &networking.EnvoyFilter{}
		if protojson.Unmarshal(b, ef) != nil {
			return
		}
		c, _ := Compile("ns", "fuzz", ef)
		if c == nil {
			t.Fatal("nil filter")
		}
		for _, p := range c.Patches {
			if p.Match == nil || p.Hash != patchHash(p) {
				t.Fatalf("patch %d: match %v, hash %x", p.Index, p.Match, p.Hash)
			}
			p.MatchesProxy("1.31.0", func(string) string { return "" })
		}
	})
}

// FuzzApply: any compiled spec applied to typical generated resources in
// every context never panics and never changes a patch value.
func FuzzApply(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ef := &networking.EnvoyFilter{}
		if protojson.Unmarshal(b, ef) != nil {
			return
		}
		c, _ := Compile("ns", "fuzz", ef)
		s := NewSet(c.Patches)
		for _, ctx := range []Context{Outbound, Inbound, Gateway} {
			s.PatchListener(ctx, hcmListener(t))
			s.PatchListener(ctx, virtualInboundListener(t))
			s.PatchCluster(ctx, tlsCluster(t))
			s.PatchClusterOfServices(ctx, &cluster.Cluster{Name: "inbound|8080||"}, []string{"a.ns.svc.cluster.local"})
			want, _ := s.PatchRouteConfiguration(ctx, routeConfig(), GatewayPorts{80: {8080}})
			if got := patchAsParts(t, s, ctx, routeConfig(), GatewayPorts{80: {8080}}); !proto.Equal(got, want) {
				t.Fatalf("context %d: patched as parts\n%v\nas a message\n%v", ctx, got, want)
			}
			s.AddedClusters(ctx)
			s.AddedListeners(ctx)
			s.MayPatchCluster(ctx, "a.ns.svc.cluster.local", 80, "v1")
			s.MayPatchListener(ctx, 0)
			s.MayPatchRouteConfig(ctx, "https.443.https.gw.ns")
		}
		s.ExtensionConfigs()
		for _, p := range c.Patches {
			if p.Hash != patchHash(p) {
				t.Fatalf("patch %d's value or match changed by application", p.Index)
			}
		}
	})
}

// virtualInboundListener is a sidecar's virtual inbound listener in
// istiod's shape: listener filters, chains matched by destination port,
// transport and application protocols.
func virtualInboundListener(t testing.TB) *listener.Listener {
	h := hcmListener(t)
	fc := h.FilterChains[0]
	fc.Name = "0.0.0.0_9080"
	fc.FilterChainMatch.DestinationPort = nil
	l := &listener.Listener{Name: virtualInbound, Address: h.Address,
		ListenerFilters: []*listener.ListenerFilter{
			{Name: "envoy.filters.listener.original_dst"}, {Name: "envoy.filters.listener.tls_inspector"}, h.ListenerFilters[0],
		},
		FilterChains: []*listener.FilterChain{fc, proto.Clone(h.DefaultFilterChain).(*listener.FilterChain)},
	}
	return l
}

func tlsCluster(t testing.TB) *cluster.Cluster {
	return &cluster.Cluster{Name: "outbound|80|v1|a.ns.svc.cluster.local",
		TransportSocketMatches: []*cluster.Cluster_TransportSocketMatch{{Name: "tlsMode-istio",
			TransportSocket: sock(t, "envoy.transport_sockets.tls", &cluster.Cluster{})}}}
}

func routeConfig() *route.RouteConfiguration {
	return &route.RouteConfiguration{Name: "http.80", VirtualHosts: []*route.VirtualHost{
		{Name: "a:80", Domains: []string{"a"}, Routes: []*route.Route{
			{Name: "r", Action: &route.Route_Route{Route: &route.RouteAction{}}},
			{Name: "d", Action: &route.Route_DirectResponse{DirectResponse: &route.DirectResponseAction{Status: 200}}},
		}},
		{Name: "b:80"},
	}}
}
