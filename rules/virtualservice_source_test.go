package rules

import (
	"net/netip"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

const sourceMesh = `
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: shop}
spec:
  clusterIP: 10.96.0.20
  ports: [{name: tcp, port: 3306}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings-canary, namespace: shop}
spec:
  clusterIP: 10.96.0.21
  ports: [{name: tcp, port: 3306}]
`

const sourceVS = `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - name: from-productpage
    match: [{sourceLabels: {app: productpage}, uri: {prefix: /api}}]
    route: [{destination: {host: reviews}}]
  - name: mesh-gateway-wins
    match: [{gateways: [mesh], sourceLabels: {app: nobody}, uri: {prefix: /gw}}]
    route: [{destination: {host: reviews}}]
  - name: rest
    route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: shop}
spec:
  hosts: [ratings]
  tcp:
  - match: [{sourceLabels: {app: productpage, version: v1}}]
    route: [{destination: {host: ratings-canary}}]
  - route: [{destination: {host: ratings}}]
`

// TestVirtualServiceSourceLabels: a match with sourceLabels applies to the
// proxies whose labels hold them (istiod's sourceMatchHTTP and matchTCP),
// and a match naming gateways with "mesh" among them applies whatever its
// labels.
func TestVirtualServiceSourceLabels(t *testing.T) {
	w := newScopedWriter(t, sourceMesh, sourceVS)
	snap := w.w.Snapshot()
	e := newTestEngine(nil, testOptions{})
	tests := []struct {
		name   string
		labels map[string]string
		routes []string // route names of reviews' virtual host
		tcp    string   // cluster of ratings' listener
	}{
		{"productpage v1", map[string]string{"app": "productpage", "version": "v1"},
			[]string{"from-productpage", "mesh-gateway-wins", "rest"}, "outbound|3306||ratings-canary.shop.svc.cluster.local"},
		{"productpage v2", map[string]string{"app": "productpage", "version": "v2"},
			[]string{"from-productpage", "mesh-gateway-wins", "rest"}, "outbound|3306||ratings.shop.svc.cluster.local"},
		{"another app", map[string]string{"app": "details", "version": "v1"},
			[]string{"mesh-gateway-wins", "rest"}, "outbound|3306||ratings.shop.svc.cluster.local"},
		{"no labels", nil,
			[]string{"mesh-gateway-wins", "rest"}, "outbound|3306||ratings.shop.svc.cluster.local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := proxyScope(e, snap, "shop", tt.labels)
			cache := verifyCache()
			rs, err := Build(encode.RouteConfigurationType, sc, e.meshFor(sc), cache, []string{"9080"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, vh := range decodeRoutes(t, rs)[0].VirtualHosts {
				if vh.Name == "reviews.shop.svc.cluster.local:9080" {
					got = routeNames(vh.Routes)
				}
			}
			if !slices.Equal(got, tt.routes) {
				t.Errorf("routes = %v, want %v", got, tt.routes)
			}
			ls, err := Build(encode.ListenerType, sc, e.meshFor(sc), cache, []string{"10.96.0.20_3306"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c := tcpCluster(t, decodeListeners(t, ls), "10.96.0.20_3306"); c != tt.tcp {
				t.Errorf("ratings listener goes to %q, want %q", c, tt.tcp)
			}
		})
	}
}

// TestSourceLabelsClass: the labels sourceLabels name split classes, the
// others do not, and without sourceLabels no label does.
func TestSourceLabelsClass(t *testing.T) {
	e := newTestEngine(nil, testOptions{})
	classLabelsOf := func(snap *index.Snapshot, labels map[string]string) string {
		return e.classOf(snap, &Node{ID: "p.shop", Type: encode.ProxySidecar, Namespace: "shop", Labels: labels}).Labels
	}
	plain := newScopedWriter(t, sourceMesh).w.Snapshot()
	if a, b := classLabelsOf(plain, map[string]string{"app": "productpage"}), classLabelsOf(plain, map[string]string{"app": "details"}); a != b {
		t.Errorf("without sourceLabels, classes differ by app: %q vs %q", a, b)
	}
	snap := newScopedWriter(t, sourceMesh, sourceVS).w.Snapshot()
	a := classLabelsOf(snap, map[string]string{"app": "productpage", "pod-template-hash": "abc"})
	b := classLabelsOf(snap, map[string]string{"app": "productpage", "pod-template-hash": "def"})
	if a != b || a != "app=productpage" {
		t.Errorf("class labels = %q and %q, want both app=productpage", a, b)
	}
	if c := classLabelsOf(snap, map[string]string{"app": "details"}); c == a {
		t.Errorf("productpage and details share class labels %q", c)
	}
	// A VirtualService not exported to the proxy's namespace adds no key.
	hidden := newScopedWriter(t, sourceMesh, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  exportTo: ["."]
  http:
  - match: [{sourceLabels: {app: productpage}}]
    route: [{destination: {host: reviews}}]
`).w.Snapshot()
	other := func(labels map[string]string) string {
		return e.classOf(hidden, &Node{ID: "p.web", Type: encode.ProxySidecar, Namespace: "web", Labels: labels}).Labels
	}
	if a, b := other(map[string]string{"app": "productpage"}), other(map[string]string{"app": "details"}); a != b {
		t.Errorf("a private VirtualService of another namespace splits classes: %q vs %q", a, b)
	}
}

const sourceGateway = `
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 3306, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/public]
  http:
  - name: zone-a
    match: [{sourceLabels: {zone: a}, uri: {prefix: /a}}]
    route: [{destination: {host: reviews, port: {number: 9080}}}]
  - name: rest
    route: [{destination: {host: reviews, port: {number: 9080}}}]
  tcp:
  - match: [{sourceLabels: {zone: nowhere}, sourceNamespace: nowhere}]
    route: [{destination: {host: reviews, port: {number: 9080}}}]
`

// TestGatewaySourceLabels: a gateway's HTTP routes apply sourceLabels to
// the router pod's labels; its TCP routes ignore sourceLabels and
// sourceNamespace (istiod's l4SingleMatch: port and gateways only).
func TestGatewaySourceLabels(t *testing.T) {
	snap := newScopedWriter(t, sourceGateway).w.Snapshot()
	e := newTestEngine(nil, testOptions{})
	for _, tt := range []struct {
		zone   string
		routes []string
	}{{"a", []string{"zone-a", "rest"}}, {"b", []string{"rest"}}} {
		t.Run("zone "+tt.zone, func(t *testing.T) {
			node := &Node{ID: "ingress.istio-system", Type: encode.ProxyRouter, Namespace: "istio-system",
				IPs: []netip.Addr{netip.MustParseAddr("10.244.1.1")}, Labels: map[string]string{"istio": "ingressgateway", "zone": tt.zone}}
			class := e.classOf(snap, node)
			sc := NewScope(snap, &class)
			cache := verifyCache()
			rs, err := Build(encode.RouteConfigurationType, sc, e.meshFor(sc), cache, []string{"http.80"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, vh := range decodeRoutes(t, rs)[0].VirtualHosts {
				if vh.Name == "shop.example.com:80" {
					got = routeNames(vh.Routes)
				}
			}
			if !slices.Equal(got, tt.routes) {
				t.Errorf("routes = %v, want %v", got, tt.routes)
			}
			ls, err := Build(encode.ListenerType, sc, e.meshFor(sc), cache, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c := tcpCluster(t, decodeListeners(t, ls), "0.0.0.0_3306"); c != "outbound|9080||reviews.shop.svc.cluster.local" {
				t.Errorf("TCP server goes to %q, want the route's cluster", c)
			}
		})
	}
}

func routeNames(rs []*route.Route) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// tcpCluster is the cluster of the first TCP proxy of the listener named
// name.
func tcpCluster(t *testing.T, ls []*listener.Listener, name string) string {
	t.Helper()
	i := slices.IndexFunc(ls, func(l *listener.Listener) bool { return l.Name == name })
	if i < 0 {
		t.Fatalf("no listener %s", name)
	}
	for _, fc := range ls[i].FilterChains {
		for _, f := range fc.Filters {
			if f.Name != "envoy.filters.network.tcp_proxy" {
				continue
			}
			var p tcp.TcpProxy
			if err := f.GetTypedConfig().UnmarshalTo(&p); err != nil {
				t.Fatal(err)
			}
			return p.GetCluster()
		}
	}
	t.Fatalf("no tcp_proxy in %s", name)
	return ""
}
