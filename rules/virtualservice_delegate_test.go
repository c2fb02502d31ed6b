package rules

import (
	"net/netip"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

const delegateMesh = `
apiVersion: v1
kind: Service
metadata: {name: productpage, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: shop}
spec:
  clusterIP: 10.96.0.11
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: details, namespace: team}
spec:
  clusterIP: 10.96.0.12
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: shop}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/productpage.shop.svc.cluster.local"]
`

const delegateRoot = `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: shop}
spec:
  hosts: [productpage.shop.svc.cluster.local]
  gateways: [mesh, public]
  http:
  - name: api
    match: [{uri: {prefix: /api}}]
    timeout: 5s
    delegate: {name: api, namespace: team}
  - name: missing
    match: [{uri: {prefix: /missing}}]
    delegate: {name: nope}
  - name: hidden
    match: [{uri: {prefix: /hidden}}]
    delegate: {name: private, namespace: team}
  - name: rest
    route: [{destination: {host: productpage}}]
`

const delegateAPI = `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: team}
spec:
  http:
  - name: v1
    match: [{uri: {prefix: /api/v1}, headers: {x-team: {exact: a}}}]
    route: [{destination: {host: details}}]
  - name: elsewhere
    match: [{uri: {prefix: /other}}]
    route: [{destination: {host: details}}]
  - name: all
    timeout: 1s
    route: [{destination: {host: ratings.shop.svc.cluster.local}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: private, namespace: team}
spec:
  exportTo: ["."]
  http:
  - route: [{destination: {host: details}}]
`

// wantRoute is what a test checks of a translated route.
type wantRoute struct {
	name, prefix, cluster, timeout string
	headers                        int
}

func checkRoutes(t *testing.T, who string, got []*route.Route, want []wantRoute) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: routes %v, want %d", who, routeNames(got), len(want))
	}
	for i, w := range want {
		r := got[i]
		a := r.GetRoute()
		if r.Name != w.name || r.GetMatch().GetPrefix() != w.prefix || a.GetCluster() != w.cluster ||
			a.GetTimeout().AsDuration().String() != w.timeout || len(r.GetMatch().GetHeaders()) != w.headers {
			t.Errorf("%s: route %d = %s prefix %q cluster %q timeout %v headers %d, want %+v",
				who, i, r.Name, r.GetMatch().GetPrefix(), a.GetCluster(), a.GetTimeout().AsDuration(), len(r.GetMatch().GetHeaders()), w)
		}
	}
}

// TestVirtualServiceDelegate: a root's delegating route is replaced by the
// delegate's routes merged with it (istiod's mergeVirtualServices): the
// root's match narrows to each delegate match that fits under it (one
// that does not drops its route), the root's timeout fills in where the
// delegate sets none, the delegate's short names resolve in its own
// namespace; a missing delegate, or one not exported to the root's
// namespace, drops the delegating route. Sidecars and gateways alike.
func TestVirtualServiceDelegate(t *testing.T) {
	snap := newScopedWriter(t, delegateMesh, delegateRoot, delegateAPI).w.Snapshot()
	e := newTestEngine(nil, testOptions{})
	want := []wantRoute{
		{"api-v1", "/api/v1", "outbound|9080||details.team.svc.cluster.local", "5s", 1},
		{"api-all", "/api", "outbound|9080||ratings.shop.svc.cluster.local", "1s", 0},
		{"rest", "/", "outbound|9080||productpage.shop.svc.cluster.local", "0s", 0},
	}

	sc := proxyScope(e, snap, "shop", nil)
	rs, err := Build(encode.RouteConfigurationType, sc, e.meshFor(sc), verifyCache(), []string{"9080"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, "sidecar", vhost(t, decodeRoutes(t, rs)[0], "productpage.shop.svc.cluster.local:9080").Routes, want)

	node := &Node{ID: "ingress.shop", Type: encode.ProxyRouter, Namespace: "shop",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.1")}, Labels: map[string]string{"istio": "ingressgateway"}}
	class := e.classOf(snap, node)
	gsc := NewScope(snap, &class)
	rs, err = Build(encode.RouteConfigurationType, gsc, e.meshFor(gsc), verifyCache(), []string{"http.80"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, "gateway", vhost(t, decodeRoutes(t, rs)[0], "productpage.shop.svc.cluster.local:80").Routes, want)
}

// TestVirtualServiceDelegateScope: a Sidecar importing only the root's
// namespace still imports the services the delegate's routes go to, and a
// change to the delegate concerns the scopes holding its root only.
func TestVirtualServiceDelegateScope(t *testing.T) {
	const sidecar = `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: unrelated, namespace: team}
spec:
  http:
  - route: [{destination: {host: details}}]
`
	snap := newScopedWriter(t, delegateMesh, delegateRoot, delegateAPI, sidecar).w.Snapshot()
	e := newTestEngine(nil, testOptions{})
	sc := proxyScope(e, snap, "shop", nil)
	details := index.ServiceKey{Host: sym(snap, "details.team.svc.cluster.local"), Namespace: sym(snap, "team")}
	if !sc.HoldsService(details) {
		t.Error("the delegate's destination details.team is not in the Sidecar-scoped proxy's scope")
	}
	key := func(ns, name string) index.ConfigKey {
		return index.ConfigKey{Namespace: sym(snap, ns), Name: sym(snap, name)}
	}
	if !sc.HoldsConfig(index.ConfigVirtualService, key("team", "api")) {
		t.Error("a change to the delegate team/api does not concern the root's proxies")
	}
	if sc.HoldsConfig(index.ConfigVirtualService, key("team", "unrelated")) {
		t.Error("a hostless VirtualService no root names concerns the proxy")
	}
}

func sym(snap *index.Snapshot, s string) index.Sym {
	id, _ := snap.Symbols.Lookup(s)
	return id
}

func vhost(t *testing.T, rc *route.RouteConfiguration, name string) *route.VirtualHost {
	t.Helper()
	for _, vh := range rc.VirtualHosts {
		if vh.Name == name {
			return vh
		}
	}
	var names []string
	for _, vh := range rc.VirtualHosts {
		names = append(names, vh.Name)
	}
	t.Fatalf("no virtual host %s in %s: %v", name, rc.Name, names)
	return nil
}

// TestDelegateMatchConflict pins istiod's hasConflict: a delegate match
// must narrow its root's.
func TestDelegateMatchConflict(t *testing.T) {
	prefix := func(p string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: p}}
	}
	exact := func(e string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: e}}
	}
	regex := func(r string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: r}}
	}
	type m = networking.HTTPMatchRequest
	tests := []struct {
		name       string
		root, leaf *m
		conflict   bool
	}{
		{"prefix under prefix", &m{Uri: prefix("/a")}, &m{Uri: prefix("/a/b")}, false},
		{"prefix above prefix", &m{Uri: prefix("/a/b")}, &m{Uri: prefix("/a")}, true},
		{"exact under prefix", &m{Uri: prefix("/a")}, &m{Uri: exact("/a/x")}, false},
		{"same exact", &m{Uri: exact("/a")}, &m{Uri: exact("/a")}, false},
		{"prefix under exact", &m{Uri: exact("/a")}, &m{Uri: prefix("/a")}, true},
		{"regex on either side", &m{Uri: regex("/a.*")}, &m{Uri: prefix("/a")}, true},
		{"leaf sets none", &m{Uri: prefix("/a")}, &m{}, false},
		{"root sets none", &m{}, &m{Uri: regex(".*")}, false},
		{"header narrowed", &m{Headers: map[string]*networking.StringMatch{"x": prefix("a")}},
			&m{Headers: map[string]*networking.StringMatch{"x": exact("ab")}}, false},
		{"ignoreUriCase differs", &m{IgnoreUriCase: true}, &m{}, true},
		{"ports differ", &m{Port: 80}, &m{Port: 81}, true},
		{"sourceNamespace differs", &m{SourceNamespace: "a"}, &m{}, true},
		{"sourceLabels disagree", &m{SourceLabels: map[string]string{"app": "a"}}, &m{SourceLabels: map[string]string{"app": "b"}}, true},
		{"sourceLabels add", &m{SourceLabels: map[string]string{"app": "a"}}, &m{SourceLabels: map[string]string{"v": "1"}}, false},
		{"gateways subset", &m{Gateways: []string{"ns/a", "ns/b"}}, &m{Gateways: []string{"ns/b"}}, false},
		{"gateways not a subset", &m{Gateways: []string{"ns/a"}}, &m{Gateways: []string{"ns/c"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchConflict(tt.root, tt.leaf); got != tt.conflict {
				t.Errorf("matchConflict = %v, want %v", got, tt.conflict)
			}
		})
	}
	merged := mergeMatch(&m{Name: "r", Uri: prefix("/a"), Headers: map[string]*networking.StringMatch{"x": exact("1")}, Port: 80},
		&m{Name: "d", Headers: map[string]*networking.StringMatch{"y": exact("2")}})
	if merged.Name != "r-d" || merged.GetUri().GetPrefix() != "/a" || len(merged.Headers) != 2 || merged.Port != 80 {
		t.Errorf("merged match %v", merged)
	}
	if got := resolveGatewayName("gw", "ns") + " " + resolveGatewayName("./gw", "ns") + " " +
		resolveGatewayName("other/gw", "ns") + " " + resolveGatewayName("gw.other.svc.cluster.local", "ns"); got != "ns/gw ns/gw other/gw other/gw" {
		t.Errorf("resolved gateways %q", got)
	}
}
