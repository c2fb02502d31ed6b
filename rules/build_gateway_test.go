package rules

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

const gatewayGoldenDir = "../encode/testdata/golden/gateway"

// buildRouter builds a router's LDS (wildcard) and the RDS its listeners
// name, validates every resource, and checks them against golden files.
func buildRouter(t *testing.T, sc *Scope, golden string) ([]*listener.Listener, []*route.RouteConfiguration) {
	t.Helper()
	mesh := encode.DefaultMesh()
	ls, err := buildGatewayListeners(sc, mesh, verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	listeners := decodeListeners(t, ls)
	names := rdsNamesOf(t, listeners)
	if want := gatewayRouteNames(sc, encode.DefaultMesh()); !slices.Equal(sortedCopy(names), sortedCopy(want)) {
		t.Fatalf("listeners name routes %v, the merged gateway has %v", names, want)
	}
	rs, err := buildRoutes(sc, mesh, verifyCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	routes := decodeRoutes(t, rs)
	var lm, rm []proto.Message
	for _, l := range listeners {
		validate(t, l)
		lm = append(lm, l)
	}
	for _, r := range routes {
		validate(t, r)
		rm = append(rm, r)
	}
	checkGolden(t, filepath.Join(gatewayGoldenDir, golden+".lds.json"), goldenResources(t, lm))
	checkGolden(t, filepath.Join(gatewayGoldenDir, golden+".rds.json"), goldenResources(t, rm))
	return listeners, routes
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func downstreamTLS(t *testing.T, fc *listener.FilterChain) *tlsv3.DownstreamTlsContext {
	t.Helper()
	ctx := &tlsv3.DownstreamTlsContext{}
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func routeCluster(r *route.Route) string { return r.GetRoute().GetCluster() }

var benchLabels = map[string]string{"istio.io/benchmark": "true"}

// TestGatewaysWorkload: istio-bench's gateways workload (Services=10):
// ten Gateways, each an HTTP server on 80 and an ISTIO_MUTUAL HTTPS server
// on 443 for three hosts, and a VirtualService per Gateway. One listener per
// port; http.80 merges every Gateway's hosts (three hosts with one
// VirtualService collapse into one virtual host); each HTTPS server has its
// own route configuration, https.443.https.gateway-I.gateway.
func TestGatewaysWorkload(t *testing.T) {
	snap := lrWorkload(t, "gateways")
	sc := routerScope(snap, "istio-system", benchLabels)
	if got := strings.Count(sc.Class.Gateways, ",") + 1; got != 10 {
		t.Fatalf("router selects %d Gateways (%s), want 10", got, sc.Class.Gateways)
	}
	listeners, routes := buildRouter(t, sc, "gateways.s10.router")
	if len(listeners) != 2 || listeners[0].Name != "0.0.0.0_80" || listeners[1].Name != "0.0.0.0_443" {
		t.Fatalf("listeners %v, want 0.0.0.0_80 and 0.0.0.0_443", rdsNamesOf(t, listeners))
	}
	if n := len(listeners[0].FilterChains); n != 1 {
		t.Errorf("port 80: %d filter chains, want one shared HTTP chain", n)
	}
	https := listeners[1]
	if len(https.FilterChains) != 10 || len(https.ListenerFilters) != 1 {
		t.Fatalf("port 443: %d chains and %d listener filters, want 10 and tls_inspector", len(https.FilterChains), len(https.ListenerFilters))
	}
	fc := https.FilterChains[0]
	if got := fc.GetFilterChainMatch().GetServerNames(); !slices.Equal(got, []string{"random-a-0.host.example", "random-b-0.host.example", "random-c-0.host.example"}) {
		t.Errorf("first HTTPS chain matches SNI %v", got)
	}
	ctx := downstreamTLS(t, fc)
	if !ctx.GetRequireClientCertificate().GetValue() || ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName() != "default" ||
		ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != "ROOTCA" {
		t.Errorf("ISTIO_MUTUAL context: %v", ctx)
	}
	h := hcmFromFilter(t, fc.Filters[0])
	if got := h.GetRds().GetRouteConfigName(); got != "https.443.https.gateway-0.gateway" {
		t.Errorf("first HTTPS chain routes by %q", got)
	}
	if !h.GetUseRemoteAddress().GetValue() || h.GetForwardClientCertDetails() != hcm.HttpConnectionManager_SANITIZE_SET {
		t.Errorf("gateway HCM: use_remote_address %v, xfcc %v", h.GetUseRemoteAddress(), h.GetForwardClientCertDetails())
	}
	if len(routes) != 11 || routes[0].Name != "http.80" {
		t.Fatalf("%d route configurations (first %q), want http.80 and 10 HTTPS ones", len(routes), routes[0].Name)
	}
	http := routes[0]
	if len(http.VirtualHosts) != 10 {
		t.Fatalf("http.80 has %d virtual hosts, want 10 (three hosts each)", len(http.VirtualHosts))
	}
	vh := http.VirtualHosts[0]
	if vh.Name != "random-a-0.host.example:80" || len(vh.Domains) != 3 || len(vh.Routes) != 1 ||
		routeCluster(vh.Routes[0]) != "outbound|80||random-0.host.example" || vh.Routes[0].GetMatch().GetPrefix() != "/route-0" {
		t.Errorf("http.80 first virtual host: %v", vh)
	}
	for _, rc := range routes[1:] {
		if len(rc.VirtualHosts) != 1 || len(rc.VirtualHosts[0].Routes) != 1 {
			t.Fatalf("%s: %v", rc.Name, rc.VirtualHosts)
		}
		// The destination names no port: its service's only port (80),
		// not the server's 443.
		if c := routeCluster(rc.VirtualHosts[0].Routes[0]); !strings.HasPrefix(c, "outbound|80||random-") {
			t.Errorf("%s routes to %s", rc.Name, c)
		}
	}
}

// TestGatewaysSharedWorkload: one Gateway, VirtualService per service on
// the same three hosts: each host's virtual host holds every
// VirtualService's routes, and the three hosts collapse into one.
func TestGatewaysSharedWorkload(t *testing.T) {
	snap := lrWorkload(t, "gateways-shared")
	sc := routerScope(snap, "istio-system", benchLabels)
	_, routes := buildRouter(t, sc, "gateways-shared.s10.router")
	if len(routes) != 2 {
		t.Fatalf("%d route configurations, want http.80 and https.443.https.gateway.gateway", len(routes))
	}
	for _, rc := range routes {
		if len(rc.VirtualHosts) != 1 || len(rc.VirtualHosts[0].Domains) != 3 {
			t.Fatalf("%s: want one virtual host for three hosts, got %v", rc.Name, rc.VirtualHosts)
		}
		if n := len(rc.VirtualHosts[0].Routes); n != 60 {
			t.Errorf("%s: %d routes, want 10 VirtualServices × 6 matches", rc.Name, n)
		}
	}
}

// TestKnativeGatewayWorkload: two Gateways on ports 80 and 8081 with host
// "*", VirtualServices bound to both with per-match gateway conditions:
// the local gateway's routes (matches naming it) appear on 8081 only.
func TestKnativeGatewayWorkload(t *testing.T) {
	y, err := istiobench.Render("knative-gateway", istiobench.Params{Services: 10})
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"knative-gateway.yaml": lenientDocs(y)})
	sc := routerScope(snap, "istio-system", benchLabels)
	listeners, routes := buildRouter(t, sc, "knative-gateway.s10.router")
	if len(listeners) != 2 || len(routes) != 2 {
		t.Fatalf("%d listeners, %d routes, want 2 and 2 (http.80, http.8081)", len(listeners), len(routes))
	}
	count := func(rc *route.RouteConfiguration) int {
		n := 0
		for _, vh := range rc.VirtualHosts {
			n += len(vh.Routes)
		}
		return n
	}
	ext, local := routes[0], routes[1]
	if ext.Name != "http.80" || local.Name != "http.8081" {
		t.Fatalf("routes %s, %s", ext.Name, local.Name)
	}
	if count(local) <= count(ext) {
		t.Errorf("http.8081 has %d routes, http.80 %d: the local gateway's matches should add routes", count(local), count(ext))
	}
}

// lenientDocs reads YAML as istiod's lenient reader does (see
// internal/istiobench): in a document holding two objects (knative-gateway's
// template lacks a "---"), the repeated top-level keys of the second win,
// so the first object is dropped.
func lenientDocs(y []byte) []byte {
	var out []string
	for _, doc := range strings.Split(string(y), "\n---") {
		if i := strings.LastIndex(doc, "\napiVersion:"); i > 0 && strings.Count(doc, "\napiVersion:")+boolInt(strings.HasPrefix(doc, "apiVersion:")) > 1 {
			doc = doc[i:]
		}
		out = append(out, doc)
	}
	return []byte(strings.Join(out, "\n---"))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestExamplesIngressGateway: examples/ public gateway: SIMPLE TLS from
// credentialName secrets over ADS (kubernetes://NAME), hosts pinned to
// namespaces ("bookinfo/bookinfo.example.com" takes routes only from
// bookinfo).
func TestExamplesIngressGateway(t *testing.T) {
	snap := lrExamples(t)
	labels := map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"}
	sc := routerScope(snap, "istio-system", labels)
	// The router's pod backs istio-ingressgateway, whose ports 80 and 443
	// go to 8080 and 8443: istiod's port translation binds the servers there.
	sc.GatewayTargets = ComputeGatewayTargets(snap, &Node{Type: encode.ProxyRouter, Namespace: "istio-system",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}, Labels: labels})
	listeners, routes := buildRouter(t, sc, "examples.ingressgateway")
	var https *listener.Listener
	var names []string
	for _, l := range listeners {
		names = append(names, l.Name)
		if l.Name == "0.0.0.0_8443" {
			https = l
		}
	}
	if https == nil || len(https.FilterChains) != 2 {
		t.Fatalf("no 0.0.0.0_8443 with two chains: %v", names)
	}
	if slices.ContainsFunc(names, func(n string) bool { return n == "0.0.0.0_80" || n == "0.0.0.0_443" }) {
		t.Errorf("listeners %v: a server on its untranslated port", names)
	}
	ctx := downstreamTLS(t, https.FilterChains[0])
	sds := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
	if len(sds) != 1 || sds[0].GetName() != "kubernetes://bookinfo-example-com-tls" || sds[0].GetSdsConfig().GetAds() == nil ||
		ctx.GetRequireClientCertificate().GetValue() {
		t.Errorf("SIMPLE context: %v", ctx)
	}
	for _, rc := range routes {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				c := routeCluster(r)
				if strings.HasPrefix(vh.Name, "bookinfo.") && strings.Contains(c, ".shop.") ||
					strings.HasPrefix(vh.Name, "shop.") && strings.Contains(c, ".bookinfo.") {
					t.Errorf("%s: virtual host %s routes across namespaces to %s", rc.Name, vh.Name, c)
				}
			}
		}
		if len(rc.VirtualHosts) == 0 || rc.VirtualHosts[0].Name == "blackhole:80" {
			t.Errorf("%s: no virtual host bound", rc.Name)
		}
	}
}

// TestMergedGatewayReuse: a config change the router does not depend on
// (a service elsewhere) keeps its merged gateway, route keys included; a
// change to a bound VirtualService builds a new one whose routes show it.
func TestMergedGatewayReuse(t *testing.T) {
	y, err := istiobench.Render("gateways", istiobench.Params{Services: 3})
	if err != nil {
		t.Fatal(err)
	}
	sw := newScopedWriter(t, string(y))
	var vs Views // as an engine's scopes share them
	scope := func() *Scope {
		snap := sw.w.Snapshot()
		class := routerScope(snap, "istio-system", benchLabels).Class
		return NewScopeIn(vs.Of(snap), snap, class)
	}
	first := gatewayOf(scope(), encode.DefaultMesh())
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: other, namespace: elsewhere}
spec: {clusterIP: 10.96.7.7, ports: [{name: http, port: 80}]}`)
	if gatewayOf(scope(), encode.DefaultMesh()) != first {
		t.Error("an unrelated service rebuilt the router's merged gateway")
	}
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs-0, namespace: gateway}
spec:
  hosts: [random-a-0.host.example, random-b-0.host.example, random-c-0.host.example]
  gateways: [gateway/gateway-0]
  http: [{match: [{uri: {prefix: /changed}}], route: [{destination: {host: random-0.host.example}}]}]`)
	sc := scope()
	if gatewayOf(sc, encode.DefaultMesh()) == first {
		t.Fatal("a changed bound VirtualService kept the old merged gateway")
	}
	rs, err := buildRoutes(sc, encode.DefaultMesh(), verifyCache(), []string{"http.80"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeRoutes(t, rs)[0]; r.VirtualHosts[0].Routes[0].GetMatch().GetPrefix() != "/changed" {
		t.Errorf("http.80 first route %v, want the changed prefix", r.VirtualHosts[0].Routes[0].GetMatch())
	}
}

// routerScope is the scope of a router with labels in ns, its Gateways
// selected as Engine.ClassOf selects them.
func routerScope(snap *index.Snapshot, ns string, labels map[string]string) *Scope {
	class := &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: ns, ClusterID: "Kubernetes"}
	class.Gateways = SelectGateways(snap, labels)
	return NewScope(snap, class)
}
