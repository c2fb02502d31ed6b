package rules

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestGatewayVirtualHostsShareRoutesNotHosts: one VirtualService bound to
// three servers of a Gateway that differ only in hosts or in httpsRedirect
// gives three virtual hosts with their own domains and require_tls around
// one cached routes part (the routes are port-free): the virtual host's key
// holds its hosts and RequireTLS, the routes part's key everything else.
func TestGatewayVirtualHostsShareRoutesNotHosts(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"gw.yaml": []byte(`
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: gw}
spec:
  hosts: [backend.example]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: gw}
spec:
  selector: {app: gw}
  servers:
  - port: {number: 80, name: http-a, protocol: HTTP}
    hosts: [a.example]
  - port: {number: 8080, name: http-b, protocol: HTTP}
    hosts: [b.example]
  - port: {number: 8081, name: http-a-tls, protocol: HTTP}
    hosts: [a.example]
    tls: {httpsRedirect: true}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: gw}
spec:
  hosts: [a.example, b.example]
  gateways: [gw]
  http:
  - route:
    - destination: {host: backend.example, port: {number: 80}}
`)})
	sc := routerScope(snap, "gw", map[string]string{"app": "gw"})
	cache := verifyCache()
	rs, err := buildRoutes(sc, encode.DefaultMesh(), cache, []string{"http.80", "http.8080", "http.8081"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		domain string
		tls    route.VirtualHost_TlsRequirementType
	}
	wants := map[string]want{
		"http.80":   {"a.example", route.VirtualHost_NONE},
		"http.8080": {"b.example", route.VirtualHost_NONE},
		"http.8081": {"a.example", route.VirtualHost_ALL},
	}
	var routes []*route.Route
	for _, rc := range decodeRoutes(t, rs) {
		w, ok := wants[rc.Name]
		if !ok || len(rc.VirtualHosts) != 1 {
			t.Fatalf("route configuration %s: %d virtual hosts", rc.Name, len(rc.VirtualHosts))
		}
		vh := rc.VirtualHosts[0]
		if len(vh.Domains) != 1 || vh.Domains[0] != w.domain || vh.RequireTls != w.tls {
			t.Errorf("%s: domains %v, require_tls %v; want [%s], %v", rc.Name, vh.Domains, vh.RequireTls, w.domain, w.tls)
		}
		routes = append(routes, vh.Routes...)
	}
	if len(routes) != 3 || routeCluster(routes[0]) != "outbound|80||backend.example" {
		t.Fatalf("routes %v", routes)
	}
	for _, st := range cache.Stats() {
		if st.Kind == "gatewayroutes" && st.Entries != 1 {
			t.Errorf("%d routes parts, want one shared by the three virtual hosts", st.Entries)
		}
	}
}
